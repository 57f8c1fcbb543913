import EventTransport
import ProductsDomain
import Synchronization

/// One upstream call that any number of callers wait for. Callers leave
/// when their own deadline passes; the fetch itself goes on for the others.
final class SharedFetch: Sendable {
    typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    private struct Waiter {
        let continuation: CheckedContinuation<Outcome, Never>
        /// The deadline's task, off the loops only; on a loop the deadline
        /// is a loop timer that the waiter itself cancels.
        let timer: Task<Void, Never>?
    }

    let scope: FetchScope
    let identifiers: [String]
    private let state = Mutex(FetchPromiseStateMachine<Outcome, Waiter>())
    private let nextWaiterID = Atomic<Int>(0)

    init(scope: FetchScope, identifiers: [String]) {
        self.scope = scope
        self.identifiers = identifiers
    }

    /// Waits for the outcome, or until `deadline`, whichever comes first.
    func outcome(until deadline: ContinuousClock.Instant, onDeadline failure: ProductsFetchFailure) async -> Outcome {
        let id = nextWaiterID.add(1, ordering: .relaxed).oldValue
        if let loop = EventLoop.current {
            return await outcome(on: loop, waiter: id, until: deadline, onDeadline: failure)
        }
        return await withCheckedContinuation { continuation in
            let timer = Task { [self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                guard !Task.isCancelled else { return }
                if let waiter = state.withLock({ $0.removeWaiter(id) }) {
                    waiter.continuation.resume(returning: .failure(failure))
                }
            }
            let action = state.withLock { $0.addWaiter(id, Waiter(continuation: continuation, timer: timer)) }
            switch action {
            case .resume(let outcome):
                timer.cancel()
                continuation.resume(returning: outcome)
            case .suspend:
                // The timer may have fired before the waiter was registered
                // (a deadline already past); then nobody else would resume it.
                if ContinuousClock.now >= deadline, let waiter = state.withLock({ $0.removeWaiter(id) }) {
                    waiter.timer?.cancel()
                    waiter.continuation.resume(returning: .failure(failure))
                }
            }
        }
    }

    /// The wait of a task that runs on `loop`: its deadline is a timer of
    /// that loop, armed and cancelled there, with no task and no thread of
    /// its own. Whoever finishes the fetch (any loop) resumes the
    /// continuation, and the task comes back to `loop`.
    private func outcome(on loop: EventLoop, waiter id: Int, until deadline: ContinuousClock.Instant, onDeadline failure: ProductsFetchFailure) async -> Outcome {
        var timer: LoopTimer?
        let outcome = await withCheckedContinuation { continuation in
            switch state.withLock({ $0.addWaiter(id, Waiter(continuation: continuation, timer: nil)) }) {
            case .resume(let outcome):
                continuation.resume(returning: outcome)
            case .suspend:
                // A deadline already past fires on the loop's next turn.
                timer = loop.scheduleTimer(at: deadline) { [self] in
                    if let waiter = state.withLock({ $0.removeWaiter(id) }) {
                        waiter.continuation.resume(returning: .failure(failure))
                    }
                }
            }
        }
        timer?.cancel()
        return outcome
    }

    /// Hands the outcome to everyone still waiting.
    func finish(_ outcome: Outcome) {
        let waiters = state.withLock { $0.finish(outcome) }
        for waiter in waiters {
            waiter.timer?.cancel()
            waiter.continuation.resume(returning: outcome)
        }
    }

    /// Releases every waiter with `failure`, and every later one, leaving
    /// the fetch running.
    func releaseWaiters(with failure: ProductsFetchFailure) {
        let waiters = state.withLock { $0.release(with: .failure(failure)) }
        for waiter in waiters {
            waiter.timer?.cancel()
            waiter.continuation.resume(returning: .failure(failure))
        }
    }
}
