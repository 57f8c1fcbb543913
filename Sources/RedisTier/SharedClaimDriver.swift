import GatewayMetrics
package import MemoryTier
package import EventTransport
import JSONRPC
package import ProductsDomain

/// Runs one fetch's ``SharedClaimStateMachine`` on the loop the fetch runs
/// on: Redis replies, the upstream fetch, the poll timer, the loop's renewal sweep and
/// other replicas' messages all come back to this loop, so the machine
/// needs no lock. The one driver of the shared tier: the usual miss (its
/// lookup won every lease) starts the machine at `.fetch`, any other at
/// its claims.
///
/// Confined to its loop: what reaches it from elsewhere (the upstream's
/// answer, another replica's message) holds it in a ``LoopBound``, which
/// checks the thread on every access.
package final class SharedClaimDriver: SharedLeaseHolder {
    package typealias Outcome = Result<SourcePage, ProductsFetchFailure>
    package typealias Machine = SharedClaimStateMachine<SourcePage>

    package let loop: EventLoop
    private let tier: SharedTier
    private let connection: RedisConnection
    private let source: any ProductSource
    private let request: SourceRequest
    /// `request.scope`, kept apart: read on every step, where a read
    /// through `request` copies the whole request.
    private let scope: FetchScope
    private let token: String
    private var machine: Machine
    /// While anything is waited for: the next look at the entries and claims.
    private var pollTimer: ClockTimer?
    /// The loop's renewal sweep, while this replica fetches under its
    /// leases (the one way leases are renewed).
    private var renewals: SharedLeaseRenewals?
    private var completion: (@Sendable (Outcome) -> Void)?
    /// Identifiers claimed in their claim keys (their entry keys hold a
    /// stale entry); every other claim is a lease in the entry key.
    private var claimedInClaimKeys: Set<String> = []
    /// Whether the driver hears other replicas' messages: only when it
    /// claims or waits for anything (a fetch whose lookup won every lease,
    /// the usual miss, needs none).
    private var registered = false

    /// A driver for `request` on `loop`, adopting `leases` (those the
    /// call's lookup won for its identifiers); made on `loop`.
    package init(loop: EventLoop, tier: SharedTier, connection: RedisConnection, source: any ProductSource, request: SourceRequest, leases: consuming SharedLeasePermit) {
        self.loop = loop
        self.tier = tier
        self.connection = connection
        self.source = source
        // The leases come in by the permit only: `request.preclaim` is not
        // read again.
        self.request = request
        self.scope = request.scope
        let adopted = leases.adopt()
        // Leases the call's lookup took are this fetch's: it renews,
        // releases and publishes them under the lookup's token.
        self.token = adopted?.token ?? tier.makeClaimToken()
        if let adopted, adopted.ownsAll(of: request.identifiers) {
            // The usual miss: nothing to claim or wait for.
            self.machine = Machine(fetching: request.identifiers, deadline: request.deadline, poll: SharedTier.poll, patience: tier.waitPatience)
        } else {
            self.machine = Machine(
                identifiers: request.identifiers, deadline: request.deadline, poll: SharedTier.poll, patience: tier.waitPatience,
                won: adopted?.won ?? []
            )
        }
    }

    /// Runs the fetch: `completion` gets its outcome, from this replica's
    /// upstream calls, the shared cache and other replicas' outcomes
    /// together, once, on `loop`. Call on `loop`.
    package func run(completion: @escaping @Sendable (Outcome) -> Void) {
        loop.preconditionInEventLoop()
        self.completion = completion
        // Registered before the first claim is sent: a message can only
        // follow a claim this replica saw.
        if machine.hearsOthers {
            registered = true
            tier.waiters.register(LoopBound(self, loop: loop), scope: scope, identifiers: request.identifiers)
        }
        perform(machine.start(now: tier.clock.now))
    }

    /// The subscriber dropped: no outcome can arrive any more. On `loop`.
    package func sharedTierLost() {
        loop.preconditionInEventLoop()
        perform(machine.sharedTierLost())
    }

    /// A message of another replica, on `loop`.
    package func received(_ message: SharedOutcomeMessage) {
        loop.preconditionInEventLoop()
        guard message.scope == scope else { return }
        switch message.kind {
        case .success(let page): perform(machine.received(message.identifiers, .success(page)))
        case .failure(let failure): perform(machine.received(message.identifiers, .failure(failure)))
        case .released: perform(machine.released(message.identifiers, now: tier.clock.now))
        }
    }

    /// Does what the machine asked; `fetched`: the outcome of the fetch
    /// whose end returned `actions` (what a `.publish` publishes).
    private func perform(_ actions: Machine.Actions, fetched: Outcome? = nil) {
        // By index: no iterator holding a copy of the list.
        for index in 0 ..< actions.count {
            switch actions[index] {
            case .claim(let identifiers):
                tier.claim(identifiers, scope: scope, token: token, on: connection) { [self] reply in
                    if let reply {
                        claimedInClaimKeys.formUnion(reply.wonInClaimKeys)
                        perform(machine.claimed(identifiers, won: reply.won, unflagged: reply.unflagged, entries: reply.entries, now: tier.clock.now))
                    } else {
                        // Redis stalled or failed: what is waited for could
                        // wait in vain; carry on alone.
                        perform(machine.claimFailed(identifiers))
                        perform(machine.sharedTierLost())
                    }
                }
            case .fetch(let identifiers, let claimed):
                fetch(identifiers, claimed: claimed)
            case .publish(let identifiers):
                guard let outcome = fetched else { preconditionFailure("a publish comes from a fetch's end only") }
                forEachClaimPlace(identifiers) { part, leasesInEntryKeys in
                    tier.publish(part, outcome: outcome, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys)
                }
            case .release(let identifiers):
                forEachClaimPlace(identifiers) { part, leasesInEntryKeys in
                    tier.releaseAndAnnounce(part, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys)
                }
            case .waitUntil(let deadline):
                pollTimer?.cancel()
                pollTimer = tier.clock.scheduleTimer(on: loop, at: deadline) { [self] in
                    pollTimer = nil
                    perform(machine.pollDue(now: tier.clock.now))
                }
            case .waitsEnded(let end, let count):
                tier.metrics.recordSharedWaitsEnded(end.rawValue, count)
            case .finish:
                pollTimer?.cancel()
                pollTimer = nil
                renewals?.remove(self)
                renewals = nil
                if registered { tier.waiters.unregister(LoopBound(self, loop: loop), scope: scope, identifiers: request.identifiers) }
                let completion = self.completion
                self.completion = nil
                completion?(machine.answeredByFetch ? fetched! : Self.merge(machine.takeParts()))
            }
        }
    }

    /// Asks the source for `identifiers`; `claimed`: under this replica's
    /// leases, renewed while the fetch runs.
    private func fetch(_ identifiers: [String], claimed: Bool) {
        if claimed { renewWhileFetching() }
        let driver = LoopBound(self, loop: loop)
        // A fetch of everything ends the driver: should its loop refuse
        // work (stopped), the caller still gets the outcome, as it would
        // without the tier.
        let lastResort = identifiers.count == request.identifiers.count ? completion : nil
        let fetched: @Sendable (Outcome) -> Void = { outcome in
            // A method, not a closure, on the loop (the usual case: the
            // upstream answers on the loop that asked): no context
            // allocated per fetch.
            if driver.loop.inEventLoop {
                driver.value.fetched(identifiers, outcome, claimed: claimed)
            } else if !driver.loop.execute({ driver.value.fetched(identifiers, outcome, claimed: claimed) }) {
                lastResort?(outcome)
            }
        }
        // The usual miss fetches the request as it came (no copy of it);
        // a part gets a request of its own.
        if identifiers == request.identifiers {
            source.fetch(request, on: loop, completion: fetched)
        } else {
            source.fetch(SourceRequest(scope: scope, identifiers: identifiers, requestID: request.requestID, deadline: request.deadline, trace: request.trace), on: loop, completion: fetched)
        }
    }

    private func fetched(_ identifiers: [String], _ outcome: Outcome, claimed: Bool) {
        if !claimed, case .success(let page) = outcome {
            tier.store(page, scope: scope, identifiers: identifiers, on: connection)
        }
        perform(machine.fetched(identifiers, outcome, claimed: claimed), fetched: outcome)
    }

    /// While a claimed fetch runs, the loop's sweep renews its leases
    /// every ``SharedTier/renewal``: a lease lapses only when this replica
    /// stops (dies, or loses Redis).
    private func renewWhileFetching() {
        guard renewals == nil else { return }
        renewals = tier.renewals(for: loop)
        renewals?.add(self)
    }

    /// Called by the loop's renewal sweep.
    package func renewLeases() {
        let leased = machine.leased
        guard !leased.isEmpty, !machine.isFinished else { return }
        forEachClaimPlace(leased) { part, leasesInEntryKeys in
            tier.renew(part, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys)
        }
    }

    /// `body` for `identifiers` split by where their claims are: leases in
    /// the entry keys, then the claim keys; no empty part. No array is made
    /// when every claim is a lease (the usual miss).
    private func forEachClaimPlace(_ identifiers: [String], _ body: ([String], _ leasesInEntryKeys: Bool) -> Void) {
        guard !claimedInClaimKeys.isEmpty else { return body(identifiers, true) }
        var leases: [String] = []
        var claims: [String] = []
        for identifier in identifiers {
            if claimedInClaimKeys.contains(identifier) { claims.append(identifier) } else { leases.append(identifier) }
        }
        if !leases.isEmpty { body(leases, true) }
        if !claims.isEmpty { body(claims, false) }
    }

    /// One outcome from the parts: the most severe failure if any failed,
    /// else one page with every part's products, kept no longer than its
    /// shortest-lived part allows.
    package static func merge(_ parts: [Outcome]) -> Outcome {
        if parts.count == 1 { return parts[0] }
        var failures: [ProductsFetchFailure] = []
        var pages: [SourcePage] = []
        for part in parts {
            switch part {
            case .success(let page): pages.append(page)
            case .failure(let failure): failures.append(failure)
            }
        }
        if let failure = ProductsFetchFailure.mostSevere(failures) { return .failure(failure) }
        if pages.count == 1 { return .success(pages[0]) }
        var products: [String: EncodedJSON] = [:]
        for page in pages {
            for (identifier, product) in page.encodedProducts where products[identifier] == nil { products[identifier] = product }
        }
        func shortest(_ value: (SourcePage) -> Int?) -> Int? {
            var result: Int?
            for page in pages {
                guard let seconds = value(page) else { return nil }
                result = min(result ?? seconds, seconds)
            }
            return result
        }
        return .success(SourcePage(
            encodedProducts: products,
            maxAgeSeconds: shortest(\.maxAgeSeconds),
            staleIfErrorSeconds: shortest(\.staleIfErrorSeconds),
            staleWhileRevalidateSeconds: shortest(\.staleWhileRevalidateSeconds)
        ))
    }
}

