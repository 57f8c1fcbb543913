package import EventTransport
package import ProductsDomain
package import Tracing
import Synchronization

/// Per-identifier coalescing across calls, batch elements and worker
/// threads: while identifier X of a scope is being fetched, every call that
/// needs X waits for that fetch instead of asking the upstream again.
///
/// It is also the one owner of the shared fetches: a fetch belongs to it
/// from the claim that creates it until ``finish(_:with:)``, so shutdown
/// asks it alone what is still running (``waitUntilIdle()``), and the last
/// fetch to finish resumes that wait.
///
/// The state machine lives under one mutex held only for dictionary work;
/// starting fetches and resuming waiters happen outside it.
package final class Coalescer: Sendable {
    /// What the waiters of its fetches time their deadlines on.
    private let clock: GatewayClock

    package init(clock: GatewayClock = .system) {
        self.clock = clock
    }

    private struct State {
        package var machine = CoalescerStateMachine<CoalescedFetch>()
        /// Set once the shutdown grace is over: the failure every wait on a
        /// fetch, present or future, ends with at once.
        package var released: ProductsFetchFailure?
    }

    private let state = Mutex(State())
    /// Fetches claimed and not yet finished. Entered under `state`'s lock,
    /// so a fetch is counted before any call can see it.
    private let running = InFlightCounter()

    /// What a call must wait for, and which new fetches it must start.
    package struct Claim {
        /// Every fetch the call waits for: joined ones and its own.
        package var fetches: [CoalescedFetch]
        /// The fetches this call created; the caller starts them.
        package var started: [CoalescedFetch]
        /// Identifiers answered by joining a fetch already in flight.
        package var joinedIdentifierCount: Int
    }

    /// Joins fetches in flight for `identifiers` and claims the rest in
    /// chunks of at most `chunkSize`, atomically. `keys`, when given, are
    /// `identifiers`' (``notInFlight(scope:identifiers:)`` made them for the
    /// same list). `origin` is the claiming call's span, when recorded:
    /// the fetches it starts carry it, for the links of those that join.
    package func claim(scope: FetchScope, identifiers: [String], keys: [ScopedIdentifier]? = nil, chunkSize: Int, origin: SpanContext? = nil) -> Claim {
        // Hashed outside the lock, once: the plan, the claim and the
        // fetch's release all use these keys.
        let keys = keys ?? ScopedIdentifier.keys(scope: scope, identifiers: identifiers)
        precondition(keys.count == identifiers.count, "one key per identifier")
        return state.withLock { state in
            let plan = state.machine.plan(keys: keys)
            var started: [CoalescedFetch] = []
            func startFetch(identifiers: [String], keys: [ScopedIdentifier]) {
                let fetch = CoalescedFetch(scope: scope, identifiers: identifiers, keys: keys, origin: origin, clock: clock)
                if let failure = state.released { fetch.releaseWaiters(with: failure) }
                state.machine.register(fetch, keys: keys)
                running.enter()
                started.append(fetch)
            }
            if plan.joined.isEmpty, keys.count <= chunkSize, !keys.isEmpty {
                // The usual claim: one fetch of everything asked, which
                // keeps the call's own lists.
                startFetch(identifiers: identifiers, keys: keys)
                return Claim(fetches: started, started: started, joinedIdentifierCount: 0)
            }
            var start = plan.unclaimed.startIndex
            while start < plan.unclaimed.endIndex {
                let end = min(start + chunkSize, plan.unclaimed.endIndex)
                let chunk = Array(plan.unclaimed[start..<end])
                startFetch(identifiers: chunk.map(\.identifier), keys: chunk)
                start = end
            }
            let fetches = plan.joined.isEmpty ? started : plan.joined + started
            return Claim(fetches: fetches, started: started, joinedIdentifierCount: plan.joinedIdentifierCount)
        }
    }

    /// Those of `identifiers` that no fetch in flight covers, in order
    /// (`identifiers` itself when none is covered, the usual cold miss).
    /// The shared tier is not asked for the others: the call joins their
    /// fetch in process, and a lease its lookup took for them would be
    /// one no fetch runs under, which another replica could only wait on.
    package func notInFlight(scope: FetchScope, identifiers: [String]) -> [String] {
        notInFlightKeys(scope: scope, identifiers: identifiers).open
    }

    /// ``notInFlight(scope:identifiers:)``, with the keys it hashed when no
    /// identifier is in flight (the list is `identifiers` itself): the
    /// call's claim that follows the shared tier's lookup takes them, and
    /// hashes nothing again.
    package func notInFlightKeys(scope: FetchScope, identifiers: [String]) -> (open: [String], keys: [ScopedIdentifier]?) {
        let keys = ScopedIdentifier.keys(scope: scope, identifiers: identifiers)
        guard running.count > 0 else { return (identifiers, keys) }
        return state.withLock { state in
            guard keys.contains(where: { state.machine.inFlight[$0] != nil }) else { return (identifiers, keys) }
            var open: [String] = []
            for (index, key) in keys.enumerated() where state.machine.inFlight[key] == nil { open.append(identifiers[index]) }
            return (open, nil)
        }
    }

    /// A fetch ended: its identifiers are free again, its waiters get
    /// `outcome`, and a shutdown waiting for the last fetch goes on.
    package func finish(_ fetch: CoalescedFetch, with outcome: CoalescedFetch.Outcome) {
        state.withLock { $0.machine.finish(fetch, keys: fetch.keys) }
        fetch.finish(outcome)
        running.leave()
    }

    /// Ends every wait on a fetch with `failure`, now and from now on
    /// (the shutdown grace is over). The fetches themselves go on.
    package func releaseWaiters(with failure: ProductsFetchFailure) {
        let fetches = state.withLock { state in
            state.released = failure
            return state.machine.fetches
        }
        for fetch in fetches { fetch.releaseWaiters(with: failure) }
    }

    /// Waits until no fetch is running, or the calling task is cancelled.
    /// - Returns: `true` when no fetch is running.
    package func waitUntilIdle() async -> Bool {
        await running.waitUntilIdle()
    }

    /// Fetches claimed and not yet finished.
    package var runningCount: Int { running.count }
}
