import EventTransport
import Foundation
import JSONRPC
import Logging
import ProductsDomain

/// The composition root: builds every part from a configuration, serves,
/// and shuts down gracefully. `main` and the tests both use it.
public final class GatewayApplication: Sendable {
    public let configuration: GatewayConfiguration
    public let metrics: GatewayMetrics
    private let logger: Logger
    private let group: EventLoopGroup
    private let server: HTTPServer
    private let client: HTTPSClient?
    private let service: ProductsFetchService
    private let handler: GatewayHTTPHandler
    private let readiness: ReadinessState
    private let sharedTier: SharedTier?

    /// Builds the gateway; nothing listens until ``start()``.
    /// - Throws: ``ConfigurationError`` for a CA or catalog file that cannot
    ///   be used, ``TransportError`` when the event loops cannot be made.
    public init(configuration: GatewayConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        let metrics = GatewayMetrics()
        self.metrics = metrics
        let group = try EventLoopGroup(count: configuration.workers, namePrefix: "gateway-loop")
        self.group = group

        let source: any ProductSource
        if let upstream = configuration.upstream {
            let tls: TLSClientContext
            do {
                tls = try TLSClientContext(caFile: configuration.caFile)
            } catch {
                group.shutdown()
                throw ConfigurationError(variable: configuration.caFile == nil ? "ONSIDE_UPSTREAM_URL" : "ONSIDE_CA_FILE", message: "cannot set up TLS: \(error.message)")
            }
            let client = HTTPSClient(group: group, configuration: HTTPSClientConfiguration(
                host: upstream.host,
                port: upstream.port,
                tls: tls,
                timeoutMilliseconds: configuration.upstreamTimeoutMS,
                maxConcurrentExchanges: configuration.upstreamConcurrency,
                maxResponseBytes: configuration.upstreamMaxBodyBytes,
                observer: UpstreamInflightGauge(metrics: metrics)
            ))
            self.client = client
            source = OnsideUpstreamSource(
                client: client,
                settings: .init(
                    basePath: upstream.basePath,
                    apiToken: configuration.apiToken,
                    retries: configuration.upstreamRetries,
                    attemptTimeout: .milliseconds(configuration.upstreamTimeoutMS)
                ),
                metrics: metrics,
                logger: logger
            )
        } else {
            self.client = nil
            do {
                let catalog = try configuration.catalogPath.map { path throws(CatalogError) in try Catalog(contentsOfFile: path) } ?? Catalog.sample
                source = CatalogProductSource(catalog: catalog)
            } catch {
                group.shutdown()
                throw ConfigurationError(variable: "GATEWAY_CATALOG", message: "\(error)")
            }
        }

        let sharedTier = SharedTier.make(configuration: configuration, group: group, metrics: metrics, logger: logger)
        self.sharedTier = sharedTier
        let service = ProductsFetchService(
            settings: .init(
                appID: configuration.appID,
                limits: FetchProductsLimits(maxIdentifiers: configuration.maxIdentifiers),
                requestTimeout: .milliseconds(configuration.requestTimeoutMS),
                upstreamMaxIDs: configuration.upstreamMaxIDs,
                cacheMaxTTLSeconds: configuration.cacheMaxTTLSeconds,
                regionResolver: RegionResolver(configuredDefault: configuration.defaultCountry, systemLocale: configuration.systemLocale),
                cacheMaxBytes: configuration.cacheMaxBytes,
                cacheMaxStaleSeconds: configuration.cacheMaxStaleSeconds
            ),
            // With the shared tier, a fetch claims its identifiers across
            // replicas and stores what it may keep in Redis.
            source: sharedTier.map { SharedTierSource(base: source, tier: $0) } ?? source,
            metrics: metrics,
            sharedTier: sharedTier
        )
        self.service = service
        let rpc = JSONRPCServer<RPCCallContext>(
            maxBatchSize: configuration.maxBatch,
            methods: ["products.fetch": Self.productsFetchMethod(service: service), "rpc.discover": OpenRPCDocument.discoverMethod()],
            observer: Self.callObserver(metrics: metrics)
        )
        let readiness = ReadinessState()
        self.readiness = readiness
        let handler = GatewayHTTPHandler(
            rpc: rpc,
            authenticator: APIKeyAuthenticator(keys: configuration.apiKeys),
            readiness: readiness,
            metrics: metrics,
            openAPIDocument: OpenAPIDocument.bytes,
            maxBodyBytes: configuration.maxBodyBytes,
            logger: logger
        )
        self.handler = handler
        self.server = HTTPServer(
            group: group,
            configuration: HTTPServerConfiguration(
                host: configuration.listenHost,
                port: configuration.listenPort,
                maxBodyBytes: GatewayHTTPHandler.transportBodyLimit(for: configuration.maxBodyBytes)
            ),
            handler: { request, responder in handler.handle(request, responder: responder) }
        )
    }

