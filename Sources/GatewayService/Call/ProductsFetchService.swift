import EventTransport
public import GatewayMetrics
public import JSONRPC
import Logging
public import MemoryTier
import MonotonicTime
public import ProductsDomain
import SharedTier
import Tracing

/// `products.fetch`: validation, region, cache, coalescing, fan-out,
/// merge, normalisation and the error mapping, source-agnostic.
public final class ProductsFetchService: Sendable {
    /// Settings of the pipeline, from the configuration.
    public struct Settings: Sendable {
        public var appID: String
        public var limits: FetchProductsLimits
        public var requestTimeout: Duration
        public var upstreamMaxIDs: Int
        public var cacheMaxTTLSeconds: Int
        public var regionResolver: RegionResolver
        /// `GATEWAY_CACHE_MAX_BYTES`.
        public var cacheMaxBytes: Int
        /// `GATEWAY_CACHE_MAX_STALE_S`.
        public var cacheMaxStaleSeconds: Int

        /// What a call that misses memory waits for, in words, for the
        /// message of a call whose deadline passes while it waits
        /// (the upstream and its timeouts); nil names nothing.
        public var waitingFor: String?

        public init(appID: String, limits: FetchProductsLimits, requestTimeout: Duration, upstreamMaxIDs: Int, cacheMaxTTLSeconds: Int, regionResolver: RegionResolver, cacheMaxBytes: Int = 33_554_432, cacheMaxStaleSeconds: Int = 300, waitingFor: String? = nil) {
            self.waitingFor = waitingFor
            self.appID = appID
            self.limits = limits
            self.requestTimeout = requestTimeout
            self.upstreamMaxIDs = upstreamMaxIDs
            self.cacheMaxTTLSeconds = cacheMaxTTLSeconds
            self.regionResolver = regionResolver
            self.cacheMaxBytes = cacheMaxBytes
            self.cacheMaxStaleSeconds = cacheMaxStaleSeconds
        }
    }

    fileprivate let settings: Settings
    private let source: any ProductSource
    /// What the cache's entries age on and the call's deadline is timed
    /// on: the system's clocks, or a test's manual clock.
    fileprivate let clock: GatewayClock
    fileprivate let coalescer: Coalescer
    fileprivate let cache: ResponseCache
    fileprivate let metrics: GatewayMetrics
    /// The shared tier (Redis), when `GATEWAY_REDIS_URL` is set.
    fileprivate let sharedTier: SharedTier?
    /// What a call whose deadline passed before it could start a fetch (a
    /// batch's wait for its turn) ends with; worded once, not per call.
    fileprivate let deadlineFailure: ProductsFetchFailure
    /// What a call whose deadline passes while it waits for a fetch ends
    /// with: it says what it was waiting for, so a hung upstream is told
    /// apart from a slow caller.
    fileprivate let waitDeadlineFailure: ProductsFetchFailure

    public convenience init(settings: Settings, source: any ProductSource, metrics: GatewayMetrics) {
        self.init(settings: settings, source: source, metrics: metrics, sharedTier: nil)
    }

    init(settings: Settings, source: any ProductSource, metrics: GatewayMetrics, sharedTier: SharedTier?, clock: GatewayClock = .system) {
        self.settings = settings
        self.source = source
        self.clock = clock
        self.coalescer = Coalescer(clock: clock)
        self.cache = ResponseCache(maxTTLSeconds: settings.cacheMaxTTLSeconds, maxStaleSeconds: settings.cacheMaxStaleSeconds, maxBytes: settings.cacheMaxBytes, metrics: metrics)
        self.metrics = metrics
        self.sharedTier = sharedTier
        let deadline = "the call's deadline of \(settings.requestTimeout.milliseconds) ms passed (GATEWAY_REQUEST_TIMEOUT_MS)"
        self.deadlineFailure = .cancelled(detail: deadline)
        self.waitDeadlineFailure = .cancelled(detail: settings.waitingFor.map { "\(deadline): \($0)" } ?? deadline)
    }

    /// Runs one call on `context.loop`, the loop of its request, passed
    /// explicitly. Refused params or region, or every product fresh in
    /// memory, answer now; a call that misses memory goes on by callbacks
    /// on that loop (``ProductsCallDriver``), with no task: the shared
    /// tier's reply, the fetches' outcomes and the deadline's timer all
    /// come back to it. Never throws: every failure is a JSON-RPC error.
    ///
    /// The call's deadline (`GATEWAY_REQUEST_TIMEOUT_MS`) counts from
    /// `context.arrived`, so time a batch spent waiting for its turn is
    /// part of it.
    /// - Precondition: called on `context.loop`.
    public func fetchImmediately(params: JSONRPCParams?, context: RPCCallContext) -> JSONRPCMethodOutcome {
        let parsed: FetchProductsParams
        let region: ResolvedRegion
        switch validate(params, requestID: context.requestID) {
        case .failure(let error): return .answer(.failure(error))
        case .success(let valid): (parsed, region) = valid
        }
        return fetchImmediately(parsed, region: region, context: context)
    }

