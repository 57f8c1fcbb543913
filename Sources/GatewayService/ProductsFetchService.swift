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

        public init(appID: String, limits: FetchProductsLimits, requestTimeout: Duration, upstreamMaxIDs: Int, cacheMaxTTLSeconds: Int, regionResolver: RegionResolver, cacheMaxBytes: Int = 33_554_432, cacheMaxStaleSeconds: Int = 300) {
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

    public convenience init(settings: Settings, source: any ProductSource, metrics: GatewayMetrics) {
        self.init(settings: settings, source: source, metrics: metrics, sharedTier: nil)
    }

    init(settings: Settings, source: any ProductSource, metrics: GatewayMetrics, sharedTier: SharedTier?) {
        self.settings = settings
        self.source = source
        self.cache = ResponseCache(maxTTLSeconds: settings.cacheMaxTTLSeconds, maxStaleSeconds: settings.cacheMaxStaleSeconds, maxBytes: settings.cacheMaxBytes, metrics: metrics)
        self.metrics = metrics
        self.sharedTier = sharedTier
    }

    /// Runs one call. Never throws: every failure is a JSON-RPC error.
    public func fetch(params: JSONRPCParams?, requestID: String, logger: @autoclosure () -> Logger) async -> Result<JSONValue, JSONRPCError> {
        let parsed: FetchProductsParams
        let region: ResolvedRegion
        switch validate(params, requestID: requestID) {
        case .failure(let error): return .failure(error)
        case .success(let valid): (parsed, region) = valid
        }
        switch await products(for: parsed, region: region, requestID: requestID) {
        case .success(let result):
            // Already JSON: the engine appends these bytes to the response.
            return .success(.encoded(result))
        case .failure(let failure):
            logger().info("products.fetch failed", metadata: ["reason": "\(failure.reason)", "detail": "\(failure.message)"])
            return .failure(failure.jsonRPCError(requestID: requestID))
        }
    }

    /// The answer of a call that needs no wait: refused params or region,
    /// or every product fresh in memory. `nil` otherwise, and then nothing
    /// was counted: the call goes through ``fetch(params:requestID:logger:)``.
    public func fetchImmediately(params: JSONRPCParams?, requestID: String) -> Result<JSONValue, JSONRPCError>? {
        let parsed: FetchProductsParams
        let region: ResolvedRegion
        switch validate(params, requestID: requestID) {
        case .failure(let error): return .failure(error)
        case .success(let valid): (parsed, region) = valid
        }
        let scope = FetchScope(appID: settings.appID, country: region.countryCode, language: parsed.language)
        let identifiers = parsed.productIdentifiers
        var answers = [ProductAnswer?](repeating: nil, count: identifiers.count)
        let hits = cache.lookup(scope: scope, identifiers: identifiers, now: .now, into: &answers)
        guard hits == identifiers.count else { return nil }
        metrics.recordCacheHits(hits)
        return .success(.encoded(ProductsResult.encoded(requested: identifiers, answers: answers, region: region)))
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

    /// The call's `result`, assembled from encoded products: from memory
    /// where fresh entries exist, else from the pages this call waits for.
    private func products(for params: FetchProductsParams, region: ResolvedRegion, requestID: String) async -> Result<EncodedJSON, ProductsFetchFailure> {
        let scope = FetchScope(appID: settings.appID, country: region.countryCode, language: params.language)
        let identifiers = params.productIdentifiers
        let started = ContinuousClock.now
        let deadline = started + settings.requestTimeout

        // One slot per requested identifier, in request order: a product's
        // bytes, `.unknown`, or nil while nothing answered it yet.
        var answers = [ProductAnswer?](repeating: nil, count: identifiers.count)
        // Identifiers answered from a `stale-while-revalidate` entry; empty
        // (no allocation) unless one is.
        var stale: [String] = []
        let hits = cache.lookup(scope: scope, identifiers: identifiers, now: started, into: &answers, revalidating: &stale)
        metrics.recordCacheHits(hits)
        if !stale.isEmpty {
            metrics.recordStaleIdentifiers(stale.count)
            revalidate(stale, scope: scope, requestID: requestID, deadline: deadline)
        }

        if hits + stale.count < identifiers.count {
            var missing: [String] = []
            missing.reserveCapacity(identifiers.count - hits)
            for index in identifiers.indices where answers[index] == nil { missing.append(identifiers[index]) }
            if let sharedTier {
                missing = await lookUpShared(missing, in: sharedTier, scope: scope, identifiers: identifiers, answers: &answers, stale: &stale, requestID: requestID, deadline: deadline)
            }
            let claim = coalescer.claim(scope: scope, identifiers: missing, chunkSize: settings.upstreamMaxIDs)
            metrics.recordCoalesced(claim.joinedIdentifierCount)
            for fetch in claim.started { start(fetch, requestID: requestID, deadline: deadline) }
            var failures: [ProductsFetchFailure] = []
            let deadlineFailure = ProductsFetchFailure.cancelled(
                detail: "the call's deadline of \(settings.requestTimeout.milliseconds) ms passed (GATEWAY_REQUEST_TIMEOUT_MS)"
            )
            for fetch in claim.fetches {
                switch await fetch.outcome(until: deadline, onDeadline: deadlineFailure) {
                case .success(let page):
                    // Only slots still open: a cached answer or an earlier
                    // page keeps its place, as the first answer wins.
                    for index in identifiers.indices where answers[index] == nil {
                        if let product = page.encodedProducts[identifiers[index]] {
                            answers[index] = .product(product)
                        }
                    }
                case .failure(let failure):
                    if failure.allowsStaleAnswer {
                        // `stale-if-error`: entries still within it answer
                        // for this fetch's identifiers, if all of them can.
                        let fallback = cache.fillStaleIfError(
                            scope: scope, identifiers: identifiers, failedIdentifiers: fetch.identifiers, now: .now, into: &answers
                        )
                        metrics.recordStaleIdentifiers(fallback.filled)
                        if fallback.complete { continue }
                    }
                    failures.append(failure)
                }
            }
            if let failure = ProductsFetchFailure.mostSevere(failures) { return .failure(failure) }
        }
        // Every identifier no page and no entry has a product for is invalid.
        return .success(ProductsResult.encoded(requested: identifiers, answers: answers, region: region))
    }

    /// The shared tier's turn on a memory miss: one `MGET` of `missing`.
    /// Every entry found is kept in memory for the rest of its time; fresh
    /// ones answer now (`gateway_shared_cache_hits_total`), stale ones as
    /// the memory cache's stale rules allow. Returns what is still missing.
    private func lookUpShared(
        _ missing: [String], in sharedTier: SharedTier, scope: FetchScope, identifiers: [String],
        answers: inout [ProductAnswer?], stale: inout [String], requestID: String, deadline: ContinuousClock.Instant
    ) async -> [String] {
        guard let found = await sharedTier.lookup(scope: scope, identifiers: missing) else { return missing }
        let nowUnixMS = SharedTier.unixMilliseconds()
        var kept: [(identifier: String, entry: SharedCacheEntry, freshFor: Duration)] = []
        var fresh: [String: ProductAnswer] = [:]
        var anyStale = false
        for (index, entry) in found.enumerated() {
            guard let entry else { continue }
            let freshFor = Duration.milliseconds(entry.freshUntilUnixMS - nowUnixMS)
            kept.append((missing[index], entry, freshFor))
            if freshFor > .zero { fresh[missing[index]] = entry.answer } else { anyStale = true }
        }
        guard !kept.isEmpty else { return missing }
        cache.store(shared: kept, scope: scope, now: .now)
        if !fresh.isEmpty {
            for index in identifiers.indices where answers[index] == nil {
                if let answer = fresh[identifiers[index]] { answers[index] = answer }
            }
            metrics.recordSharedHits(fresh.count)
        }
        if anyStale {
            // Now in memory: `stale-while-revalidate` ones answer (and are
            // refreshed) as a memory lookup would have answered them.
            var revalidating: [String] = []
            _ = cache.lookup(scope: scope, identifiers: identifiers, now: .now, into: &answers, revalidating: &revalidating)
            if !revalidating.isEmpty {
                metrics.recordStaleIdentifiers(revalidating.count)
                revalidate(revalidating, scope: scope, requestID: requestID, deadline: deadline)
                stale.append(contentsOf: revalidating)
            }
        }
        var still: [String] = []
        for index in identifiers.indices where answers[index] == nil { still.append(identifiers[index]) }
        return still
    }

    /// `stale-while-revalidate`: one background fetch per identifier
    /// answered stale, coalesced like any fetch (an identifier already being
    /// fetched is not asked again). Nobody waits for it; its success
    /// refreshes the cache, its failure is forgotten.
    private func revalidate(_ identifiers: [String], scope: FetchScope, requestID: String, deadline: ContinuousClock.Instant) {
        let claim = coalescer.claim(scope: scope, identifiers: identifiers, chunkSize: settings.upstreamMaxIDs)
        for fetch in claim.started { start(fetch, requestID: requestID, deadline: deadline) }
    }

    /// Starts a shared fetch in a task of its own: no caller owns it, so a
    /// caller leaving never cancels it for the others; the coalescer owns
    /// it, from the claim until `finish`. The task runs on the calling thread's
    /// event loop when there is one, so the fetch, its upstream exchange and
    /// its timers stay on the loop of the call that started it.
    private func start(_ fetch: SharedFetch, requestID: String, deadline: ContinuousClock.Instant) {
        let request = SourceRequest(scope: fetch.scope, identifiers: fetch.identifiers, requestID: requestID, deadline: deadline)
        let source = self.source
        let cache = self.cache
        let coalescer = self.coalescer
        Task(executorPreference: EventLoop.current) {
            let outcome = await source.fetch(request)
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
