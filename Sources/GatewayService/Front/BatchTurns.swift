import GatewayMetrics
import MemoryTier
import RedisTier
import Synchronization

/// Turns for batch requests (`GATEWAY_BATCH_CONCURRENCY`): at most that
/// many batches are being answered at once in the process, each from its
/// start until its answer is handed to its connection; more wait their
/// turn, first come first served.
///
/// A batch's answer can be `GATEWAY_MAX_BATCH` × `GATEWAY_MAX_IDS` products
/// (about 1.7 MB at the defaults, from a 27 KB body), and its calls' results
/// are held while it is made. Without turns, memory grew with the
/// connections sending batches (200 connections of such batches: 339 MB);
/// with them it grows with this setting. Once handed to the connection, an
/// answer no longer needs a turn: the bytes of answers waiting for slow
/// readers are bounded in total by the front (past the bound, the
/// connection holding the most is reset), so a client that never reads
/// holds no turn (16 such clients held every turn for a write deadline each
/// when a turn lasted until the last byte was written). Single calls do not
/// take turns: their answer is bounded by `GATEWAY_MAX_IDS` products.
///
/// Waiting is bounded as well: at most 4 × `GATEWAY_BATCH_CONCURRENCY`
/// batches wait (one more is told the queue is full, `503`), each holding
/// only its request's bytes, a wait ends at the batch's deadline (its
/// calls then answer from memory, or `cancelled`, without a turn), and a
/// batch whose task is cancelled (its connection closed) leaves the queue
/// at once, freeing its place.
final class BatchTurns: Sendable {
    /// A batch's turn. It ends when its last reference goes (the batch's
    /// answer handed over, or the batch given up), so no path can forget to
    /// end it, nor end it twice.
    final class Turn: Sendable {
        private let turns: BatchTurns

        fileprivate init(_ turns: BatchTurns) {
            self.turns = turns
        }

        deinit {
            turns.end()
        }
    }

    /// How a wait for a turn ended.
    enum Wait: Sendable {
        case turn(Turn)
        /// As many batches as allowed already wait: answer `503`.
        case queueFull
        /// The deadline passed first.
        case deadlinePassed
        /// The task was cancelled (the client hung up) while it waited, or
        /// before it would have: it left the queue, and gets no turn.
        case cancelled
    }

    /// How a wait's continuation is resumed.
    private enum Resumed {
        /// A turn was free after all: the batch never waited.
        case turnAtOnce
        /// A turn handed over by a batch that ended its own.
        case turn
        /// Left the queue (deadline or cancellation), or never joined it.
        case left
    }

    private struct Waiter {
        let ticket: UInt64
        let continuation: CheckedContinuation<Resumed, Never>
    }

    private struct State {
        var free: Int
        /// First come, first served: `waiting[head...]` are still waiting.
        var waiting: [Waiter] = []
        var head = 0
        var nextTicket: UInt64 = 0
        /// Batches that passed the cap and are about to queue: their
        /// places are taken.
        var joining = 0

        var waitingCount: Int { waiting.count - head }
    }

    private let state: Mutex<State>
    private let waitingChanged: @Sendable (Int) -> Void
    /// 4 × the concurrency.
    let maxWaiting: Int

    /// - Parameters:
    ///   - concurrency: Batches answered at once (at least 1).
    ///   - waitingChanged: Told +1 when a batch starts to wait, -1 when it
    ///     gets its turn (the `gateway_batches_waiting` gauge); called under
    ///     the lock, so the two never arrive out of order. It must be quick.
    init(concurrency: Int, waitingChanged: @escaping @Sendable (Int) -> Void = { _ in }) {
        precondition(concurrency >= 1, "a batch concurrency below 1 would never answer a batch")
        state = Mutex(State(free: concurrency))
        self.waitingChanged = waitingChanged
        self.maxWaiting = 4 * concurrency
    }

    /// Batches waiting for their turn now.
    var waiting: Int { state.withLock { $0.waitingCount } }

