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

        public init(appID: String, limits: FetchProductsLimits, requestTimeout: Duration, upstreamMaxIDs: Int, cacheMaxTTLSeconds: Int, regionResolver: RegionResolver, cacheMaxBytes: Int = 33_554_432) {
            self.appID = appID
            self.limits = limits
            self.requestTimeout = requestTimeout
            self.upstreamMaxIDs = upstreamMaxIDs
            self.cacheMaxTTLSeconds = cacheMaxTTLSeconds
            self.regionResolver = regionResolver
            self.cacheMaxBytes = cacheMaxBytes
        }
    }

    private let settings: Settings
    private let source: any ProductSource
    private let coalescer = Coalescer()
    private let cache: ResponseCache
    private let metrics: GatewayMetrics

    public init(settings: Settings, source: any ProductSource, metrics: GatewayMetrics) {
        self.settings = settings
        self.source = source
        self.cache = ResponseCache(maxTTLSeconds: settings.cacheMaxTTLSeconds, maxBytes: settings.cacheMaxBytes, metrics: metrics)
        self.metrics = metrics
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
        let hits = cache.lookup(scope: scope, identifiers: identifiers, now: started, into: &answers)
        metrics.recordCacheHits(hits)

        if hits < identifiers.count {
            var missing: [String] = []
            missing.reserveCapacity(identifiers.count - hits)
            for index in identifiers.indices where answers[index] == nil { missing.append(identifiers[index]) }
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
                    failures.append(failure)
                }
            }
            if let failure = ProductsFetchFailure.mostSevere(failures) { return .failure(failure) }
        }
        // Every identifier no page and no entry has a product for is invalid.
        return .success(ProductsResult.encoded(requested: identifiers, answers: answers, region: region))
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
