import CoreMetrics
import Metrics
import Prometheus
import Synchronization

/// The series of the contract's metrics table, on swift-metrics with a
/// Prometheus registry of the gateway's own (so two gateways in one test
/// process never share counts).
///
/// Handles for the RPC outcome counters are created up front, so the hot
/// path does no registry lookup; each handle records with atomics.
public final class GatewayMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    /// By position in ``methods``, then in ``outcomes``: found by a short
    /// scan of small strings on every call, where dictionaries would hash.
    private let rpcRequests: [[CoreMetrics.Counter]]
    /// By position in ``methods``.
    private let rpcDurations: [Metrics.Timer]
    private let upstreamDuration: Metrics.Timer
    private let upstreamInflight: Meter
    private let batchesWaiting: Meter
    private let coalesced: CoreMetrics.Counter
    private let cacheHits: CoreMetrics.Counter
    private let cacheBytes: CoreMetrics.Gauge
    private let cacheEvictions: CoreMetrics.Counter
    private let staleIdentifiers: CoreMetrics.Counter
    private let sharedHits: CoreMetrics.Counter
    private let sharedErrors: CoreMetrics.Counter
    private let sharedConnections: Meter
    /// By HTTP status, `nil` for an exchange that got no answer: keyed by
    /// the number, so an exchange costs no label text and no string hash.
    private let upstreamStatus = Mutex<[Int?: CoreMetrics.Counter]>([:])
    private let process: ProcessMetrics
    private let connectionsOpen: Prometheus.Gauge
    private let connectionsRejected: Prometheus.Counter
    /// Reads the HTTP front's counts when `/metrics` is scraped (the front
    /// keeps them in atomics; nothing is recorded per connection here), and
    /// the rejected count last reported.
    private let connectionCounts = Mutex<(source: (@Sendable () -> (open: Int, rejected: Int))?, reported: Int)>((nil, 0))

    /// Method label values; other method names, and requests whose method
    /// could not be read, are counted as `other` so a caller cannot grow the
    /// label set (the last value).
    static let methods = ["products.fetch", "other"]
    /// Outcome label values: `ok` or the error `reason`; any other counts as
    /// `gatewayError` (the last value).
    static let outcomes = [
        "ok", "connectionError", "serviceUnavailable", "appNotRegistered", "invalidProductIdentifier",
        "cancelled", "internalError", "invalidParams", "regionUnresolved", "methodNotFound", "invalidRequest",
        "parseError", "gatewayError",
    ]

    public init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        let latencyBuckets: [Duration] = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        factory.defaultDurationHistogramBuckets = latencyBuckets
        self.registry = registry
        self.factory = factory
        rpcRequests = Self.methods.map { method in
            Self.outcomes.map { outcome in
                CoreMetrics.Counter(label: "gateway_rpc_requests_total", dimensions: [("method", method), ("outcome", outcome)], factory: factory)
            }
        }
        rpcDurations = Self.methods.map { method in
            Metrics.Timer(label: "gateway_rpc_duration_seconds", dimensions: [("method", method)], factory: factory)
        }
        upstreamDuration = Metrics.Timer(label: "gateway_upstream_duration_seconds", factory: factory)
        upstreamInflight = Meter(label: "gateway_upstream_inflight", factory: factory)
        batchesWaiting = Meter(label: "gateway_batches_waiting", factory: factory)
        coalesced = CoreMetrics.Counter(label: "gateway_coalesced_identifiers_total", factory: factory)
        cacheHits = CoreMetrics.Counter(label: "gateway_cache_hits_total", factory: factory)
        cacheBytes = CoreMetrics.Gauge(label: "gateway_cache_bytes", factory: factory)
        cacheBytes.record(0)
        cacheEvictions = CoreMetrics.Counter(label: "gateway_cache_evictions_total", factory: factory)
        staleIdentifiers = CoreMetrics.Counter(label: "gateway_stale_identifiers_total", factory: factory)
        sharedHits = CoreMetrics.Counter(label: "gateway_shared_cache_hits_total", factory: factory)
        sharedErrors = CoreMetrics.Counter(label: "gateway_shared_cache_errors_total", factory: factory)
        sharedConnections = Meter(label: "gateway_shared_tier_connections", factory: factory)
        process = ProcessMetrics(registry: registry)
        connectionsOpen = registry.makeGauge(name: "gateway_connections_open", help: "Client connections open now.")
        connectionsRejected = registry.makeCounter(name: "gateway_connections_rejected_total", help: "Connections closed at once because GATEWAY_MAX_CONNECTIONS were open.")
    }

    /// Where `gateway_connections_open` and `gateway_connections_rejected_total` come from.
    func readConnectionCounts(from source: @escaping @Sendable () -> (open: Int, rejected: Int)) {
        connectionCounts.withLock { $0.source = source }
    }

    /// Records one finished JSON-RPC call.
    func recordCall(method: String, outcome: String, duration: Duration) {
        let method = Self.methods.firstIndex(of: method) ?? Self.methods.count - 1
        let outcome = Self.outcomes.firstIndex(of: outcome) ?? Self.outcomes.count - 1
        rpcRequests[method][outcome].increment()
        rpcDurations[method].recordNanoseconds(duration.nanoseconds)
    }

    /// One upstream exchange: its HTTP status, or `nil` when it got no
    /// answer (counted as `status="connection_error"`), and how long it took.
    func recordUpstream(status: Int?, duration: Duration) {
        let counter = upstreamStatus.withLock { counters in
            if let counter = counters[status] { return counter }
            let label = status.map { String($0) } ?? "connection_error"
            let counter = CoreMetrics.Counter(label: "gateway_upstream_requests_total", dimensions: [("status", label)], factory: factory)
            counters[status] = counter
            return counter
        }
        counter.increment()
        upstreamDuration.recordNanoseconds(duration.nanoseconds)
    }

    func upstreamStarted() { upstreamInflight.increment() }
    func upstreamEnded() { upstreamInflight.decrement() }
    /// A batch began (+1) or ended (-1) waiting for its turn (`GATEWAY_BATCH_CONCURRENCY`).
    func recordBatchesWaiting(_ change: Int) {
        if change > 0 { batchesWaiting.increment(by: Double(change)) } else { batchesWaiting.decrement(by: Double(-change)) }
    }
    func recordCoalesced(_ count: Int) { if count > 0 { coalesced.increment(by: count) } }
    func recordCacheHits(_ count: Int) { if count > 0 { cacheHits.increment(by: count) } }
    /// The bytes the memory cache holds now (an atomic store).
    func recordCacheBytes(_ bytes: Int) { cacheBytes.record(bytes) }
    /// Entries evicted to stay within `GATEWAY_CACHE_MAX_BYTES`.
    func recordCacheEvictions(_ count: Int) { if count > 0 { cacheEvictions.increment(by: count) } }
    /// Identifiers answered from a stale entry (`stale-if-error`,
    /// `stale-while-revalidate`); not counted as cache hits.
    func recordStaleIdentifiers(_ count: Int) { if count > 0 { staleIdentifiers.increment(by: count) } }
    /// Identifiers answered from the shared tier (Redis).
    func recordSharedHits(_ count: Int) { if count > 0 { sharedHits.increment(by: count) } }
    /// Redis commands that failed, timed out, were not sent (no connection
    /// ready) or returned what does not parse.
    func recordSharedErrors(_ count: Int) { if count > 0 { sharedErrors.increment(by: count) } }
    /// Redis connections ready now (one per loop when all is well).
    func recordSharedTierConnections(_ change: Int) {
        if change > 0 { sharedConnections.increment(by: Double(change)) } else { sharedConnections.decrement(by: Double(-change)) }
    }

    /// The Prometheus text exposition of every series.
    public func exposition() -> [UInt8] {
        process.refresh()
        connectionCounts.withLock { state in
            guard let counts = state.source?() else { return }
            connectionsOpen.set(Double(counts.open))
            if counts.rejected > state.reported {
                connectionsRejected.increment(by: Int64(counts.rejected - state.reported))
                state.reported = counts.rejected
            }
        }
        return registry.emitToBuffer()
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
