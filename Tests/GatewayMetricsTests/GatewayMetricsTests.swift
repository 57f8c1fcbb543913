import Foundation
@testable import GatewayMetrics
import Synchronization
import Testing

/// One family of a Prometheus text exposition: its `# HELP` and `# TYPE`
/// lines and its samples (the registry writes families, and the series of
/// a family, in no fixed order: the samples are a set).
struct ExposedFamily: Equatable {
    var help: String?
    var type: String?
    var samples: Set<String> = []
}

extension GatewayMetrics {
    /// `name`'s family as `/metrics` would show it now, or nil when the
    /// registry has no such family.
    func exposed(_ name: String) -> ExposedFamily? {
        var family = ExposedFamily()
        var found = false
        for line in String(decoding: exposition(), as: UTF8.self).split(separator: "\n").map(String.init) {
            if line.hasPrefix("# HELP \(name) ") {
                family.help = String(line.dropFirst("# HELP \(name) ".count))
                found = true
            } else if line.hasPrefix("# TYPE \(name) ") {
                family.type = String(line.dropFirst("# TYPE \(name) ".count))
                found = true
            } else if !line.hasPrefix("#") {
                let series = line.prefix { $0 != "{" && $0 != " " }
                if [name, "\(name)_bucket", "\(name)_sum", "\(name)_count"].contains(String(series)) {
                    family.samples.insert(line)
                    found = true
                }
            }
        }
        return found ? family : nil
    }

    /// The one sample line of a family without labels.
    func sample(_ name: String) -> String? {
        exposed(name)?.samples.first
    }
}

/// The contract's metrics table as `/metrics` writes it: names, types,
/// labels, values and histogram buckets, exactly. Each test has a registry
/// of its own (a `GatewayMetrics` per test), so counts never mix.
@Suite("GatewayMetrics")
struct GatewayMetricsTests {
    /// Every family of the contract, by type, present before anything is
    /// recorded (the shared tier's `up` gauge is made by the tier, the
    /// upstream's status counter at the first exchange).
    static let families: [String: String] = [
        "gateway_rpc_requests_total": "counter",
        "gateway_rpc_duration_seconds": "histogram",
        "gateway_upstream_duration_seconds": "histogram",
        "gateway_upstream_identifiers_per_call": "histogram",
        "gateway_upstream_inflight": "gauge",
        "gateway_batches_waiting": "gauge",
        "gateway_coalesced_identifiers_total": "counter",
        "gateway_cache_hits_total": "counter",
        "gateway_cache_bytes": "gauge",
        "gateway_cache_evictions_total": "counter",
        "gateway_stale_identifiers_total": "counter",
        "gateway_spans_dropped_total": "counter",
        "gateway_shared_cache_hits_total": "counter",
        "gateway_shared_cache_errors_total": "counter",
        "gateway_shared_waits_total": "counter",
        "gateway_shared_tier_timeouts_total": "counter",
        "gateway_shared_tier_connections": "gauge",
        "gateway_shared_tier_password_refused": "gauge",
        "gateway_http_requests_total": "counter",
        "gateway_connections_open": "gauge",
        "gateway_connections_rejected_total": "counter",
        "process_start_time_seconds": "gauge",
        "process_resident_memory_bytes": "gauge",
        "process_open_fds": "gauge",
        "process_cpu_seconds_total": "gauge",
    ]

    @Test func aNewRegistryShowsEveryFamilyWithItsHelpAndType() {
        let metrics = GatewayMetrics()
        for (name, type) in Self.families {
            let family = metrics.exposed(name)
            #expect(family?.type == type, "\(name)")
            #expect(family?.help?.isEmpty == false, "\(name) has no help text")
        }
        #expect(metrics.exposed("gateway_shared_tier_up") == nil)
        #expect(metrics.exposed("gateway_upstream_requests_total") == nil)
        #expect(metrics.sample("gateway_cache_hits_total") == "gateway_cache_hits_total 0")
        #expect(metrics.sample("gateway_cache_bytes") == "gateway_cache_bytes 0.0")
        #expect(metrics.sample("gateway_connections_open") == "gateway_connections_open 0.0")
        #expect(metrics.sample("gateway_shared_tier_password_refused") == "gateway_shared_tier_password_refused 0.0")
    }