    /// Binds and serves; returns the bound port.
    @discardableResult
    public func start() throws -> Int {
        let port = try server.start()
        readiness.set(.ready)
        return port
    }

    /// Graceful shutdown: `/readyz` turns 503, the listeners close, calls in
    /// flight get up to `grace` to finish; whatever still waits then gets
    /// `cancelled`; then connections close and the loops stop.
    public func shutdown(grace: Duration) async {
        readiness.set(.draining)
        server.beginDraining()
        let deadline = ContinuousClock.now + grace
        while handler.inFlightCount > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if handler.inFlightCount > 0 {
            logger.warning("shutdown grace over; cancelling calls in flight", metadata: ["inFlight": "\(handler.inFlightCount)"])
            service.cancelWaiting()
            // The cancelled calls still need their answers written.
            let flushDeadline = ContinuousClock.now + .seconds(1)
            while handler.inFlightCount > 0, ContinuousClock.now < flushDeadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        // Let the loops write the last answers before connections close.
        try? await Task.sleep(for: .milliseconds(50))
        let server = self.server
        let client = self.client
        let group = self.group
        let sharedTier = self.sharedTier
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Blocking waits on the loops belong on a thread of their own,
            // not on the cooperative pool.
            Thread {
                server.stop()
                client?.shutdown()
                sharedTier?.close()
                group.shutdown()
                continuation.resume()
            }.start()
        }
    }

    /// `products.fetch`, bound to the service.
    private static func productsFetchMethod(service: ProductsFetchService) -> JSONRPCServer<RPCCallContext>.Method {
        { request, context in
            await service.fetch(params: request.params, requestID: context.requestID, logger: context.logger)
        }
    }

    /// Metrics and the call's log line, for every request the engine saw:
    /// calls, notifications, unknown methods, invalid requests, bodies that
    /// are not JSON.
    private static func callObserver(metrics: GatewayMetrics) -> JSONRPCServer<RPCCallContext>.Observer {
        { record, context in
            let outcome = Self.outcome(of: record.outcome)
            let method = record.method ?? "-"
            metrics.recordCall(method: method, outcome: outcome, duration: record.duration)
            // Built only when the line is written: at LOG_LEVEL=warning a
            // call costs no dictionary.
            guard context.logger.logLevel <= .info else { return }
            var metadata: Logger.Metadata = [
                "method": "\(method.prefix(64))",
                "outcome": "\(outcome)",
                "durationMs": "\(record.duration.milliseconds)",
            ]
            if case .failure(let error) = record.outcome { metadata["code"] = "\(error.code)" }
            if record.isNotification { metadata["notification"] = "true" }
            context.logger.info("rpc call", metadata: metadata)
        }
    }

    static func outcome(of result: Result<JSONValue, JSONRPCError>) -> String {
        switch result {
        case .success:
            return "ok"
        case .failure(let error):
            if let reason = error.data?.objectValue?["reason"]?.stringValue { return reason }
            switch error.code {
            case -32602: return "invalidParams"
            case -32601: return "methodNotFound"
            case -32600: return "invalidRequest"
            case -32700: return "parseError"
            default: return "gatewayError"
            }
        }
    }
}
