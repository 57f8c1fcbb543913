import EventTransport
import JSONRPC
import ProductsDomain

/// Runs one fetch's ``SharedClaimStateMachine`` on the loop the fetch runs
/// on: Redis replies, the upstream fetch, the lapse timer and other
/// replicas' messages all come back to this loop, so the machine needs no
/// lock.
final class SharedClaimDriver: @unchecked Sendable {
    // @unchecked: every mutable field is touched on `loop` only; messages
    // from the subscriber's loop arrive through `loop.execute`.

    typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    let loop: EventLoop
    private let tier: SharedTier
    private let connection: RedisConnection
    private let source: any ProductSource
    private let request: SourceRequest
    private let token: String
    private var machine: SharedClaimStateMachine<SourcePage>
    private var lapseTimer: LoopTimer?
    /// While waiting: checks now and then that Redis still answers, so a
    /// stalled Redis does not hold the wait until the claim's lapse.
    private var probeTimer: LoopTimer?
    private var continuation: CheckedContinuation<Outcome, Never>?

    init(loop: EventLoop, tier: SharedTier, connection: RedisConnection, source: any ProductSource, request: SourceRequest) {
        self.loop = loop
        self.tier = tier
        self.connection = connection
        self.source = source
        self.request = request
        self.token = tier.makeClaimToken()
        self.machine = SharedClaimStateMachine(identifiers: request.identifiers, deadline: request.deadline, lapse: tier.claimLapse)
    }

    /// The fetch's outcome, from this replica's upstream calls, the shared
    /// cache and other replicas' outcomes together.
    func run() async -> Outcome {
        loop.preconditionInEventLoop()
        // Registered before the first claim is sent: a message can only
        // follow a claim this replica saw.
        tier.waiters.register(self, scope: request.scope, identifiers: request.identifiers)
        return await withCheckedContinuation { continuation in
            self.continuation = continuation
            perform(machine.start())
        }
    }

    /// The subscriber dropped: no outcome can arrive any more. On `loop`.
    func sharedTierLost() {
        loop.preconditionInEventLoop()
        perform(machine.sharedTierLost())
    }

    /// A message of another replica, on `loop`.
    func received(_ message: SharedOutcomeMessage) {
        loop.preconditionInEventLoop()
        guard message.scope == request.scope else { return }
        switch message.kind {
        case .success(let page): perform(machine.received(message.identifiers, .success(page)))
        case .failure(let failure): perform(machine.received(message.identifiers, .failure(failure)))
        case .released: perform(machine.released(message.identifiers))
        }
    }

    private func perform(_ actions: [SharedClaimStateMachine<SourcePage>.Action]) {
        for action in actions {
            switch action {
            case .claim(let identifiers):
                tier.claim(identifiers, scope: request.scope, token: token, on: connection) { [self] reply in
                    if let reply {
                        perform(machine.claimed(identifiers, won: reply.won, entries: reply.entries, now: .now))
                    } else {
                        perform(machine.claimFailed(identifiers))
                    }
                }
            case .fetch(let identifiers, let claimed):
                let part = SourceRequest(scope: request.scope, identifiers: identifiers, requestID: request.requestID, deadline: request.deadline)
                Task(executorPreference: loop) { [self, source] in
                    let outcome = await source.fetch(part)
                    if !claimed, case .success(let page) = outcome {
                        tier.store(page, scope: request.scope, identifiers: identifiers)
                    }
                    perform(machine.fetched(identifiers, outcome, claimed: claimed))
                }
            case .publish(let identifiers, let outcome):
                tier.publish(identifiers, outcome: outcome, scope: request.scope, token: token, on: connection)
            case .release(let identifiers):
                tier.releaseAndAnnounce(identifiers, scope: request.scope, token: token, on: connection)
            case .waitUntil(let deadline):
                lapseTimer?.cancel()
                lapseTimer = loop.scheduleTimer(at: deadline) { [self] in
                    lapseTimer = nil
                    perform(machine.lapsed(now: .now))
                }
                armProbe()
            case .finish(let parts):
                lapseTimer?.cancel()
                lapseTimer = nil
                probeTimer?.cancel()
                probeTimer = nil
                tier.waiters.unregister(self, scope: request.scope, identifiers: request.identifiers)
                continuation?.resume(returning: Self.merge(parts))
                continuation = nil
            }
        }
    }

    /// While anything is waited for: a `PING` every ``SharedTier/probeInterval``;
    /// one that fails (a timeout: Redis stalled; no connection) means the
    /// outcome may never come, so the wait ends and this replica fetches.
    private func armProbe() {
        guard probeTimer == nil else { return }
        probeTimer = loop.scheduleTimer(after: tier.probeInterval) { [self] in
            probeTimer = nil
            guard machine.isWaiting, !machine.isFinished else { return }
            connection.send([Array("PING".utf8)]) { [self] result in
                guard machine.isWaiting, !machine.isFinished else { return }
                if case .success(.status) = result {
                    armProbe()
                } else {
                    tier.metrics.recordSharedErrors(1)
                    perform(machine.sharedTierLost())
                }
            }
        }
    }

    /// One outcome from the parts: the most severe failure if any failed,
    /// else one page with every part's products, kept no longer than its
    /// shortest-lived part allows.
    static func merge(_ parts: [Outcome]) -> Outcome {
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
struct SharedTierSource: ProductSource {
    let base: any ProductSource
    let tier: SharedTier

    func fetch(_ request: SourceRequest) async -> Result<SourcePage, ProductsFetchFailure> {
        if let loop = EventLoop.current, let connection = tier.coalescingConnection() {
            let driver = SharedClaimDriver(loop: loop, tier: tier, connection: connection, source: base, request: request)
            return await driver.run()
        }
        let outcome = await base.fetch(request)
        if case .success(let page) = outcome {
            tier.store(page, scope: request.scope, identifiers: request.identifiers)
        }
        return outcome
    }
}
