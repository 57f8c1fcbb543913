public import Prometheus
import Synchronization

/// The series of the contract's metrics table, on a Prometheus registry of
/// the gateway's own (so two gateways in one test process never share
/// counts). Every family is registered here with its `# HELP` text, once.
///
/// Handles for the RPC outcome counters are created up front, so the hot
/// path does no registry lookup; each handle records with atomics.
public final class GatewayMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    /// By position in ``methods``, then in ``outcomes``: found by a short
    /// scan of small strings on every call, where dictionaries would hash.
    private let rpcRequests: [[Prometheus.Counter]]
    /// By position in ``methods``.
    private let rpcDurations: [DurationHistogram]
    private let upstreamDuration: DurationHistogram
    private let upstreamInflight: Prometheus.Gauge
    private let upstreamIdentifiers: ValueHistogram
    /// The buckets `upstreamIdentifiers` was made with. The registry keeps
    /// them too, in an enum whose case tag sits in the spare bits of the
    /// array's pointer, where LeakSanitizer cannot see it: without this
    /// plain reference, a process ending with its metrics alive reports
    /// the array as leaked.
    private let upstreamIdentifierBuckets: [Double]
    private let batchesWaiting: Prometheus.Gauge
    private let coalesced: Prometheus.Counter
    private let cacheHits: Prometheus.Counter
    private let cacheBytes: Prometheus.Gauge
    private let cacheEvictions: Prometheus.Counter
    private let staleIdentifiers: Prometheus.Counter
    /// `gateway_spans_dropped_total`: spans the export queue had no room for.
    private let spansDropped: Prometheus.Counter
    private let sharedHits: Prometheus.Counter
    private let sharedErrors: Prometheus.Counter
    private let sharedConnections: Prometheus.Gauge
    /// `gateway_shared_tier_up`, made by the shared tier only: absent
    /// without `GATEWAY_REDIS_URL`.
    private let sharedTierUp = Mutex<Prometheus.Gauge?>(nil)
    private let sharedTierTimeouts: Prometheus.Counter
    /// By position in ``sharedWaitEnds``.
    private let sharedWaits: [Prometheus.Counter]
    private let sharedPasswordRefused: Prometheus.Gauge
    /// The loops whose last Redis connection attempt had its password
    /// refused: the gauge is 1 while any has.
    private let passwordRefusedLoops = Mutex<Set<String>>([])
    /// By HTTP status, `nil` for an exchange that got no answer: keyed by
    /// the number, so an exchange costs no label text and no string hash.
    private let upstreamStatus = Mutex<[Int?: Prometheus.Counter]>([:])
    /// `gateway_http_requests_total`, by position in ``httpStatuses``.
    private let httpRequests: [Prometheus.Counter]
    /// `gateway_http_requests_total{status="200"}`, also in
    /// ``httpRequests``: held apart, it is counted with no search of the
    /// statuses and no reference count, on every call.
    private let httpRequestsOK: Prometheus.Counter
    /// Statuses outside ``httpStatuses`` (none the gateway answers today),
    /// made when first seen.
    private let otherHTTPRequests = Mutex<[Int: Prometheus.Counter]>([:])
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
    package static let methods = ["products.fetch", "other"]
    /// Outcome label values: `ok` or the error `reason`; any other counts as
    /// `gatewayError` (the last value).
    package static let outcomes = [
        "ok", "connectionError", "serviceUnavailable", "appNotRegistered", "invalidProductIdentifier",
        "cancelled", "internalError", "invalidParams", "regionUnresolved", "methodNotFound", "invalidRequest",
        "parseError", "gatewayError",
    ]

    /// The HTTP statuses the main listener answers, whose
    /// `gateway_http_requests_total` series exist from the start (at 0).
    package static let httpStatuses = [200, 204, 400, 401, 404, 405, 408, 413, 415, 417, 431, 500, 501, 503, 505]

    /// Latency buckets of both duration histograms, in seconds on the wire.
    package static let latencyBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]

    /// Bucket bounds of `gateway_upstream_identifiers_per_call` for calls
    /// of at most `maxIdentifiers` (`UPSTREAM_MAX_IDS`): dense where merging
    /// starts to pay, and the cap itself, so that full calls are a bucket.
    package static func identifierBuckets(upTo maxIdentifiers: Int) -> [Double] {
        let steps = [1, 2, 3, 5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 300, 400, 500, 750, 1000]
        return (steps.filter { $0 < maxIdentifiers } + [max(1, maxIdentifiers)]).map(Double.init)
    }

    /// - Parameter upstreamMaxIDs: `UPSTREAM_MAX_IDS`, the top of
    ///   `gateway_upstream_identifiers_per_call`'s buckets.
    public init(upstreamMaxIDs: Int = 50) {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        let requests = Self.family("gateway_rpc_requests_total", "JSON-RPC calls answered, by method and outcome (ok, or the error's data.reason).")
        rpcRequests = Self.methods.map { method in
            Self.outcomes.map { outcome in
                registry.makeCounter(descriptor: requests, labels: [("method", method), ("outcome", outcome)])
            }
        }
        let durations = Self.family("gateway_rpc_duration_seconds", "Time from a JSON-RPC call's start to its answer, by method.")
        rpcDurations = Self.methods.map { method in
            registry.makeDurationHistogram(descriptor: durations, labels: [("method", method)], buckets: Self.latencyBuckets)
        }
        upstreamDuration = registry.makeDurationHistogram(
            descriptor: Self.family("gateway_upstream_duration_seconds", "Time of one upstream exchange, connecting included, whatever its outcome."),
            buckets: Self.latencyBuckets
        )
        upstreamIdentifierBuckets = Self.identifierBuckets(upTo: upstreamMaxIDs)
        upstreamIdentifiers = registry.makeValueHistogram(
            descriptor: Self.family("gateway_upstream_identifiers_per_call", "Identifiers asked in each upstream exchange (retries included), at most UPSTREAM_MAX_IDS: above 1 under load when concurrent calls' misses share calls."),
            buckets: upstreamIdentifierBuckets
        )
        upstreamInflight = registry.makeGauge(descriptor: Self.family("gateway_upstream_inflight", "Upstream calls in flight now (at most UPSTREAM_CONCURRENCY)."))
        batchesWaiting = registry.makeGauge(descriptor: Self.family("gateway_batches_waiting", "JSON-RPC batches waiting for their turn (GATEWAY_BATCH_CONCURRENCY)."))
        coalesced = registry.makeCounter(descriptor: Self.family("gateway_coalesced_identifiers_total", "Identifiers answered by joining an upstream fetch already in flight."))
        cacheHits = registry.makeCounter(descriptor: Self.family("gateway_cache_hits_total", "Identifiers answered from the memory cache."))
        cacheBytes = registry.makeGauge(descriptor: Self.family("gateway_cache_bytes", "Bytes the memory cache holds now (entries and keys)."))
        cacheBytes.set(to: 0)
        cacheEvictions = registry.makeCounter(descriptor: Self.family("gateway_cache_evictions_total", "Memory cache entries evicted to stay within GATEWAY_CACHE_MAX_BYTES."))
        spansDropped = registry.makeCounter(descriptor: Self.family("gateway_spans_dropped_total", "Spans dropped because the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE)."))
        staleIdentifiers = registry.makeCounter(descriptor: Self.family("gateway_stale_identifiers_total", "Identifiers answered from a stale entry (stale-if-error, stale-while-revalidate)."))
        sharedHits = registry.makeCounter(descriptor: Self.family("gateway_shared_cache_hits_total", "Identifiers answered from the shared tier (Redis)."))
        sharedErrors = registry.makeCounter(descriptor: Self.family("gateway_shared_cache_errors_total", "Redis commands that failed, timed out or returned what does not parse."))
        let waits = Self.family(
            "gateway_shared_waits_total",
            "Identifiers that waited for another replica's fetch, by how the wait ended: outcome (its message), entry, takeover (the lease was gone at a look: a dead replica or a lost message), released (its holder gave it up without an outcome), alone (the shared tier was lost), deadline, timeout (waited UPSTREAM_TIMEOUT_MS, then fetched on its own)."
        )
        sharedWaits = Self.sharedWaitEnds.map { registry.makeCounter(descriptor: waits, labels: [("ended", $0)]) }
        sharedTierTimeouts = registry.makeCounter(descriptor: Self.family(
            "gateway_shared_tier_timeouts_total",
            "Times a Redis round trip waited the whole GATEWAY_REDIS_TIMEOUT_MS (each takes the shared tier down until Redis answers again): what a partition costs the calls."
        ))
        sharedConnections = registry.makeGauge(descriptor: Self.family("gateway_shared_tier_connections", "Redis connections ready now (one per event loop when the shared tier is healthy)."))
        sharedPasswordRefused = registry.makeGauge(descriptor: Self.family(
            "gateway_shared_tier_password_refused", "1 while Redis refuses the gateway's password (AUTH): the shared tier is off until it is fixed."
        ))
        let http = Self.httpRequestsFamily
        httpRequests = Self.httpStatuses.map { registry.makeCounter(descriptor: http, labels: [("status", String($0))]) }
        httpRequestsOK = httpRequests[Self.httpStatuses.firstIndex(of: 200)!]
        process = ProcessMetrics(registry: registry)
        connectionsOpen = registry.makeGauge(descriptor: Self.family("gateway_connections_open", "Client connections open now."))
        connectionsRejected = registry.makeCounter(descriptor: Self.family(
            "gateway_connections_rejected_total", "Connections closed at once because GATEWAY_MAX_CONNECTIONS were open."
        ))
    }

    /// A family's full name and its `# HELP` text.
    package static func family(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// Where `gateway_connections_open` and `gateway_connections_rejected_total` come from.
    package func readConnectionCounts(from source: @escaping @Sendable () -> (open: Int, rejected: Int)) {
        connectionCounts.withLock { $0.source = source }
    }

    /// Records one finished JSON-RPC call.
    package func recordCall(method: String, outcome: String, duration: Duration) {
        let method = Self.methods.firstIndex(of: method) ?? Self.methods.count - 1
        let outcome = Self.outcomes.firstIndex(of: outcome) ?? Self.outcomes.count - 1
        rpcRequests[method][outcome].increment()
        rpcDurations[method].record(duration)
    }

    package static var httpRequestsFamily: MetricNameDescriptor {
        family("gateway_http_requests_total", "HTTP requests answered on the main listener, by status, refused ones included.")
    }

    /// One answer of the main listener, by its HTTP status: a short scan
    /// of small integers, no lock.
    package func recordHTTPRequest(status: Int) {
        if status == 200 {
            httpRequestsOK.increment()
            return
        }
        if let index = Self.httpStatuses.firstIndex(of: status) {
            httpRequests[index].increment()
            return
        }
        otherHTTPRequests.withLock { counters in
            if let counter = counters[status] { return counter }
            let counter = registry.makeCounter(descriptor: Self.httpRequestsFamily, labels: [("status", String(status))])
            counters[status] = counter
            return counter
        }.increment()
    }

    /// One upstream exchange: its HTTP status, or `nil` when it got no
    /// answer (counted as `status="connection_error"`), and how long it took.
    package func recordUpstream(status: Int?, duration: Duration) {
        let counter = upstreamStatus.withLock { counters in
            if let counter = counters[status] { return counter }
            let label = status.map { String($0) } ?? "connection_error"
            let counter = registry.makeCounter(descriptor: Self.upstreamRequests, labels: [("status", label)])
            counters[status] = counter
            return counter
        }
        counter.increment()
        upstreamDuration.record(duration)
    }

    /// How many identifiers one upstream exchange asked for.
    package func recordUpstreamIdentifiers(_ count: Int) { upstreamIdentifiers.record(Double(count)) }

    package static var upstreamRequests: MetricNameDescriptor { family("gateway_upstream_requests_total", "Upstream exchanges, by HTTP status (or connection_error when none came).") }

    package func upstreamStarted() { upstreamInflight.increment() }
    package func upstreamEnded() { upstreamInflight.decrement() }
    /// A batch began (+1) or ended (-1) waiting for its turn (`GATEWAY_BATCH_CONCURRENCY`).
    package func recordBatchesWaiting(_ change: Int) {
        batchesWaiting.increment(by: Double(change))
    }
    package func recordCoalesced(_ count: Int) { if count > 0 { coalesced.increment(by: Int64(count)) } }
    package func recordCacheHits(_ count: Int) { if count > 0 { cacheHits.increment(by: Int64(count)) } }
    /// The bytes the memory cache holds now (an atomic store).
    package func recordCacheBytes(_ bytes: Int) { cacheBytes.set(to: Double(bytes)) }
    /// Entries evicted to stay within `GATEWAY_CACHE_MAX_BYTES`.
    package func recordCacheEvictions(_ count: Int) { if count > 0 { cacheEvictions.increment(by: Int64(count)) } }
    /// Spans the export queue dropped.
    package func recordSpansDropped(_ count: Int) { if count > 0 { spansDropped.increment(by: Int64(count)) } }

    /// Identifiers answered from a stale entry (`stale-if-error`,
    /// `stale-while-revalidate`); not counted as cache hits.
    package func recordStaleIdentifiers(_ count: Int) { if count > 0 { staleIdentifiers.increment(by: Int64(count)) } }
    /// Identifiers answered from the shared tier (Redis).
    package func recordSharedHits(_ count: Int) { if count > 0 { sharedHits.increment(by: Int64(count)) } }
    /// Redis commands that failed, timed out, were not sent (no connection
    /// ready) or returned what does not parse.
    package func recordSharedErrors(_ count: Int) { if count > 0 { sharedErrors.increment(by: Int64(count)) } }
    /// The `ended` label values of `gateway_shared_waits_total`.
    package static let sharedWaitEnds = ["outcome", "entry", "takeover", "released", "alone", "deadline", "timeout"]

    /// `count` identifiers stopped waiting for another replica's fetch, as
    /// `ended` says (one of ``sharedWaitEnds``; any other is not counted).
    package func recordSharedWaitsEnded(_ ended: String, _ count: Int) {
        guard count > 0, let index = Self.sharedWaitEnds.firstIndex(of: ended) else { return }
        sharedWaits[index].increment(by: Int64(count))
    }

    /// Whether the replica uses Redis now (`gateway_shared_tier_up`, made
    /// at the first call).
    package func recordSharedTierUp(_ up: Bool) {
        sharedTierUp.withLock { gauge in
            if gauge == nil {
                gauge = registry.makeGauge(descriptor: Self.family(
                    "gateway_shared_tier_up", "1 while the replica uses the shared tier (Redis), 0 while it goes on without it (unreachable, timing out, or not connected yet)."
                ))
            }
            gauge?.set(to: up ? 1 : 0)
        }
    }

    /// A Redis round trip waited its whole timeout.
    package func recordSharedTierTimeout() { sharedTierTimeouts.increment() }

    /// Redis connections ready now (one per loop when all is well).
    package func recordSharedTierConnections(_ change: Int) {
        sharedConnections.increment(by: Double(change))
    }

    /// Whether Redis refused the password on `loop`'s last connection
    /// attempt: `gateway_shared_tier_password_refused` is 1 while any loop's was.
    package func recordSharedTierPasswordRefused(_ refused: Bool, loop: String) {
        passwordRefusedLoops.withLock { loops in
            if refused { loops.insert(loop) } else { loops.remove(loop) }
            sharedPasswordRefused.set(to: loops.isEmpty ? 0 : 1)
        }
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