    @Test func aCallIsCountedByMethodAndOutcomeAndOthersFallIntoTheLastValue() {
        let metrics = GatewayMetrics()
        metrics.recordCall(method: "products.fetch", outcome: "ok", duration: .milliseconds(3))
        metrics.recordCall(method: "products.fetch", outcome: "ok", duration: .milliseconds(3))
        metrics.recordCall(method: "products.fetch", outcome: "cancelled", duration: .seconds(2))
        // A method the gateway does not have, and an outcome it never
        // names: the label set cannot grow.
        metrics.recordCall(method: "rpc.secret", outcome: "somethingNew", duration: .milliseconds(30))
        let samples = metrics.exposed("gateway_rpc_requests_total")?.samples ?? []
        #expect(samples.count == GatewayMetrics.methods.count * GatewayMetrics.outcomes.count)
        #expect(samples.contains(#"gateway_rpc_requests_total{method="products.fetch",outcome="ok"} 2"#))
        #expect(samples.contains(#"gateway_rpc_requests_total{method="products.fetch",outcome="cancelled"} 1"#))
        #expect(samples.contains(#"gateway_rpc_requests_total{method="other",outcome="gatewayError"} 1"#))
        #expect(samples.contains(#"gateway_rpc_requests_total{method="products.fetch",outcome="parseError"} 0"#))
        #expect(!samples.contains { $0.contains("rpc.secret") || $0.contains("somethingNew") })
        #expect(samples.filter { !$0.hasSuffix(" 0") }.count == 3)
    }

    @Test func aCallsDurationFallsInTheLatencyBucketsInSeconds() {
        let metrics = GatewayMetrics()
        metrics.recordCall(method: "products.fetch", outcome: "ok", duration: .milliseconds(3))
        metrics.recordCall(method: "products.fetch", outcome: "ok", duration: .milliseconds(250))
        metrics.recordCall(method: "products.fetch", outcome: "ok", duration: .seconds(12))
        let series = #"gateway_rpc_duration_seconds_bucket{method="products.fetch",le="#
        let expected: Set<String> = [
            series + #""0.001"} 0"#, series + #""0.002"} 0"#, series + #""0.005"} 1"#, series + #""0.01"} 1"#,
            series + #""0.025"} 1"#, series + #""0.05"} 1"#, series + #""0.1"} 1"#,
            // A bound is inclusive: 250 ms is in `le="0.25"`.
            series + #""0.25"} 2"#, series + #""0.5"} 2"#, series + #""1.0"} 2"#, series + #""2.5"} 2"#,
            series + #""5.0"} 2"#, series + #""10.0"} 2"#, series + #""+Inf"} 3"#,
            #"gateway_rpc_duration_seconds_sum{method="products.fetch"} 12.253"#,
            #"gateway_rpc_duration_seconds_count{method="products.fetch"} 3"#,
        ]
        let samples = metrics.exposed("gateway_rpc_duration_seconds")?.samples ?? []
        #expect(samples.filter { $0.contains(#"method="products.fetch""#) } == expected)
        #expect(samples.contains(#"gateway_rpc_duration_seconds_count{method="other"} 0"#))
    }

