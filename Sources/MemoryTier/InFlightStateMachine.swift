/// Work in flight, counted, and who waits for the moment none is left: the
/// calls a graceful shutdown lets finish, the shared fetches it waits for.
/// Pure: ``InFlightCounter`` keeps it under a lock and resumes the returned
/// waiters after unlocking.
package struct InFlightStateMachine<Waiter> {
    package enum WaitAction {
        /// The waiter is registered; `leave` or `removeWaiter` hands it back.
        case suspend
        /// Nothing is in flight: resume the waiter at once.
        case resume
    }

    private(set) var count = 0
    private var waiters: [Int: Waiter] = [:]

    package mutating func enter() {
        count += 1
    }

    /// One piece of work ended. Returns the waiters to resume when it was
    /// the last one, in the order they were numbered.
    package mutating func leave() -> [Waiter] {
        precondition(count > 0, "more work left than entered")
        count -= 1
        guard count == 0, !waiters.isEmpty else { return [] }
        defer { waiters = [:] }
        return waiters.sorted { $0.key < $1.key }.map(\.value)
    }

    package mutating func addWaiter(_ id: Int, _ waiter: Waiter) -> WaitAction {
        guard count > 0 else { return .resume }
        precondition(waiters[id] == nil, "waiter \(id) registered twice")
        waiters[id] = waiter
        return .suspend
    }

    /// A waiter gives up (its task was cancelled). Returns it if it was still
    /// waiting, so it is resumed exactly once.
    package mutating func removeWaiter(_ id: Int) -> Waiter? {
        waiters.removeValue(forKey: id)
    }

    package var waiterCount: Int { waiters.count }
}