/// The upstream (or catalog) behind the shared tier: a fetch claims its
/// identifiers across replicas first, when Redis and the subscriber are
/// ready; otherwise it fetches alone and stores what may be kept.
package struct SharedTierSource: ProductSource {
    package let base: any ProductSource
    package let tier: SharedTier

    package init(base: any ProductSource, tier: SharedTier) {
        self.base = base
        self.tier = tier
    }

    /// By callback, with no task: with the tier ready on `loop`, a driver
    /// on that loop; otherwise the base source alone.
    package func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
        let leases = SharedLeasePermit(request.preclaim, tier: tier, on: loop)
        if let connection = tier.coalescingConnection(on: loop) {
            SharedClaimDriver(loop: loop, tier: tier, connection: connection, source: base, request: request, leases: leases).run(completion: completion)
            return
        }
        // Fetched alone: nobody renews the leases, so they go back at once.
        leases.release()
        let tier = self.tier
        base.fetch(request, on: loop) { outcome in
            let stored: @Sendable () -> Void = {
                if case .success(let page) = outcome {
                    tier.store(page, scope: request.scope, identifiers: request.identifiers, on: loop)
                }
                completion(outcome)
            }
            // The store goes out on `loop`'s own connection.
            if loop.inEventLoop { stored() } else if !loop.execute(stored) { completion(outcome) }
        }
    }
}