    /// The caller's turn, at once when one is free, else when the batches
    /// ahead have ended theirs, unless ``maxWaiting`` batches already wait
    /// (``Wait/queueFull``, at once) or `deadline` comes first
    /// (``Wait/deadlinePassed``), or the task is cancelled before its turn
    /// comes (``Wait/cancelled``: it leaves the queue at once, or never
    /// joins it). A free turn is taken even by a cancelled task: its client
    /// may only have shut its sending side, and a batch that does not wait
    /// holds no place. A turn given to a task that no longer wants it ends
    /// as soon as it is dropped.
    func begin(until deadline: ContinuousClock.Instant) async -> Wait {
        enum Start { case now, full, wait(UInt64) }
        let start = state.withLock { state -> Start in
            if state.free > 0 {
                state.free -= 1
                return .now
            }
            // The place is taken now, not when the waiter is queued below:
            // batches of other loops check the cap in between.
            guard state.waitingCount + state.joining < maxWaiting else { return .full }
            state.joining += 1
            state.nextTicket += 1
            return .wait(state.nextTicket)
        }
        let ticket: UInt64
        switch start {
        case .now: return .turn(Turn(self))
        case .full: return .queueFull
        case .wait(let number): ticket = number
        }
        let timeout = WaitTimeout()
        let resumed = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Resumed, Never>) in
                // Checked again under the lock: a turn may have ended
                // meanwhile. Cancellation too: the task's flag is set before
                // its handler runs, and the handler takes this lock, so a
                // cancellation that comes before the waiter is queued is
                // seen here, and one that comes after finds it queued.
                enum Queued { case turn, cancelled, waiting }
                let queued = state.withLock { state -> Queued in
                    state.joining -= 1
                    if state.free > 0 {
                        state.free -= 1
                        return .turn
                    }
                    if Task.isCancelled { return .cancelled }
                    state.waiting.append(Waiter(ticket: ticket, continuation: continuation))
                    waitingChanged(1)
                    return .waiting
                }
                switch queued {
                case .turn:
                    continuation.resume(returning: .turnAtOnce)
                    return
                case .cancelled:
                    continuation.resume(returning: .left)
                    return
                case .waiting:
                    break
                }
                // Armed once the waiter is queued, so it always finds it (or
                // finds it served, and does nothing).
                timeout.start { [self] in
                    // Not a moment early: the batch's calls must find their
                    // deadline passed, and start no fetch.
                    while ContinuousClock.now < deadline {
                        try? await Task.sleep(until: deadline, clock: .continuous)
                        guard !Task.isCancelled else { return }
                    }
                    cancelWait(ticket)
                }
            }
        } onCancel: {
            cancelWait(ticket)
        }
        timeout.cancel()
        switch resumed {
        case .turnAtOnce:
            return .turn(Turn(self))
        case .turn:
            guard !Task.isCancelled else {
                // Handed over just as the client left: it goes on at once.
                end()
                return .cancelled
            }
            return .turn(Turn(self))
        case .left:
            return Task.isCancelled ? .cancelled : .deadlinePassed
        }
    }

    /// Ends the wait of `ticket`, if it still waits: it gets no turn.
    private func cancelWait(_ ticket: UInt64) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiting[state.head...].firstIndex(where: { $0.ticket == ticket }) else { return nil }
            let waiter = state.waiting.remove(at: index)
            waitingChanged(-1)
            if state.head == state.waiting.count {
                state.waiting.removeAll()
                state.head = 0
            }
            return waiter
        }
        waiter?.continuation.resume(returning: .left)
    }

    /// A turn ended: handed straight to the first waiting batch, if any.
    private func end() {
        let next = state.withLock { state -> Waiter? in
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
        next?.continuation.resume(returning: .turn)
    }
}

/// The task that ends one wait at its deadline; cancelled when the wait
/// ends first (it may be started after that: it then never runs).
private final class WaitTimeout: Sendable {
    private let state = Mutex<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))

    func start(_ work: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            guard !state.cancelled else { return }
            // On the shared pool, not on the caller's event loop: a sleeping
            // task is woken by the runtime's timer, which a loop executor
            // does not serve.
            state.task = Task(executorPreference: globalConcurrentExecutor, operation: work)
        }
    }

    func cancel() {
        state.withLock { state in
            state.cancelled = true
            state.task?.cancel()
            state.task = nil
        }
    }
}
