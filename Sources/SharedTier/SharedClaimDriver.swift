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
    private let scope: FetchScope
    /// The call's identifiers, in its order.
    private let identifiers: [String]
    /// What a fetch of some of the identifiers asks with (the call's
    /// request id, deadline and trace); nil for the usual miss, whose one
    /// fetch is of the request as it came (``run(_:completion:)``): the
    /// driver keeps no copy of the request.
    private let partRequest: SourceRequest?
    private let token: String
    // No dynamic exclusivity checks on the driver's state: it is confined
    // to its loop, and no access to it outlives the statement that makes
    // it (the machine's events call nothing back), so two never overlap;
    // the checks were a runtime call per access, a dozen per miss.
    @exclusivity(unchecked)
    private var machine: Machine
    /// While anything is waited for: the next look at the entries and claims.
    @exclusivity(unchecked)
    private var pollTimer: ClockTimer?
    /// The loop's renewal sweep, while this replica fetches under its
    /// leases (the one way leases are renewed).
    @exclusivity(unchecked)
    private var renewals: SharedLeaseRenewals?
    @exclusivity(unchecked)
    private var completion: (@Sendable (Outcome) -> Void)?
    /// Identifiers claimed in their claim keys (their entry keys hold a
    /// stale entry); every other claim is a lease in the entry key.
    @exclusivity(unchecked)
    private var claimedInClaimKeys: Set<String> = []
    /// Whether the driver hears other replicas' messages: only when it
    /// claims or waits for anything (a fetch whose lookup won every lease,
    /// the usual miss, needs none).
    @exclusivity(unchecked)
    private var registered = false

    /// A driver for `request` on `loop`, adopting `leases` (those the
    /// call's lookup won for its identifiers); made on `loop`.
    package convenience init(loop: EventLoop, tier: SharedTier, connection: RedisConnection, source: any ProductSource, request: SourceRequest, leases: consuming SharedLeasePermit) {
        // The leases come in by the permit only: `request.preclaim` is not
        // read again. Leases the call's lookup took are this fetch's: it
        // renews, releases and publishes them under the lookup's token.
        let adopted = leases.adopt()
        let token = adopted?.token ?? tier.makeClaimToken()
        if let adopted, adopted.ownsAll(of: request.identifiers) {
            self.init(loop: loop, tier: tier, connection: connection, source: source, request: request, holdingAllUnder: token)
        } else {
            let machine = Machine(
                identifiers: request.identifiers, deadline: request.deadline, poll: SharedTier.poll, patience: tier.waitPatience,
                won: adopted?.won ?? []
            )
            let partRequest = SourceRequest(scope: request.scope, identifiers: [], requestID: request.requestID, deadline: request.deadline, trace: request.trace)
            self.init(loop: loop, tier: tier, connection: connection, source: source, request: request, token: token, machine: machine, partRequest: partRequest)
        }
    }

    /// A driver for the usual miss: the call's lookup won the lease of
    /// every identifier of `request`, under `token`, and this driver holds
    /// them from here (no permit is made to hand them over: its copy of the
    /// lookup's leases showed in the shared-tier miss's profile). Nothing
    /// to claim or wait for. Made on `loop`.
    package convenience init(loop: EventLoop, tier: SharedTier, connection: RedisConnection, source: any ProductSource, request: SourceRequest, holdingAllUnder token: String) {
        let machine = Machine(fetching: request.identifiers, deadline: request.deadline, poll: SharedTier.poll, patience: tier.waitPatience)
        self.init(loop: loop, tier: tier, connection: connection, source: source, request: request, token: token, machine: machine, partRequest: nil)
    }

    private init(
        loop: EventLoop, tier: SharedTier, connection: RedisConnection, source: any ProductSource, request: SourceRequest,
        token: String, machine: consuming Machine, partRequest: SourceRequest?
    ) {
        self.loop = loop
        self.tier = tier
        self.connection = connection
        self.source = source
        self.scope = request.scope
        self.identifiers = request.identifiers
        self.token = token
        self.machine = machine
        self.partRequest = partRequest
    }

    /// Runs the fetch of `request` (the one the driver was made for):
    /// `completion` gets its outcome, from this replica's upstream calls,
    /// the shared cache and other replicas' outcomes together, once, on
    /// `loop`. Call on `loop`.
    package func run(_ request: SourceRequest, completion: @escaping @Sendable (Outcome) -> Void) {
        loop.preconditionInEventLoop()
        self.completion = completion
        // Registered before the first claim is sent: a message can only
        // follow a claim this replica saw.
        if machine.hearsOthers {
            registered = true
            tier.waiters.register(LoopBound(self, loop: loop), scope: scope, identifiers: identifiers)
        }
        let actions = machine.start(now: tier.clock.now)
        // The usual miss's one action: its fetch, of the request as it came.
        if partRequest == nil, actions.count == 1, case .fetch(let all, let claimed) = actions[0] {
            source.fetch(request, on: loop, completion: whenFetched(all, claimed: claimed))
            return
        }
        perform(actions)
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

    /// Does what the machine asked, for any event but a fetch's end
    /// (``fetched(_:_:claimed:)``, whose outcome a `.publish` publishes).
    /// Never inlined: the usual miss's two events do not run through it.
    @inline(never)
    private func perform(_ actions: Machine.Actions) {
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
            case .publish:
                preconditionFailure("a publish comes from a fetch's end only")
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
                finish(with: Self.merge(machine.takeParts()))
            }
        }
    }

    /// Asks the source for `part` of the identifiers; `claimed`: under
    /// this replica's leases, renewed while the fetch runs.
    private func fetch(_ part: [String], claimed: Bool) {
        guard let partRequest else {
            preconditionFailure("the usual miss fetches once, at its start, the request as it came")
        }
        source.fetch(
            SourceRequest(scope: scope, identifiers: part, requestID: partRequest.requestID, deadline: partRequest.deadline, trace: partRequest.trace),
            on: loop, completion: whenFetched(part, claimed: claimed)
        )
    }

    /// What a fetch of `part` calls when it ends; renews the leases of a
    /// `claimed` part meanwhile.
    private func whenFetched(_ part: [String], claimed: Bool) -> @Sendable (Outcome) -> Void {
        if claimed { renewWhileFetching() }
        let driver = LoopBound(self, loop: loop)
        // A source completes on the loop it was asked on (or, once that
        // loop has stopped for good, on the thread that ends the fetch), so
        // there is no hop here; the loop-bound driver checks it.
        return { outcome in driver.value.fetched(part, outcome, claimed: claimed) }
    }

    /// A fetch of `part` ended with `outcome`: what the machine asks then
    /// (for the usual miss: publish, then finish with this very outcome).
    private func fetched(_ part: [String], _ outcome: Outcome, claimed: Bool) {
        if !claimed, case .success(let page) = outcome {
            tier.store(page, scope: scope, identifiers: part, on: connection)
        }
        let actions = machine.fetched(part, outcome, claimed: claimed)
        for index in 0 ..< actions.count {
            switch actions[index] {
            case .publish(let identifiers):
                if claimedInClaimKeys.isEmpty {
                    tier.publish(identifiers, outcome: outcome, scope: scope, token: token, on: connection, leasesInEntryKeys: true)
                } else {
                    forEachClaimPlace(identifiers) { some, leasesInEntryKeys in
                        tier.publish(some, outcome: outcome, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys)
                    }
                }
            case .finish:
                finish(with: machine.answeredByFetch ? outcome : Self.merge(machine.takeParts()))
            default:
                perform(Machine.Actions(actions[index]))
            }
        }
    }

    /// Every identifier is answered: `answer` goes to the caller, and
    /// nothing of the driver is left armed or registered.
    private func finish(with answer: Outcome) {
        pollTimer?.cancel()
        pollTimer = nil
        renewals?.remove(self)
        renewals = nil
        if registered { tier.waiters.unregister(LoopBound(self, loop: loop), scope: scope, identifiers: identifiers) }
        let completion = self.completion
        self.completion = nil
        completion?(answer)
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
        if let connection = tier.coalescingConnection(on: loop) {
            if let preclaim = request.preclaim, preclaim.ownsAll(of: request.identifiers) {
                SharedClaimDriver(loop: loop, tier: tier, connection: connection, source: base, request: request, holdingAllUnder: preclaim.token)
                    .run(request, completion: completion)
            } else {
                let leases = SharedLeasePermit(request.preclaim, tier: tier, on: loop)
                SharedClaimDriver(loop: loop, tier: tier, connection: connection, source: base, request: request, leases: leases).run(request, completion: completion)
            }
            return
        }
        let leases = SharedLeasePermit(request.preclaim, tier: tier, on: loop)
        // Fetched alone: nobody renews the leases, so they go back at once.
        leases.release()
        let tier = self.tier
        // On `loop` (a source completes there): the store goes out on its
        // own connection.
        base.fetch(request, on: loop) { outcome in
            if case .success(let page) = outcome {
                tier.store(page, scope: request.scope, identifiers: request.identifiers, on: loop)
            }
            completion(outcome)
        }
    }
}
