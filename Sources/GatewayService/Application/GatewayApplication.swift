public import GatewayMetrics
import MemoryTier
import SharedTier
import EventTransport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
public import JSONRPC
public import Logging
import ProductsDomain
public import ServiceLifecycle
import Synchronization
import Tracing

/// The composition root: builds every part from a configuration, serves,
/// and shuts down gracefully. `main` and the tests both use it.
///
/// It is one `Service` composed of the ``HTTPFront``, the ``UpstreamPool``
/// and the event loops under both, rather than a group of sibling services:
/// its shutdown is a sequence whose steps depend on each other (drain before
/// any call is released, so the answers carry `Connection: close`; release
/// the fetch waiters before the pool refuses leases, so calls get
/// `cancelled`; stop the loops last, after the answers are written), and a
/// `ServiceGroup` cancels its services all at once when the grace is over.
/// Signals and the grace belong to the group that runs it (`main`: bounded
/// by `GATEWAY_SHUTDOWN_GRACE_MS`, shut down on SIGTERM or SIGINT; the
/// tests: one without signals).
public final class GatewayApplication: Service {
    public let configuration: GatewayConfiguration
    public let metrics: GatewayMetrics
    private let logger: Logger
    private let group: EventLoopGroup
    private let front: HTTPFront
    private let descriptors: DescriptorBudget
    private let upstream: UpstreamPool
    private let sharedTier: SharedTier?
    private let boundAdminPort = Atomic<Int>(-1)
    /// Sampling, and export when an endpoint is set.
    public let tracer: Tracer
    /// The collector's client, shut down after the last export.
    private let exportClient: HTTPSClient?