    /// ``fetchImmediately(params:context:)`` for params read from the text
    /// of the call's params object with no JSON tree
    /// (``FetchProductsParams/read(json:limits:parserLimits:)``); `nil`,
    /// before anything is done, when those params or their region are not
    /// the usual valid ones: the tree's way then answers, wording the error.
    public func fetchImmediately(paramsJSON: UnsafeBufferPointer<UInt8>, context: RPCCallContext) -> JSONRPCMethodOutcome? {
        guard let parsed = FetchProductsParams.read(json: paramsJSON, limits: settings.limits),
              let region = try? settings.regionResolver.resolve(parsed) else { return nil }
        return fetchImmediately(parsed, region: region, context: context)
    }

    private func fetchImmediately(_ parsed: FetchProductsParams, region: ResolvedRegion, context: RPCCallContext) -> JSONRPCMethodOutcome {
        let loop = context.loop
        // Nil unless LOG_LEVEL=debug.
        var steps = CallSteps(context: context, identifiers: parsed.productIdentifiers.count)
        // One clock read for the lookup and the deadline check after it.
        let now = clock.now
        // The call is made in the machine and looked up in place: built
        // apart and handed over, it was copied whole (a reference count per
        // field) on every call.
        var machine = ProductsCallStateMachine(call: CallInProgress(
            identifiers: parsed.productIdentifiers,
            scope: FetchScope(appID: settings.appID, country: region.countryCode, language: parsed.language),
            region: region,
            requestID: context.requestID,
            deadline: context.arrived + settings.requestTimeout,
            trace: context.trace.propagated
        ))
        lookUpMemory(&machine.call, now: now, on: loop, steps: &steps)
        let first = machine.memoryLookedUp(sharedTier: sharedTier != nil, now: now)
        switch first {
        case .answer(let outcome):
            steps?.log(identifiers: machine.call.identifiers, outcome: outcome)
            return .answer(rpcOutcome(outcome, requestID: context.requestID, logger: context.logger))
        case .deadlinePassed:
            steps?.log(identifiers: machine.call.identifiers, outcome: .failure(deadlineFailure))
            return .answer(rpcOutcome(.failure(deadlineFailure), requestID: context.requestID, logger: context.logger))
        default:
            // The driver holds the machine and the context, once: the
            // closure carries one reference (copying the two into it, and
            // again into the answer's closure, cost a reference count per
            // field of each, on every miss).
            let driver = LoopBound(ProductsCallDriver(service: self, machine: machine, context: context, steps: steps), loop: loop)
            return .later { answer in driver.value.start(first, answer: answer) }
        }
    }

    /// A call's outcome as JSON-RPC; a failure is logged here, once.
    fileprivate func rpcOutcome(_ outcome: Result<EncodedJSON, ProductsFetchFailure>, requestID: String, logger: @autoclosure () -> Logger) -> Result<JSONValue, JSONRPCError> {
        switch outcome {
        case .success(let result):
            // Already JSON: the engine appends these bytes to the response.
            return .success(.encoded(result))
        case .failure(let failure):
            // The upstream failing (or hanging) is the operator's to see at
            // LOG_LEVEL=warning; an identifier it rejected is the caller's.
            let metadata: Logger.Metadata = ["reason": "\(failure.reason)", "detail": "\(failure.message)"]
            if case .invalidProductIdentifier = failure {
                logger().info("products.fetch failed", metadata: metadata)
            } else {
                logger().warning("products.fetch failed", metadata: metadata)
            }
            return .failure(failure.jsonRPCError(requestID: requestID))
        }
    }

    /// Params and region, or the call's error; every error of a call
    /// carries the request id, as the upstream errors do, so a caller can
    /// quote it.
    private func validate(_ params: JSONRPCParams?, requestID: String) -> Result<(FetchProductsParams, ResolvedRegion), JSONRPCError> {
        do {
            let parsed = try FetchProductsParams.parse(params, limits: settings.limits)
            return .success((parsed, try settings.regionResolver.resolve(parsed)))
        } catch {
            var rpcError = error.jsonRPCError
            var data = rpcError.data?.objectValue ?? JSONObject()
            data["requestId"] = .string(requestID)
            rpcError.data = .object(data)
            return .failure(rpcError)
        }
    }

