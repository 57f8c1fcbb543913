import EventTransport
import JSONRPC
import Logging
import ProductsDomain

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

    private let settings: Settings
    private let source: any ProductSource
    private let coalescer = Coalescer()
    private let cache: ResponseCache
    private let metrics: GatewayMetrics
    /// The shared tier (Redis), when `GATEWAY_REDIS_URL` is set.
    private let sharedTier: SharedTier?
    /// What a call whose deadline passed before it could start a fetch (a
    /// batch's wait for its turn) ends with; worded once, not per call.
    private let deadlineFailure: ProductsFetchFailure
    /// What a call whose deadline passes while it waits for a fetch ends
    /// with: it says what it was waiting for, so a hung upstream is told
    /// apart from a slow caller.
    private let waitDeadlineFailure: ProductsFetchFailure

    public convenience init(settings: Settings, source: any ProductSource, metrics: GatewayMetrics) {
        self.init(settings: settings, source: source, metrics: metrics, sharedTier: nil)
    }

    init(settings: Settings, source: any ProductSource, metrics: GatewayMetrics, sharedTier: SharedTier?) {
        self.settings = settings
        self.source = source
        self.cache = ResponseCache(maxTTLSeconds: settings.cacheMaxTTLSeconds, maxStaleSeconds: settings.cacheMaxStaleSeconds, maxBytes: settings.cacheMaxBytes, metrics: metrics)
        self.metrics = metrics
        self.sharedTier = sharedTier
        let deadline = "the call's deadline of \(settings.requestTimeout.milliseconds) ms passed (GATEWAY_REQUEST_TIMEOUT_MS)"
        self.deadlineFailure = .cancelled(detail: deadline)
        self.waitDeadlineFailure = .cancelled(detail: settings.waitingFor.map { "\(deadline): \($0)" } ?? deadline)
    }

    /// Runs one call. Never throws: every failure is a JSON-RPC error.
    /// - Parameter arrived: When the call's request arrived: its deadline
    ///   (`GATEWAY_REQUEST_TIMEOUT_MS`) counts from there, so time a batch
    ///   spent waiting for its turn is part of it.
    public func fetch(params: JSONRPCParams?, requestID: String, arrived: ContinuousClock.Instant = .now, logger: @autoclosure () -> Logger) async -> Result<JSONValue, JSONRPCError> {
        let parsed: FetchProductsParams
        let region: ResolvedRegion
        switch validate(params, requestID: requestID) {
        case .failure(let error): return .failure(error)
        case .success(let valid): (parsed, region) = valid
        }
        var call = begin(parsed, region: region, requestID: requestID, arrived: arrived)
        var missing = call.missing
        if !missing.isEmpty, let sharedTier {
            if let found = await sharedTier.lookup(scope: call.scope, identifiers: missing) {
                call.preclaim = found.claims
                missing = absorbShared(found.entries, asked: missing, into: &call)
            }
        }
        return rpcOutcome(await fetchMissing(missing, for: &call), requestID: requestID, logger: logger())
    }

    /// The call without a task where it can be: refused params or region,
    /// or every product fresh in memory, answer now; a call that misses
    /// memory goes on from `later`'s callback: the shared tier's reply
    /// (on this loop) answers it when it holds the rest, else what is still
    /// missing is fetched by callbacks on this loop. Params, region and the
    /// memory lookup run once either way.
    /// - Parameter logger: Made only when a failure is logged (a logger
    ///   with the call's metadata costs a dictionary).
    public func fetchImmediately(params: JSONRPCParams?, requestID: String, logger: @escaping @Sendable () -> Logger) -> JSONRPCImmediateOutcome {
        let parsed: FetchProductsParams
        let region: ResolvedRegion
        switch validate(params, requestID: requestID) {
        case .failure(let error): return .answer(.failure(error))
        case .success(let valid): (parsed, region) = valid
        }
        return fetchImmediately(parsed, region: region, requestID: requestID, logger: logger)
    }

    /// ``fetchImmediately(params:requestID:logger:)`` for params read from
    /// the text of the call's params object with no JSON tree
    /// (``FetchProductsParams/read(json:limits:parserLimits:)``); `nil`,
    /// before anything is done, when those params or their region are not
    /// the usual valid ones: the tree's way then answers, wording the error.
    public func fetchImmediately(paramsJSON: UnsafeBufferPointer<UInt8>, requestID: String, logger: @escaping @Sendable () -> Logger) -> JSONRPCImmediateOutcome? {
        guard let parsed = FetchProductsParams.read(json: paramsJSON, limits: settings.limits),
              let region = try? settings.regionResolver.resolve(parsed) else { return nil }
        return fetchImmediately(parsed, region: region, requestID: requestID, logger: logger)
    }

    private func fetchImmediately(_ parsed: FetchProductsParams, region: ResolvedRegion, requestID: String, logger: @escaping @Sendable () -> Logger) -> JSONRPCImmediateOutcome {
        let call = begin(parsed, region: region, requestID: requestID)
        let missing = call.missing
        guard !missing.isEmpty else { return .answer(.success(.encoded(call.result))) }
        return .later { [self] answer in
            guard let sharedTier else {
                fetchRest(missing, for: call, logger: logger, answer: answer)
                return
            }
            sharedTier.lookup(scope: call.scope, identifiers: missing) { [self] found in
                var call = call
                call.preclaim = found?.claims
                let still = found.map { absorbShared($0.entries, asked: missing, into: &call) } ?? missing
                guard still.isEmpty else {
                    fetchRest(still, for: call, logger: logger, answer: answer)
                    return
                }
                releaseLeases(of: &call)
                answer(.success(.encoded(call.result)))
            }
        }
    }

    /// The rest of a deferred call: on the calling thread's loop by
    /// callbacks, with no task (``fetchMissing(_:for:on:completion:)``), or,
    /// off the loops, in a task.
    private func fetchRest(_ missing: [String], for call: CallInProgress, logger: @escaping @Sendable () -> Logger, answer: @escaping @Sendable (Result<JSONValue, JSONRPCError>) -> Void) {
        if let loop = EventLoop.current {
            fetchMissing(missing, for: call, on: loop) { [self] outcome in
                answer(rpcOutcome(outcome, requestID: call.requestID, logger: logger()))
            }
            return
        }
        Task { [self] in
            var call = call
            answer(rpcOutcome(await fetchMissing(missing, for: &call), requestID: call.requestID, logger: logger()))
        }
    }

    /// A call's outcome as JSON-RPC; a failure is logged here, once.
    private func rpcOutcome(_ outcome: Result<EncodedJSON, ProductsFetchFailure>, requestID: String, logger: @autoclosure () -> Logger) -> Result<JSONValue, JSONRPCError> {
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

    /// A valid call after its memory lookup: fresh entries answer, and
    /// `stale-while-revalidate` ones answer and are refreshed in the
    /// background.
    private func begin(_ params: FetchProductsParams, region: ResolvedRegion, requestID: String, arrived: ContinuousClock.Instant? = nil) -> CallInProgress {
        let started = ContinuousClock.now
        var call = CallInProgress(
            identifiers: params.productIdentifiers,
            scope: FetchScope(appID: settings.appID, country: region.countryCode, language: params.language),
            region: region,
            requestID: requestID,
            deadline: (arrived ?? started) + settings.requestTimeout
        )
        var stale: [String] = []
        let hits = cache.lookup(scope: call.scope, identifiers: call.identifiers, now: started, into: &call.answers, revalidating: &stale)
        metrics.recordCacheHits(hits)
        if !stale.isEmpty {
            metrics.recordStaleIdentifiers(stale.count)
            var none: SharedPreclaim?
            revalidate(stale, scope: call.scope, requestID: requestID, deadline: call.deadline, preclaim: &none)
        }
        return call
    }

    /// Claims `missing` (joining fetches already running), waits for each
    /// fetch until the call's deadline, and gives the call's `result`.
    private func fetchMissing(_ missing: [String], for call: inout CallInProgress) async -> Result<EncodedJSON, ProductsFetchFailure> {
        guard !missing.isEmpty else {
            releaseLeases(of: &call)
            return .success(call.result)
        }
        // A batch that waited for its turn past the deadline starts no fetch.
        guard ContinuousClock.now < call.deadline else {
            releaseLeases(of: &call)
            return .failure(deadlineFailure)
        }
        let claim = coalescer.claim(scope: call.scope, identifiers: missing, chunkSize: settings.upstreamMaxIDs)
        metrics.recordCoalesced(claim.joinedIdentifierCount)
        startFetches(claim.started, for: &call)
        var failures: [ProductsFetchFailure] = []
        for fetch in claim.fetches {
            let outcome = await fetch.outcome(until: call.deadline, onDeadline: waitDeadlineFailure)
            if let failure = take(outcome, of: fetch, into: &call) { failures.append(failure) }
        }
        if let failure = ProductsFetchFailure.mostSevere(failures) { return .failure(failure) }
        return .success(call.result)
    }

    /// ``fetchMissing(_:for:)`` by callback on `loop`, with no task: the
    /// same claim, the same waits one fetch after another (each until the
    /// call's deadline), the same merge; `completion` runs once, on `loop`.
    private func fetchMissing(_ missing: [String], for call: CallInProgress, on loop: EventLoop, completion: @escaping @Sendable (Result<EncodedJSON, ProductsFetchFailure>) -> Void) {
        var call = call
        guard !missing.isEmpty else {
            releaseLeases(of: &call)
            return completion(.success(call.result))
        }
        let claim = coalescer.claim(scope: call.scope, identifiers: missing, chunkSize: settings.upstreamMaxIDs)
        metrics.recordCoalesced(claim.joinedIdentifierCount)
        startFetches(claim.started, for: &call)
        wait(for: claim.fetches[...], call: call, failures: [], on: loop, completion: completion)
    }

    /// Waits for the first of `fetches`, takes its outcome into the call,
    /// then goes on with the rest; the call's result (or its most severe
    /// failure) when none is left.
    private func wait(
        for fetches: ArraySlice<SharedFetch>, call: CallInProgress, failures: [ProductsFetchFailure], on loop: EventLoop,
        completion: @escaping @Sendable (Result<EncodedJSON, ProductsFetchFailure>) -> Void
    ) {
        var call = call
        var failures = failures
        var rest = fetches
        // Fetches that have already ended are taken here, in a loop: a call
        // joining thousands of them neither recurses once per fetch on the
        // loop's stack nor copies its answers per fetch.
        while let fetch = rest.first, let outcome = fetch.settledOutcome {
            if let failure = take(outcome, of: fetch, into: &call) { failures.append(failure) }
            rest = rest.dropFirst()
        }
        guard let fetch = rest.first else {
            if let failure = ProductsFetchFailure.mostSevere(failures) { return completion(.failure(failure)) }
            return completion(.success(call.result))
        }
        fetch.whenDone(on: loop, until: call.deadline, onDeadline: waitDeadlineFailure) { [self, call, failures, rest] outcome in
            var call = call
            var failures = failures
            if let failure = take(outcome, of: fetch, into: &call) { failures.append(failure) }
            wait(for: rest.dropFirst(), call: call, failures: failures, on: loop, completion: completion)
        }
    }

    /// One fetch's outcome taken into the call: its products fill the slots
    /// still open (a cached answer or an earlier page keeps its place, as
    /// the first answer wins); a failure that `stale-if-error` entries
    /// cannot cover is returned.
    private func take(_ outcome: SharedFetch.Outcome, of fetch: SharedFetch, into call: inout CallInProgress) -> ProductsFetchFailure? {
        let identifiers = call.identifiers
        switch outcome {
        case .success(let page):
            for index in identifiers.indices where call.answers[index] == nil {
                if let product = page.encodedProducts[identifiers[index]] {
                    call.answers[index] = .product(product)
                }
            }
            return nil
        case .failure(let failure):
            if failure.allowsStaleAnswer {
                // `stale-if-error`: entries still within it answer for this
                // fetch's identifiers, if all of them can.
                let fallback = cache.fillStaleIfError(
                    scope: call.scope, identifiers: identifiers, failedIdentifiers: fetch.identifiers, now: .now, into: &call.answers
                )
                metrics.recordStaleIdentifiers(fallback.filled)
                if fallback.complete { return nil }
            }
            return failure
        }
    }

    /// The shared tier's answer to one `MGET` of `asked` (the call's memory
    /// misses), taken into the call. Every entry found is kept in memory
    /// for the rest of its time; fresh ones answer now
    /// (`gateway_shared_cache_hits_total`), stale ones as the memory
    /// cache's stale rules allow. Returns what is still missing.
    private func absorbShared(_ found: [SharedCacheEntry?], asked: [String], into call: inout CallInProgress) -> [String] {
        let nowUnixMS = SharedTier.unixMilliseconds()
        var kept: [(identifier: String, entry: SharedCacheEntry, freshFor: Duration)] = []
        var fresh: [String: ProductAnswer] = [:]
        var anyStale = false
        for (index, entry) in found.enumerated() {
            guard let entry else { continue }
            let freshFor = entry.freshFor(nowUnixMS: nowUnixMS, cap: .seconds(settings.cacheMaxTTLSeconds))
            kept.append((asked[index], entry, freshFor))
            if freshFor > .zero { fresh[asked[index]] = entry.answer } else { anyStale = true }
        }
        guard !kept.isEmpty else { return asked }
        let identifiers = call.identifiers
        cache.store(shared: kept, scope: call.scope, now: .now)
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
            _ = cache.lookup(scope: call.scope, identifiers: identifiers, now: .now, into: &call.answers, revalidating: &revalidating)
            if !revalidating.isEmpty {
                metrics.recordStaleIdentifiers(revalidating.count)
                revalidate(revalidating, scope: call.scope, requestID: call.requestID, deadline: call.deadline, preclaim: &call.preclaim)
            }
        }
        return call.missing
    }

    /// `stale-while-revalidate`: one background fetch per identifier
    /// answered stale, coalesced like any fetch (an identifier already being
    /// fetched is not asked again). Nobody waits for it; its success
    /// refreshes the cache, its failure is forgotten.
    private func revalidate(_ identifiers: [String], scope: FetchScope, requestID: String, deadline: ContinuousClock.Instant, preclaim: inout SharedPreclaim?) {
        let claim = coalescer.claim(scope: scope, identifiers: identifiers, chunkSize: settings.upstreamMaxIDs)
        for fetch in claim.started { start(fetch, requestID: requestID, deadline: deadline, preclaim: adopt(fetch, from: &preclaim)) }
    }

    /// Starts a call's new fetches, each with the leases the call's lookup
    /// took for its identifiers; leases no fetch adopted are released.
    private func startFetches(_ started: [SharedFetch], for call: inout CallInProgress) {
        for fetch in started {
            start(fetch, requestID: call.requestID, deadline: call.deadline, preclaim: adopt(fetch, from: &call.preclaim))
        }
        releaseLeases(of: &call)
    }

    /// The leases of `fetch`'s identifiers, taken out of `preclaim`.
    private func adopt(_ fetch: SharedFetch, from preclaim: inout SharedPreclaim?) -> SharedPreclaim? {
        guard let all = preclaim, let part = all.restricted(to: fetch.identifiers) else { return nil }
        preclaim?.won.subtract(part.won)
        preclaim?.held.subtract(part.held)
        return part
    }

    /// Gives back the leases of the call's lookup that no fetch adopted (an
    /// identifier answered from an entry after all, or joined to a fetch
    /// already running).
    private func releaseLeases(of call: inout CallInProgress) {
        guard let preclaim = call.preclaim else { return }
        call.preclaim = nil
        sharedTier?.release(preclaim)
    }

    /// Starts a shared fetch, owned by no caller, so a caller leaving never
    /// cancels it for the others; the coalescer owns it, from the claim
    /// until `finish`. The source runs it on the calling thread's event
    /// loop when there is one (the upstream by callback, with no task;
    /// other sources in a task on that loop), so the fetch, its upstream
    /// exchange and its timers stay on the loop of the call that started it.
    private func start(_ fetch: SharedFetch, requestID: String, deadline: ContinuousClock.Instant, preclaim: SharedPreclaim? = nil) {
        var request = SourceRequest(scope: fetch.scope, identifiers: fetch.identifiers, requestID: requestID, deadline: deadline)
        request.preclaim = preclaim
        let source = self.source
        let cache = self.cache
        let coalescer = self.coalescer
        source.fetch(request) { answered in
            // Only what this fetch asked for, byte for byte, reaches the
            // cache and the calls waiting on it.
            let outcome = answered.map { $0.restricted(to: fetch.identifiers) }
            if case .success(let page) = outcome {
                // Stored before the identifiers are released, so a call
                // arriving in between finds one or the other.
                cache.store(page, scope: fetch.scope, identifiers: fetch.identifiers, now: .now)
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

/// One `products.fetch` call between its steps (memory, shared tier,
/// upstream): what it asked for and the answers found so far. A value:
/// each step works on its own copy, on the call's loop.
private struct CallInProgress: Sendable {
    let identifiers: [String]
    let scope: FetchScope
    let region: ResolvedRegion
    let requestID: String
    let deadline: ContinuousClock.Instant
    /// One slot per requested identifier, in request order: a product's
    /// bytes, `.unknown`, or nil while nothing answered it yet.
    var answers: [ProductAnswer?]
    /// The leases the shared tier's lookup took for the call, until the
    /// fetches it starts adopt them.
    var preclaim: SharedPreclaim?

    init(identifiers: [String], scope: FetchScope, region: ResolvedRegion, requestID: String, deadline: ContinuousClock.Instant) {
        self.identifiers = identifiers
        self.scope = scope
        self.region = region
        self.requestID = requestID
        self.deadline = deadline
        self.answers = [ProductAnswer?](repeating: nil, count: identifiers.count)
    }

    /// The identifiers nothing answered yet, in request order.
    var missing: [String] {
        // Usually all of them or none: an empty answer costs nothing, a full
        // one is a copy of the list, and a partial one reserves once.
        var open = 0
        for answer in answers where answer == nil { open += 1 }
        if open == 0 { return [] }
        if open == identifiers.count { return identifiers }
        var missing: [String] = []
        missing.reserveCapacity(open)
        for index in identifiers.indices where answers[index] == nil { missing.append(identifiers[index]) }
        return missing
    }

    /// The call's `result`: every identifier no page and no entry has a
    /// product for is invalid.
    var result: EncodedJSON {
        ProductsResult.encoded(requested: identifiers, answers: answers, region: region)
    }
}
