import Synchronization

/// Counts work in flight and lets shutdown wait until none is left, with
/// no polling: the last ``leave()`` resumes the waiters.
///
/// `enter` and `leave` take a lock held only for an integer update; they
/// never suspend and never move the caller to another thread.
package final class InFlightCounter: Sendable {
    package init() {}

    private let state = Mutex(InFlightStateMachine<CheckedContinuation<Bool, Never>>())
    private let nextWaiterID = Atomic<Int>(0)

    /// Work in flight right now.
    package var count: Int { state.withLock { $0.count } }

    package func enter() {
        state.withLock { $0.enter() }
    }

    package func leave() {
        let waiters = state.withLock { $0.leave() }
        for waiter in waiters { waiter.resume(returning: true) }
    }

    /// Waits until nothing is in flight.
    /// - Parameter cancellable: When true, the wait also ends when the
    ///   calling task is cancelled (the shutdown grace is over).
    /// - Returns: `true` when nothing is in flight, `false` when the wait
    ///   was cut short by cancellation.
    @discardableResult
    package func waitUntilIdle(cancellable: Bool = true) async -> Bool {
        let id = nextWaiterID.add(1, ordering: .relaxed).oldValue
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                switch state.withLock({ $0.addWaiter(id, continuation) }) {
                case .resume:
                    continuation.resume(returning: true)
                case .suspend:
                    // Cancelled before the waiter was registered: the
                    // handler found nobody to resume, so resume here.
                    if cancellable, Task.isCancelled, let waiter = state.withLock({ $0.removeWaiter(id) }) {
                        waiter.resume(returning: false)
                    }
                }
            }
        } onCancel: {
            if cancellable, let waiter = state.withLock({ $0.removeWaiter(id) }) {
                waiter.resume(returning: false)
            }
        }
    }
}