    /// A valid call's memory lookup: fresh entries answer, and
    /// `stale-while-revalidate` ones answer and are refreshed in the
    /// background.
    private func lookUpMemory(_ call: inout CallInProgress, now: MonotonicInstant, on loop: EventLoop, steps: inout CallSteps?) {
        var stale: [String] = []
        let hits = cache.lookup(scope: call.scope, identifiers: call.identifiers, now: now, into: &call.answers, revalidating: &stale)
        metrics.recordCacheHits(hits)
        steps?.memoryLookedUp(call.answers, identifiers: call.identifiers, stale: stale)
        if !stale.isEmpty {
            metrics.recordStaleIdentifiers(stale.count)
            var none: SharedPreclaim?
            revalidate(stale, scope: call.scope, requestID: call.requestID, deadline: call.deadline, trace: call.trace, preclaim: &none, on: loop)
        }
    }

    /// The shared tier's answer to one `MGET` of `asked` (the call's memory
    /// misses), taken into the call. Every entry found is kept in memory
    /// for the rest of its time; fresh ones answer now
    /// (`gateway_shared_cache_hits_total`), stale ones as the memory
    /// cache's stale rules allow.
    fileprivate func absorbShared(_ found: [SharedCacheEntry?], asked: [String], into call: inout CallInProgress, on loop: EventLoop) {
        // Empty: nothing found (``SharedTier/Lookup/entries``).
        guard !found.isEmpty else { return }
        let nowUnixMS = clock.unixMilliseconds
        var kept: [ResponseCache.SharedAnswer] = []
        var fresh: [String: ProductAnswer] = [:]
        var anyStale = false
        for (index, entry) in found.enumerated() {
            guard let entry else { continue }
            let freshFor = entry.freshFor(nowUnixMS: nowUnixMS, cap: .seconds(settings.cacheMaxTTLSeconds))
            kept.append(ResponseCache.SharedAnswer(
                identifier: asked[index], answer: entry.answer, freshFor: freshFor,
                staleIfErrorSeconds: entry.staleIfErrorSeconds, revalidateSeconds: entry.revalidateSeconds
            ))
            if freshFor > .zero { fresh[asked[index]] = entry.answer } else { anyStale = true }
        }
        guard !kept.isEmpty else { return }
        let identifiers = call.identifiers
        cache.store(shared: kept, scope: call.scope, now: clock.now)
        if !fresh.isEmpty {
            for index in identifiers.indices where call.answers[index] == nil {
                if let answer = fresh[identifiers[index]] { call.answers[index] = answer }
            }
            metrics.recordSharedHits(fresh.count)
        }
        if anyStale {
            // Now in memory: `stale-while-revalidate` ones answer (and are
            // refreshed) as a memory lookup would have answered them.
            var revalidating: [String] = []
            _ = cache.lookup(scope: call.scope, identifiers: identifiers, now: clock.now, into: &call.answers, revalidating: &revalidating)
            if !revalidating.isEmpty {
                metrics.recordStaleIdentifiers(revalidating.count)
                revalidate(revalidating, scope: call.scope, requestID: call.requestID, deadline: call.deadline, trace: call.trace, preclaim: &call.preclaim, on: loop)
            }
        }
    }

    /// `stale-while-revalidate`: one background fetch per identifier
    /// answered stale, coalesced like any fetch (an identifier already being
    /// fetched is not asked again). Nobody waits for it; its success
    /// refreshes the cache, its failure is forgotten.
    private func revalidate(_ identifiers: [String], scope: FetchScope, requestID: String, deadline: MonotonicInstant, trace: PropagatedTrace?, preclaim: inout SharedPreclaim?, on loop: EventLoop) {
        let claim = coalescer.claim(scope: scope, identifiers: identifiers, chunkSize: settings.upstreamMaxIDs, origin: trace?.recordedSpan)
        for fetch in claim.started { start(fetch, requestID: requestID, deadline: deadline, trace: trace, preclaim: adopt(fetch, from: &preclaim), on: loop) }
    }

    /// Starts a call's new fetches, each with the leases the call's lookup
    /// took for its identifiers; leases no fetch adopted are released.
    fileprivate func startFetches(_ started: [CoalescedFetch], for call: inout CallInProgress, on loop: EventLoop) {
        for fetch in started {
            start(fetch, requestID: call.requestID, deadline: call.deadline, trace: call.trace, preclaim: adopt(fetch, from: &call.preclaim), on: loop)
        }
        releaseLeases(of: &call, on: loop)
    }