    /// Builds the gateway; nothing listens until ``start()``.
    /// - Throws: ``ConfigurationError`` for a CA or catalog file that cannot
    ///   be used, ``TransportError`` when the event loops cannot be made.
    public init(configuration: GatewayConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        let descriptors = try DescriptorBudget(configuration: configuration)
        self.descriptors = descriptors
        let metrics = GatewayMetrics(upstreamMaxIDs: configuration.upstreamMaxIDs)
        self.metrics = metrics
        let group = try EventLoopGroup(count: configuration.workers, namePrefix: "gateway-loop")
        self.group = group
        let (tracer, exportClient) = try Self.makeTracer(configuration.tracing, group: group, metrics: metrics, logger: logger)
        self.tracer = tracer
        self.exportClient = exportClient

        let source: any ProductSource
        let client: HTTPSClient?
        if let upstream = configuration.upstream {
            let tls: TLSClientContext
            do {
                tls = try TLSClientContext(caFile: configuration.caFile)
            } catch {
                group.shutdown()
                throw ConfigurationError(variable: configuration.caFile == nil ? "ONSIDE_UPSTREAM_URL" : "ONSIDE_CA_FILE", message: "cannot set up TLS: \(error.message)")
            }
            let upstreamClient = HTTPSClient(group: group, configuration: HTTPSClientConfiguration(
                host: upstream.host,
                port: upstream.port,
                tls: tls,
                timeoutMilliseconds: configuration.upstreamTimeoutMS,
                maxConcurrentExchanges: configuration.upstreamConcurrency,
                maxResponseBytes: configuration.upstreamMaxBodyBytes,
                observer: UpstreamInflightGauge(metrics: metrics)
            ))
            client = upstreamClient
            source = OnsideUpstreamSource(
                client: upstreamClient,
                settings: .init(
                    basePath: upstream.basePath,
                    apiToken: configuration.apiToken,
                    retries: configuration.upstreamRetries,
                    attemptTimeout: .milliseconds(configuration.upstreamTimeoutMS),
                    serverHost: upstream.host,
                    serverPort: upstream.port
                ),
                metrics: metrics,
                logger: logger,
                tracer: tracer
            )
        } else {
            client = nil
            do {
                let catalog = try configuration.catalogPath.map { path throws(CatalogError) in try Catalog(contentsOfFile: path) } ?? Catalog.sample
                source = CatalogProductSource(catalog: catalog)
            } catch {
                group.shutdown()
                throw ConfigurationError(variable: "GATEWAY_CATALOG", message: "\(error)")
            }
        }

        // Under the shared tier: what a loop's fetches still ask after the
        // claims across replicas goes out together.
        // A merged call not answered within half of one attempt's timeout
        // (1 s by default) is hedged: its fetches are asked again apart, so
        // one slow identifier delays the others by that much at most, not
        // by an attempt and its retries (docs/api.md). Half, not less: a
        // healthy upstream answers well within it even on a loaded host,
        // where a hedge would only double the calls.
        let merged = MergingSource(
            base: source, loops: group.loops, maxIdentifiers: configuration.upstreamMaxIDs, window: .microseconds(configuration.mergeWindowUS),
            hedgeAfter: .milliseconds(max(1, configuration.upstreamTimeoutMS / 2))
        )
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
                cacheMaxStaleSeconds: configuration.cacheMaxStaleSeconds,
                waitingFor: configuration.upstream == nil ? nil
                    : "the upstream had not answered (each attempt may take UPSTREAM_TIMEOUT_MS=\(configuration.upstreamTimeoutMS) ms, with UPSTREAM_RETRIES=\(configuration.upstreamRetries))"
            ),
            // With the shared tier, a fetch claims its identifiers across
            // replicas and stores what it may keep in Redis.
            source: sharedTier.map { SharedTierSource(base: merged, tier: $0) } ?? merged,
            metrics: metrics,
            sharedTier: sharedTier
        )
        self.upstream = UpstreamPool(service: service, client: client)
        let rpc = JSONRPCServer<RPCCallContext>(
            maxBatchSize: configuration.maxBatch,
            methods: ["products.fetch": Self.productsFetchMethod(service: service), "rpc.discover": OpenRPCDocument.discoverMethod()],
            maxAnswerBytes: configuration.maxAnswerBytes,
            observer: Self.callObserver(metrics: metrics, tracer: tracer),
            elementContext: { $0.forBatchElement() }
        )
        let readiness = ReadinessState()
        let handler = GatewayHTTPHandler(
            rpc: rpc,
            authenticator: APIKeyAuthenticator(keys: configuration.apiKeys),
            readiness: readiness,
            metrics: metrics,
            openAPIDocument: OpenAPIDocument.bytes,
            batchTurns: BatchTurns(concurrency: configuration.batchConcurrency) { change in metrics.recordBatchesWaiting(change) },
            requestTimeout: .milliseconds(configuration.requestTimeoutMS),
            tracer: tracer,
            logger: logger
        )
        let front = HTTPFront(
            group: group,
            configuration: HTTPServerConfiguration(
                host: configuration.listenHost,
                port: configuration.listenPort,
                limits: .init(maxHeaderBytes: 16384, maxHeaderFields: 100, maxBodyBytes: configuration.maxBodyBytes),
                readTimeout: .milliseconds(configuration.readTimeoutMS),
                idleTimeout: .milliseconds(configuration.idleTimeoutMS),
                // An answer has as long to be read as a request to arrive.
                writeTimeout: .milliseconds(configuration.readTimeoutMS),
                maxConnections: descriptors.maxConnections
            ).withUnwrittenBytesBounded(byAnswersOf: configuration.maxAnswerBytes),
            admin: configuration.adminListen,
            logger: logger,
            accessLog: AccessLog(metrics: metrics, logger: logger),
            handler: handler,
            readiness: readiness
        )
        self.front = front
        // Weak: the front's handler holds the metrics, so a strong capture
        // would make a cycle that outlives the application.
        metrics.readConnectionCounts { [weak front] in front?.connectionCounts ?? (0, 0) }
    }

    /// Binds and serves; returns the bound port. Binding comes before
    /// ``run()`` so that a port in use stops start-up before any service runs.
    @discardableResult
    public func start() throws -> Int {
        LibeventLog.route(to: logger)
        if configuration.upstream != nil, configuration.apiToken == nil {
            logger.warning("ONSIDE_UPSTREAM_URL is set but no token is (ONSIDE_API_TOKEN or ONSIDE_API_TOKEN_FILE): upstream calls go without Authorization, and an upstream that needs one answers 401 (internalError)")
        }
        if descriptors.maxConnections < configuration.maxConnections {
            logger.warning("the open-file limit allows fewer client connections than GATEWAY_MAX_CONNECTIONS; past them, connections are refused with 503", metadata: [
                "openFileLimit": .stringConvertible(descriptors.openFileLimit),
                "GATEWAY_MAX_CONNECTIONS": .stringConvertible(configuration.maxConnections),
                "maxConnections": .stringConvertible(descriptors.maxConnections),
                "reservedDescriptors": .stringConvertible(descriptors.reserved),
            ])
        }
        if let exporter = tracer.exporter {
            exporter.start()
            let tracing = configuration.tracing
            logger.info("exporting spans", metadata: [
                "endpoint": "\(tracing.endpoint?.url ?? "")", "protocol": "\(tracing.exportProtocol.rawValue)",
                "headers": .stringConvertible(tracing.headers.count), "scheduleDelayMs": .stringConvertible(tracing.scheduleDelayMS),
                "maxQueueSize": .stringConvertible(tracing.maxQueueSize), "maxExportBatchSize": .stringConvertible(tracing.maxExportBatchSize),
                "exportTimeoutMs": .stringConvertible(tracing.exportTimeoutMS),
            ])
        }
        do throws(HTTPFrontBindError) {
            let ports = try front.start()
            boundAdminPort.store(ports.adminPort ?? -1, ordering: .releasing)
            return ports.port
        } catch {
            // Binding is the one thing starting the front can fail at.
            let (variable, host, port) = error.isAdmin
                ? (ConfigurationVariable.adminListen, configuration.adminListen?.host ?? "", configuration.adminListen?.port ?? 0)
                : (ConfigurationVariable.listen, configuration.listenHost, configuration.listenPort)
            throw ConfigurationError(variable: variable.rawValue, message: "cannot listen on \(host):\(port): \(error.error)")
        }
    }

    /// The port `GATEWAY_ADMIN_LISTEN` is bound to (the real one when it
    /// asked for port 0), once ``start()`` has returned; nil without it.
    public var adminPort: Int? {
        let port = boundAdminPort.load(ordering: .acquiring)
        return port < 0 ? nil : port
    }

    /// Serves until the group running it shuts down, then drains:
    ///
    /// 1. The front drains: `/readyz` 503, listeners closed, later answers
    ///    with `Connection: close`.
    /// 2. Graceful: the calls in flight get the rest of the grace. When the
    ///    grace is over (this task is cancelled), every wait on a fetch ends
    ///    with `cancelled`, and the front waits, uncancellably, until those
    ///    answers are handed over.
    /// 3. Idle connections close at once (no request can arrive on one after
    ///    the count); each of the others closes once its answer is out, at
    ///    most 2 s later.
    /// 4. Graceful: fetches still running (their callers left at their
    ///    deadline) get the rest of the grace. Then the pool fails the lease
    ///    waiters and closes its connections, and the loops stop.
    public func run() async throws {
        let graceful = (try? await gracefulShutdown()) != nil
        front.beginDraining()
        let answered = graceful ? await front.waitForCalls(cancellable: true) : false
        if !answered {
            let inFlight = front.callsInFlight
            if inFlight > 0 {
                logger.warning("shutdown grace over; cancelling calls in flight", metadata: ["inFlight": .stringConvertible(inFlight)])
            }
            upstream.cancelWaiting()
            await front.waitForCalls(cancellable: false)
        }
        // A client that does not read its last answer within this is cut off:
        // shutdown is bounded.
        await front.close(writeDeadline: .seconds(2))
        if answered { _ = await upstream.waitForFetches() }
        upstream.close()
        sharedTier?.close()
        // The spans of the last calls go out, for 2 s at most.
        if let exporter = tracer.exporter {
            await exporter.shutdown(within: .seconds(2))
            exportClient?.shutdown()
        }
        // Blocks this thread until the loops' threads have ended; they run
        // their last jobs themselves and never wait for the cooperative pool.
        group.shutdown()
    }

    /// The tracer of `settings`: with an endpoint, an exporter on the
    /// first loop and a client of its own (plain, or verified TLS against
    /// the system store or `OTEL_EXPORTER_OTLP_CERTIFICATE`).
    private static func makeTracer(_ settings: TracingSettings, group: EventLoopGroup, metrics: GatewayMetrics, logger: Logger) throws -> (Tracer, HTTPSClient?) {
        guard let endpoint = settings.endpoint else { return (Tracer(sampler: settings.sampler), nil) }
        var tls: TLSClientContext?
        if endpoint.isTLS {
            do {
                tls = try TLSClientContext(caFile: settings.caFile)
            } catch {
                group.shutdown()
                throw ConfigurationError(variable: settings.caFile == nil ? endpoint.variable : "OTEL_EXPORTER_OTLP_CERTIFICATE", message: "cannot set up TLS: \(error.message)")
            }
        }
        var clientConfiguration = HTTPSClientConfiguration(
            host: endpoint.host, port: endpoint.port, tls: tls, timeoutMilliseconds: settings.exportTimeoutMS,
            maxConcurrentExchanges: 1, maxIdleConnectionsPerLoop: 1, maxResponseBytes: 1 << 20
        )
        clientConfiguration.naming = HTTPSClientNaming(
            server: "collector", timeoutSetting: "OTEL_BSP_EXPORT_TIMEOUT or OTEL_EXPORTER_OTLP_TIMEOUT", maxBodySetting: "1 MiB for a collector's answer",
            caSetting: "OTEL_EXPORTER_OTLP_CERTIFICATE", concurrencySetting: "one export at a time"
        )
        let client = HTTPSClient(group: group, configuration: clientConfiguration)
        var attributes = [
            SpanAttribute("service.name", settings.serviceName),
            SpanAttribute("service.version", settings.serviceVersion),
            SpanAttribute("service.instance.id", TraceIDGenerator.traceID().hex),
        ]
        attributes += settings.resourceAttributes.map { SpanAttribute($0.name, $0.value) }
        let exporter = SpanExporter(
            settings: settings, endpoint: endpoint, client: client, loop: group.loops[0],
            resource: OTLPResource(attributes: attributes, scopeName: "products-gateway", scopeVersion: settings.serviceVersion),
            metrics: metrics, logger: logger
        )
        return (Tracer(sampler: settings.sampler, exporter: exporter), client)
    }

    /// The logger for a `ServiceGroup`: its own lines are all `debug` (the
    /// service starting and stopping), and between start-up and shutdown
    /// every line of the log belongs to a call.
    public static func lifecycleLogger(_ logger: Logger) -> Logger {
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .info)
        return quiet
    }

    /// `products.fetch`, bound to the service: answered now (from memory,
    /// or refused) or later by callback on the request's loop, from the
    /// parsed params, and from their text with no tree for the usual call.
    public static func productsFetchMethod(service: ProductsFetchService) -> JSONRPCMethod<RPCCallContext> {
        JSONRPCMethod(
            { request, context in service.fetchImmediately(params: request.params, context: context) },
            fast: { params, context in service.fetchImmediately(paramsJSON: params, context: context) }
        )
    }

    /// Metrics and the call's log line, for every request the engine saw:
    /// calls, notifications, unknown methods, invalid requests, bodies that
    /// are not JSON.
    private static func callObserver(metrics: GatewayMetrics, tracer: Tracer) -> JSONRPCServer<RPCCallContext>.Observer {
        { record, context in
            let outcome = Self.outcome(of: record.outcome)
            let method = record.method ?? "-"
            metrics.recordCall(method: method, outcome: outcome, duration: record.duration)
            if context.trace.isRecorded, let span = ServerSpan.make(record, trace: context.trace) { tracer.record(span) }
            // Built only when the line is written: at LOG_LEVEL=warning a
            // call costs no dictionary.
            guard context.logLevel <= .info else { return }
            var metadata: Logger.Metadata = [
                "method": "\(method.prefix(64))",
                "outcome": "\(outcome)",
                "durationMs": .stringConvertible(record.duration.milliseconds),
            ]
            if case .failure(let error) = record.outcome { metadata["code"] = .stringConvertible(error.code) }
            if record.isNotification { metadata["notification"] = .stringConvertible(true) }
            context.logger.info("rpc call", metadata: metadata)
        }
    }

    /// The `outcome` label of a call's metrics and log line: `ok`, the
    /// typed failure's reason (``ProductsFetchFailure``, or a
    /// ``ParamsError`` the contract names one for, such as
    /// `regionUnresolved`, carried by the error as its
    /// ``JSONRPCError/cause``), or the protocol error's name.
    static func outcome(of result: Result<JSONValue, JSONRPCError>) -> String {
        switch result {
        case .success:
            return "ok"
        case .failure(let error):
            if let failure = error.cause as? ProductsFetchFailure { return failure.reason }
            if let refused = error.cause as? ParamsError, let reason = refused.reason { return reason }
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
