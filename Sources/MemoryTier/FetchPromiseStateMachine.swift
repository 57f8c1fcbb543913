/// The waiters of one shared fetch, as a pure state machine: who waits,
/// who has left, and who gets the result. The owner keeps it under a lock
/// and resumes the returned waiters after unlocking.
package struct FetchPromiseStateMachine<Value, Waiter> {
    package enum State {
        case pending
        /// Every waiter was let go with this value (the shutdown grace is
        /// over), and every later one gets it at once, even after the fetch
        /// ends: a call that is between two of its fetches then must not
        /// see the failure the shutdown itself caused (a refused lease).
        case released(Value)
        case finished(Value)
    }

    package enum WaitAction {
        /// The waiter is registered; it will be handed back by `finish`,
        /// `removeWaiter` or `release`.
        case suspend
        /// The fetch has already ended, or its waiters were released:
        /// resume the waiter with this at once.
        case resume(Value)
    }

    private(set) var state: State = .pending

    /// What a waiter added now would get at once, or nil while pending.
    package var settled: Value? {
        switch state {
        case .pending: nil
        case .released(let value), .finished(let value): value
        }
    }
    /// The waiters while pending. Kept beside the state, not in it, so
    /// adding one to a herd of a thousand does not copy the other 999.
    /// Most fetches have one waiter (the call that started it): it is kept
    /// in `single`, and the dictionary is only made for a second one.
    private var single: (id: Int, waiter: Waiter)?
    private var waiters: [Int: Waiter] = [:]

    package mutating func addWaiter(_ id: Int, _ waiter: Waiter) -> WaitAction {
        switch state {
        case .pending:
            precondition(single?.id != id, "waiter \(id) registered twice")
            if single == nil, waiters.isEmpty {
                single = (id, waiter)
            } else {
                precondition(waiters.updateValue(waiter, forKey: id) == nil, "waiter \(id) registered twice")
            }
            return .suspend
        case .released(let value), .finished(let value):
            return .resume(value)
        }
    }

    /// A waiter leaves (its deadline passed). Returns it if it was still
    /// waiting, so it is resumed exactly once; the fetch goes on regardless.
    package mutating func removeWaiter(_ id: Int) -> Waiter? {
        guard case .pending = state else { return nil }
        if let single, single.id == id {
            self.single = nil
            return single.waiter
        }
        return waiters.removeValue(forKey: id)
    }

    /// Every waiter leaves at once with `value`, and so does every later
    /// one (the shutdown grace is over). Returns the waiters to resume with
    /// `value`.
    package mutating func release(with value: Value) -> [Waiter] {
        guard case .pending = state else { return [] }
        state = .released(value)
        return takeWaiters()
    }

    /// The fetch ended: returns the waiters to resume with `value`. Later
    /// waiters get `value` at once.
    package mutating func finish(_ value: Value) -> [Waiter] {
        switch state {
        case .pending:
            state = .finished(value)
            return takeWaiters()
        case .released:
            return []
        case .finished:
            preconditionFailure("a fetch finished twice")
        }
    }

    /// The waiters in the order they came, leaving none.
    private mutating func takeWaiters() -> [Waiter] {
        defer {
            single = nil
            waiters = [:]
        }
        if waiters.isEmpty { return single.map { [$0.waiter] } ?? [] }
        var all = Array(waiters)
        if let single { all.append((key: single.id, value: single.waiter)) }
        return all.sorted { $0.key < $1.key }.map(\.value)
    }

    package var waiterCount: Int {
        if case .pending = state { return waiters.count + (single == nil ? 0 : 1) }
        return 0
    }
}
