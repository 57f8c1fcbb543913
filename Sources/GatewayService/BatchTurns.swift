import Synchronization

/// Turns for batch requests (`GATEWAY_BATCH_CONCURRENCY`): at most that
/// many batches are being answered at once in the process, each from its
/// start to its answer's last byte written to the client; more wait their
/// turn, first come first served.
///
/// A batch's answer can be `GATEWAY_MAX_BATCH` × `GATEWAY_MAX_IDS` products
/// (about 1.7 MB at the defaults, from a 27 KB body), and it is held until
/// the client has read it. Without turns, memory grew with the connections
/// sending batches (200 connections of such batches: 339 MB); with them it
/// grows with this setting. Single calls do not take turns: their answer is
/// bounded by `GATEWAY_MAX_IDS` products.
///
/// Every turn ends: a batch's calls end by their deadline, and its answer
/// is written or its connection closed within the idle timeout. So a wait
/// is bounded too, by the turns ahead of it.
final class BatchTurns: Sendable {
    /// A batch's turn. It ends when its last reference goes: the
    /// connection keeps it with the answer until the answer is written or
    /// the connection closes (``HTTPResponse/heldUntilWritten``), so no
    /// path can forget to end it, nor end it twice.
    final class Turn: Sendable {
        private let turns: BatchTurns

        fileprivate init(_ turns: BatchTurns) {
            self.turns = turns
        }

        deinit {
            turns.end()
        }
    }

    private struct State {
        var free: Int
        /// First come, first served: `waiting[head...]` are still waiting.
        var waiting: [CheckedContinuation<Void, Never>] = []
        var head = 0

        var waitingCount: Int { waiting.count - head }
    }

    private let state: Mutex<State>
    private let waitingChanged: @Sendable (Int) -> Void

    /// - Parameters:
    ///   - concurrency: Batches answered at once (at least 1).
    ///   - waitingChanged: Told +1 when a batch starts to wait, -1 when it
    ///     gets its turn (the `gateway_batches_waiting` gauge); called under
    ///     the lock, so the two never arrive out of order. It must be quick.
    init(concurrency: Int, waitingChanged: @escaping @Sendable (Int) -> Void = { _ in }) {
        precondition(concurrency >= 1, "a batch concurrency below 1 would never answer a batch")
        state = Mutex(State(free: concurrency))
        self.waitingChanged = waitingChanged
    }

    /// Batches waiting for their turn now.
    var waiting: Int { state.withLock { $0.waitingCount } }

    /// The caller's turn, at once when one is free, else when the batches
    /// ahead have ended theirs. Not cancellable: a request's task is never
    /// cancelled, and a turn given to a task that no longer wants it ends as
    /// soon as it is dropped.
    func begin() async -> Turn {
        let now = state.withLock { state -> Bool in
            guard state.free > 0 else { return false }
            state.free -= 1
            return true
        }
        if now { return Turn(self) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Checked again under the lock: a turn may have ended meanwhile.
            let now = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                waitingChanged(1)
                return false
            }
            if now { continuation.resume() }
        }
        return Turn(self)
    }

    /// A turn ended: handed straight to the first waiting batch, if any.
    private func end() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.head < state.waiting.count else {
                state.free += 1
                return nil
            }
            let next = state.waiting[state.head]
            state.head += 1
            waitingChanged(-1)
            // Forget the served prefix once it is most of the array, so the
            // queue's memory follows the batches waiting, not all that ever did.
            if state.head == state.waiting.count {
                state.waiting.removeAll()
                state.head = 0
            } else if state.head > 32, state.head * 2 > state.waiting.count {
                state.waiting.removeFirst(state.head)
                state.head = 0
            }
            return next
        }
        next?.resume()
    }
}