    /// The leases of `fetch`'s identifiers, taken out of `preclaim`.
    private func adopt(_ fetch: CoalescedFetch, from preclaim: inout SharedPreclaim?) -> SharedPreclaim? {
        guard let all = preclaim, let part = all.restricted(to: fetch.identifiers) else { return nil }
        if part.wonCount == all.wonCount {
            // Every lease adopted (the usual miss): nothing left to subtract.
            preclaim = nil
            return part
        }
        preclaim?.won.subtract(part.won)
        return part
    }

    /// Gives back the leases of the call's lookup that no fetch adopted (an
    /// identifier answered from an entry after all, or joined to a fetch
    /// already running).
    fileprivate func releaseLeases(of call: inout CallInProgress, on loop: EventLoop) {
        guard let preclaim = call.preclaim else { return }
        call.preclaim = nil
        sharedTier?.release(preclaim, on: loop)
    }

    /// Starts a shared fetch, owned by no caller, so a caller leaving never
    /// cancels it for the others; the coalescer owns it, from the claim
    /// until `finish`. The source runs it on `loop`, the loop of the call
    /// that started it, by callback: the fetch, its upstream exchange and
    /// its timers stay there.
    private func start(_ fetch: CoalescedFetch, requestID: String, deadline: MonotonicInstant, trace: PropagatedTrace?, preclaim: SharedPreclaim?, on loop: EventLoop) {
        var request = SourceRequest(scope: fetch.scope, identifiers: fetch.identifiers, requestID: requestID, deadline: deadline, trace: trace)
        request.preclaim = preclaim
        let source = self.source
        let cache = self.cache
        let coalescer = self.coalescer
        let clock = self.clock
        source.fetch(request, on: loop) { answered in
            // Only what this fetch asked for, byte for byte, reaches the
            // cache and the calls waiting on it.
            let outcome = answered.map { $0.restricted(to: fetch.identifiers) }
            if case .success(let page) = outcome {
                // Stored before the identifiers are released, so a call
                // arriving in between finds one or the other.
                cache.store(page, scope: fetch.scope, identifiers: fetch.identifiers, now: clock.now)
            }
            coalescer.finish(fetch, with: outcome)
        }
    }

    /// Ends every wait on a shared fetch with `cancelled`, now and until the
    /// process ends (the shutdown grace is over). Fetches in flight go on;
    /// nobody waits for them any more.
    public func cancelWaiting() {
        coalescer.releaseWaiters(with: .cancelled(detail: "the gateway is shutting down"))
    }

    /// Waits until every shared fetch started so far has ended, or until the
    /// calling task is cancelled.
    /// - Returns: `true` when no fetch is running.
    @discardableResult
    public func waitForFetches() async -> Bool {
        await coalescer.waitUntilIdle()
    }
}

/// Runs one call's ``ProductsCallStateMachine`` on the call's loop, doing
/// what each action says: the shared tier's lookup, the coalescer's claim,
/// the waits, `stale-if-error`. Every callback it waits for (the Redis
/// reply, a fetch's end, the deadline's timer) comes back to `loop`, so the
/// machine needs no lock. A fetch that has already ended is taken in a
/// loop, not by recursion: a call joining thousands of ended fetches
/// neither grows the loop's stack nor copies its answers per fetch.
/// Confined to `loop`: what reaches it from a `Sendable` callback goes
/// through a ``LoopBound``.
private final class ProductsCallDriver {
    private let service: ProductsFetchService
    private let loop: EventLoop
    private let context: RPCCallContext
    private var machine: ProductsCallStateMachine
    /// The engine's callback, given when the call starts.
    private var answerCall: (@Sendable (Result<JSONValue, JSONRPCError>) -> Void)?
    /// The coalescer's keys of the identifiers the shared tier was asked,
    /// for the claim that follows when the same list is still missing.
    private var lookupKeys: (identifiers: [String], keys: [ScopedIdentifier])?
    /// The call's steps, at `LOG_LEVEL=debug` only.
    private var steps: CallSteps?

    init(service: ProductsFetchService, machine: consuming ProductsCallStateMachine, context: RPCCallContext, steps: consuming CallSteps?) {
        self.service = service
        self.machine = machine
        self.context = context
        self.loop = context.loop
        self.steps = steps
    }

    /// Performs `first`; `answer` gets the call's outcome, once.
    func start(_ first: ProductsCallStateMachine.Action, answer: @escaping @Sendable (Result<JSONValue, JSONRPCError>) -> Void) {
        answerCall = answer
        perform(first)
    }

    /// The call's outcome, handed to the engine (a failure logged once).
    private func answer(_ outcome: Result<EncodedJSON, ProductsFetchFailure>) {
        let answer = answerCall
        answerCall = nil
        answer?(service.rpcOutcome(outcome, requestID: context.requestID, logger: context.logger))
    }