    @Test func upstreamExchangesAreCountedByStatusOrConnectionError() {
        let metrics = GatewayMetrics()
        metrics.recordUpstream(status: 200, duration: .milliseconds(7))
        metrics.recordUpstream(status: 200, duration: .milliseconds(8))
        metrics.recordUpstream(status: 503, duration: .milliseconds(9))
        metrics.recordUpstream(status: nil, duration: .seconds(11))
        #expect(metrics.exposed("gateway_upstream_requests_total")?.type == "counter")
        #expect(metrics.exposed("gateway_upstream_requests_total")?.samples == [
            #"gateway_upstream_requests_total{status="200"} 2"#,
            #"gateway_upstream_requests_total{status="503"} 1"#,
            #"gateway_upstream_requests_total{status="connection_error"} 1"#,
        ])
        let durations = metrics.exposed("gateway_upstream_duration_seconds")?.samples ?? []
        #expect(durations.contains(#"gateway_upstream_duration_seconds_bucket{le="0.005"} 0"#))
        #expect(durations.contains(#"gateway_upstream_duration_seconds_bucket{le="0.01"} 3"#))
        #expect(durations.contains(#"gateway_upstream_duration_seconds_bucket{le="10.0"} 3"#))
        #expect(durations.contains(#"gateway_upstream_duration_seconds_bucket{le="+Inf"} 4"#))
        #expect(durations.contains("gateway_upstream_duration_seconds_sum 11.024"))
        #expect(durations.contains("gateway_upstream_duration_seconds_count 4"))
    }

    @Test(arguments: [
        (1, [1.0]),
        (12, [1, 2, 3, 5, 10, 12]),
        (50, [1, 2, 3, 5, 10, 15, 20, 30, 40, 50]),
        (2000, [1, 2, 3, 5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 300, 400, 500, 750, 1000, 2000]),
    ] as [(Int, [Double])])
    func identifierBucketsEndAtTheCap(maxIdentifiers: Int, buckets: [Double]) {
        #expect(GatewayMetrics.identifierBuckets(upTo: maxIdentifiers) == buckets)
    }

    @Test func identifiersPerCallFillTheBucketsUpToUpstreamMaxIDs() {
        let metrics = GatewayMetrics(upstreamMaxIDs: 12)
        for count in [1, 3, 3, 12] { metrics.recordUpstreamIdentifiers(count) }
        let series = "gateway_upstream_identifiers_per_call"
        #expect(metrics.exposed(series)?.samples == [
            series + #"_bucket{le="1.0"} 1"#, series + #"_bucket{le="2.0"} 1"#, series + #"_bucket{le="3.0"} 3"#,
            series + #"_bucket{le="5.0"} 3"#, series + #"_bucket{le="10.0"} 3"#, series + #"_bucket{le="12.0"} 4"#,
            series + #"_bucket{le="+Inf"} 4"#, series + "_sum 19.0", series + "_count 4",
        ])
    }

    @Test func everyStatusTheListenerAnswersIsThereFromTheStartAndOthersWhenSeen() {
        let metrics = GatewayMetrics()
        let before = metrics.exposed("gateway_http_requests_total")?.samples ?? []
        #expect(before == Set(GatewayMetrics.httpStatuses.map { #"gateway_http_requests_total{status="\#($0)"} 0"# }))
        metrics.recordHTTPRequest(status: 200)
        metrics.recordHTTPRequest(status: 200)
        metrics.recordHTTPRequest(status: 418)
        metrics.recordHTTPRequest(status: 418)
        let after = metrics.exposed("gateway_http_requests_total")?.samples ?? []
        #expect(after.count == GatewayMetrics.httpStatuses.count + 1)
        #expect(after.contains(#"gateway_http_requests_total{status="200"} 2"#))
        #expect(after.contains(#"gateway_http_requests_total{status="418"} 2"#))
        #expect(after.contains(#"gateway_http_requests_total{status="503"} 0"#))
    }

    @Test func sharedWaitsAreCountedByHowTheyEndedAndUnknownEndsAreNot() {
        let metrics = GatewayMetrics()
        metrics.recordSharedWaitsEnded("takeover", 2)
        metrics.recordSharedWaitsEnded("outcome", 5)
        metrics.recordSharedWaitsEnded("outcome", 0)
        metrics.recordSharedWaitsEnded("vanished", 9)
        #expect(metrics.exposed("gateway_shared_waits_total")?.samples == [
            #"gateway_shared_waits_total{ended="outcome"} 5"#,
            #"gateway_shared_waits_total{ended="entry"} 0"#,
            #"gateway_shared_waits_total{ended="takeover"} 2"#,
            #"gateway_shared_waits_total{ended="released"} 0"#,
            #"gateway_shared_waits_total{ended="alone"} 0"#,
            #"gateway_shared_waits_total{ended="deadline"} 0"#,
            #"gateway_shared_waits_total{ended="timeout"} 0"#,
        ])
    }

    @Test func countersAddOnlyWhatWasCounted() {
        let metrics = GatewayMetrics()
        metrics.recordCoalesced(4)
        metrics.recordCoalesced(0)
        metrics.recordCacheHits(3)
        metrics.recordCacheHits(-1)
        metrics.recordCacheEvictions(2)
        metrics.recordStaleIdentifiers(6)
        metrics.recordSpansDropped(1)
        metrics.recordSharedHits(7)
        metrics.recordSharedErrors(8)
        metrics.recordSharedTierTimeout()
        metrics.recordSharedTierTimeout()
        #expect(metrics.sample("gateway_coalesced_identifiers_total") == "gateway_coalesced_identifiers_total 4")
        #expect(metrics.sample("gateway_cache_hits_total") == "gateway_cache_hits_total 3")
        #expect(metrics.sample("gateway_cache_evictions_total") == "gateway_cache_evictions_total 2")
        #expect(metrics.sample("gateway_stale_identifiers_total") == "gateway_stale_identifiers_total 6")
        #expect(metrics.sample("gateway_spans_dropped_total") == "gateway_spans_dropped_total 1")
        #expect(metrics.sample("gateway_shared_cache_hits_total") == "gateway_shared_cache_hits_total 7")
        #expect(metrics.sample("gateway_shared_cache_errors_total") == "gateway_shared_cache_errors_total 8")
        #expect(metrics.sample("gateway_shared_tier_timeouts_total") == "gateway_shared_tier_timeouts_total 2")
    }

    @Test func gaugesFollowWhatIsInFlightNow() {
        let metrics = GatewayMetrics()
        metrics.upstreamStarted()
        metrics.upstreamStarted()
        metrics.upstreamEnded()
        metrics.recordBatchesWaiting(3)
        metrics.recordBatchesWaiting(-1)
        metrics.recordCacheBytes(4096)
        metrics.recordSharedTierConnections(2)
        metrics.recordSharedTierConnections(-1)
        #expect(metrics.sample("gateway_upstream_inflight") == "gateway_upstream_inflight 1.0")
        #expect(metrics.sample("gateway_batches_waiting") == "gateway_batches_waiting 2.0")
        #expect(metrics.sample("gateway_cache_bytes") == "gateway_cache_bytes 4096.0")
        #expect(metrics.sample("gateway_shared_tier_connections") == "gateway_shared_tier_connections 1.0")
    }

    @Test func theSharedTierUpGaugeIsMadeAtItsFirstReport() {
        let metrics = GatewayMetrics()
        metrics.recordSharedTierUp(false)
        #expect(metrics.exposed("gateway_shared_tier_up")?.type == "gauge")
        #expect(metrics.sample("gateway_shared_tier_up") == "gateway_shared_tier_up 0.0")
        metrics.recordSharedTierUp(true)
        #expect(metrics.sample("gateway_shared_tier_up") == "gateway_shared_tier_up 1.0")
    }

    @Test func aRefusedPasswordShowsWhileAnyLoopsLastAttemptWasRefused() {
        let metrics = GatewayMetrics()
        metrics.recordSharedTierPasswordRefused(true, loop: "loop-0")
        metrics.recordSharedTierPasswordRefused(true, loop: "loop-1")
        metrics.recordSharedTierPasswordRefused(false, loop: "loop-0")
        #expect(metrics.sample("gateway_shared_tier_password_refused") == "gateway_shared_tier_password_refused 1.0")
        metrics.recordSharedTierPasswordRefused(false, loop: "loop-1")
        #expect(metrics.sample("gateway_shared_tier_password_refused") == "gateway_shared_tier_password_refused 0.0")
    }

    /// The front's counts are read at each scrape: the open gauge is the
    /// count now, the rejected counter grows by what was rejected since the
    /// last scrape (never counted twice).
    @Test func connectionCountsAreReadAtEachScrape() {
        let metrics = GatewayMetrics()
        let counts = CountsSource()
        metrics.readConnectionCounts { counts.now }
        counts.set(open: 5, rejected: 7)
        #expect(metrics.sample("gateway_connections_open") == "gateway_connections_open 5.0")
        #expect(metrics.sample("gateway_connections_rejected_total") == "gateway_connections_rejected_total 7")
        // Nothing new: the same again.
        #expect(metrics.sample("gateway_connections_rejected_total") == "gateway_connections_rejected_total 7")
        counts.set(open: 2, rejected: 10)
        #expect(metrics.sample("gateway_connections_open") == "gateway_connections_open 2.0")
        #expect(metrics.sample("gateway_connections_rejected_total") == "gateway_connections_rejected_total 10")
    }

    @Test func twoRegistriesNeverShareCounts() {
        let first = GatewayMetrics()
        let second = GatewayMetrics()
        first.recordCacheHits(5)
        #expect(first.sample("gateway_cache_hits_total") == "gateway_cache_hits_total 5")
        #expect(second.sample("gateway_cache_hits_total") == "gateway_cache_hits_total 0")
    }

    @Test func theProcessSeriesDescribeThisProcess() throws {
        let metrics = GatewayMetrics()
        func value(_ name: String) throws -> Double {
            let line = try #require(metrics.sample(name))
            return try #require(Double(line.split(separator: " ").last ?? ""))
        }
        #expect(try value("process_open_fds") >= 3)
        #expect(try value("process_resident_memory_bytes") > 1_000_000)
        #expect(try value("process_cpu_seconds_total") >= 0)
        // Set when the registry was made: after 2020, and not in the future.
        let start = try value("process_start_time_seconds")
        #expect(start > 1_577_836_800)
        #expect(start <= Date().timeIntervalSince1970)
    }
}

/// What the HTTP front would report, set by the test.
final class CountsSource: Sendable {
    private let counts = Mutex<(open: Int, rejected: Int)>((0, 0))
    var now: (open: Int, rejected: Int) { counts.withLock { $0 } }
    func set(open: Int, rejected: Int) { counts.withLock { $0 = (open, rejected) } }
}
