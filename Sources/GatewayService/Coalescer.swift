import Synchronization

/// Per-identifier coalescing across calls, batch elements and worker
/// threads: while identifier X of a scope is being fetched, every call that
/// needs X waits for that fetch instead of asking the upstream again.
///
/// The state machine lives under one mutex held only for dictionary work;
/// starting fetches and resuming waiters happen outside it.
final class Coalescer: Sendable {
    private let state = Mutex(CoalescerStateMachine<SharedFetch>())

    /// What a call must wait for, and which new fetches it must start.
    struct Claim {
        /// Every fetch the call waits for: joined ones and its own.
        var fetches: [SharedFetch]
        /// The fetches this call created; the caller starts them.
        var started: [SharedFetch]
        /// Identifiers answered by joining a fetch already in flight.
        var joinedIdentifierCount: Int
    }

    /// Joins fetches in flight for `identifiers` and claims the rest in
    /// chunks of at most `chunkSize`, atomically.
    func claim(scope: FetchScope, identifiers: [String], chunkSize: Int) -> Claim {
        state.withLock { machine in
            let plan = machine.plan(scope: scope, identifiers: identifiers)
            var started: [SharedFetch] = []
            var start = plan.unclaimed.startIndex
            while start < plan.unclaimed.endIndex {
                let end = min(start + chunkSize, plan.unclaimed.endIndex)
                let chunk = Array(plan.unclaimed[start..<end])
                let fetch = SharedFetch(scope: scope, identifiers: chunk)
                machine.register(fetch, identifiers: chunk, scope: scope)
                started.append(fetch)
                start = end
            }
            return Claim(fetches: plan.joined + started, started: started, joinedIdentifierCount: plan.joinedIdentifierCount)
        }
    }

    /// Forgets a fetch that has ended.
    func finish(_ fetch: SharedFetch) {
        state.withLock { $0.finish(fetch, identifiers: fetch.identifiers, scope: fetch.scope) }
    }

    /// Every fetch in flight.
    var inFlight: [SharedFetch] {
        state.withLock { $0.fetches }
    }
}