    /// Whether `a` and `b` are one list, not two equal ones: the call's
    /// missing identifiers when nothing answered them in between.
    private static func sameList(_ a: [String], _ b: [String]) -> Bool {
        a.count == b.count && a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in x.baseAddress == y.baseAddress } }
    }

    /// Performs `first` and the actions that follow it until one waits.
    func perform(_ first: ProductsCallStateMachine.Action) {
        loop.preconditionInEventLoop()
        var action = first
        while true {
            switch action {
            case .lookUpSharedTier(let missing):
                // What a fetch in flight in this process covers is joined,
                // not looked up: no Redis round trip, and no lease that no
                // fetch would run under.
                guard let tier = service.sharedTier else {
                    action = machine.sharedTierAnswered(now: service.clock.now)
                    continue
                }
                let (asked, keys) = service.coalescer.notInFlightKeys(scope: machine.call.scope, identifiers: missing)
                if let keys { lookupKeys = (asked, keys) }
                guard !asked.isEmpty else {
                    action = machine.sharedTierAnswered(now: service.clock.now)
                    continue
                }
                // The reply comes on this loop (its connection is the loop's).
                let driver = LoopBound(self, loop: loop)
                tier.lookup(scope: machine.call.scope, identifiers: asked, on: loop) { found in
                    driver.value.sharedTierAnswered(found, asked: asked)
                }
                return
            case .fetch(let missing):
                let trace = machine.call.trace
                let claim = service.coalescer.claim(
                    scope: machine.call.scope, identifiers: missing, keys: lookupKeys.flatMap { Self.sameList(missing, $0.identifiers) ? $0.keys : nil },
                    chunkSize: service.settings.upstreamMaxIDs, origin: trace?.recordedSpan
                )
                lookupKeys = nil
                if let links = trace?.links, claim.fetches.count > claim.started.count {
                    // Joined a fetch another call started: this call's
                    // span links to that call's.
                    for fetch in claim.fetches {
                        if let origin = fetch.origin, origin != trace?.span { links.add(origin) }
                    }
                }
                service.metrics.recordCoalesced(claim.joinedIdentifierCount)
                service.startFetches(claim.started, for: &machine.call, on: loop)
                steps?.fetchesClaimed(started: claim.started)
                action = machine.fetchesClaimed(claim.fetches)
            case .waitFor(let fetch):
                if let outcome = fetch.settledOutcome {
                    action = fetchEnded(fetch, outcome)
                    continue
                }
                fetch.whenDone(on: loop, until: machine.call.deadline, onDeadline: service.waitDeadlineFailure) { [self] outcome in
                    perform(fetchEnded(fetch, outcome))
                }
                return
            case .coverWithStale(let fetch):
                let fallback = service.cache.fillStaleIfError(
                    scope: machine.call.scope, identifiers: machine.call.identifiers, failedIdentifiers: fetch.identifiers, now: service.clock.now, into: &machine.call.answers
                )
                service.metrics.recordStaleIdentifiers(fallback.filled)
                steps?.staleCovered(machine.call.answers)
                action = machine.staleCovered(complete: fallback.complete)
            case .deadlinePassed:
                service.releaseLeases(of: &machine.call, on: loop)
                steps?.log(identifiers: machine.call.identifiers, outcome: .failure(service.deadlineFailure))
                answer(.failure(service.deadlineFailure))
                return
            case .answer(let outcome):
                service.releaseLeases(of: &machine.call, on: loop)
                steps?.log(identifiers: machine.call.identifiers, outcome: outcome)
                answer(outcome)
                return
            }
        }
    }

    /// The shared tier's lookup answered (nil: it could not be asked).
    private func sharedTierAnswered(_ found: SharedTier.Lookup?, asked: [String]) {
        machine.call.preclaim = found?.claims
        if let found { service.absorbShared(found.entries, asked: asked, into: &machine.call, on: loop) }
        steps?.sharedTierAnswered(machine.call.answers, asked: asked.count)
        perform(machine.sharedTierAnswered(now: service.clock.now))
    }

    /// The machine's next action after `fetch` ended, traced at debug.
    private func fetchEnded(_ fetch: CoalescedFetch, _ outcome: CoalescedFetch.Outcome) -> ProductsCallStateMachine.Action {
        let action = machine.fetchEnded(outcome)
        if steps != nil {
            let failed = if case .failure = outcome { true } else { false }
            steps?.fetchEnded(fetch, identifiers: machine.call.identifiers, failed: failed)
        }
        return action
    }
}
