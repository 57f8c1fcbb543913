import Foundation
import MockUpstream
import Testing

/// `/metrics` of a fresh gateway process after a known sequence of calls
/// holds exact counts (contract section 4).
@Suite struct MetricsTests {
    static func fetch(_ ids: [String], country: String? = "DE", id: Int = 1) -> String {
        let list = ids.map { "\"\($0)\"" }.joined(separator: ",")
        let region = country.map { #","countryCode":"\#($0)""# } ?? ""
        return #"{"jsonrpc":"2.0","id":\#(id),"method":"products.fetch","params":{"productIdentifiers":[\#(list)]\#(region)}}"#
    }

    @Test func countsAKnownSequenceOfCalls() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        // Deadlines far beyond the delays below: this test counts, it does not time.
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment([
            "UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "60000", "GATEWAY_REQUEST_TIMEOUT_MS": "60000",
        ]))

        // 1. A success through the upstream (200 #1), nothing cached: no Cache-Control.
        let first = try await gateway.rpc(Self.fetch(["premium_monthly", "coins_100"]))
        #expect(try parseJSON(first.body)["result"] != nil)

        // 2. A success whose answer is cached (200 #2), then 3. one answered from memory.
        upstream.upstream.setCacheControl("max-age=60")
        let second = try await gateway.rpc(Self.fetch(["premium_yearly"], country: "FR"))
        #expect(try parseJSON(second.body)["result"] != nil)
        let third = try await gateway.rpc(Self.fetch(["premium_yearly"], country: "FR"))
        #expect(try parseJSON(third.body)["result"] != nil)
        #expect(upstream.upstream.requests.count == 2)

        // 4. and 5. Two identical calls; the second joins the first's fetch (200 #3),
        // which the upstream holds until the second has arrived.
        upstream.upstream.enqueue(.delay(milliseconds: 1500))
        async let leader = gateway.rpc(Self.fetch(["coins_550"], country: "US"))
        try await waitForEvent("the leader's upstream request") { upstream.upstream.requestCount(for: "coins_550") == 1 }
        async let follower = gateway.rpc(Self.fetch(["coins_550"], country: "US"))
        let (leaderResponse, followerResponse) = try await (leader, follower)
        #expect(try parseJSON(leaderResponse.body)["result"] != nil)
        #expect(try parseJSON(followerResponse.body)["result"] != nil)
        #expect(upstream.upstream.requestCount(for: "coins_550") == 1)

        // 6. Invalid params; 7. no region (LANG=C.UTF-8, no default).
        let invalid = try await gateway.rpc(#"{"jsonrpc":"2.0","id":6,"method":"products.fetch","params":["premium_monthly"]}"#)
        #expect(try parseJSON(invalid.body)["error"]?["code"] == -32602)
        let unresolved = try await gateway.rpc(Self.fetch(["premium_monthly"], country: nil, id: 7))
        #expect(try parseJSON(unresolved.body)["error"]?["data"]?["reason"] == "regionUnresolved")

        // 8. The upstream answers 404.
        upstream.upstream.enqueue(.status(404))
        let missingApp = try await gateway.rpc(Self.fetch(["boost_7days"], id: 8))
        #expect(try parseJSON(missingApp.body)["error"]?["data"]?["reason"] == "appNotRegistered")

        let response = try await gateway.get("/metrics")
        #expect(response.status == 200)
        #expect(response.header("Content-Type")?.hasPrefix("text/plain") == true)
        let lines = Set(response.bodyText.split(separator: "\n").map(String.init))
        let expected = [
            "# TYPE gateway_rpc_requests_total counter",
            #"gateway_rpc_requests_total{method="products.fetch",outcome="ok"} 5"#,
            #"gateway_rpc_requests_total{method="products.fetch",outcome="invalidParams"} 1"#,
            #"gateway_rpc_requests_total{method="products.fetch",outcome="regionUnresolved"} 1"#,
            #"gateway_rpc_requests_total{method="products.fetch",outcome="appNotRegistered"} 1"#,
            #"gateway_rpc_requests_total{method="products.fetch",outcome="serviceUnavailable"} 0"#,
            "# TYPE gateway_rpc_duration_seconds histogram",
            #"gateway_rpc_duration_seconds_count{method="products.fetch"} 8"#,
            #"gateway_rpc_duration_seconds_bucket{method="products.fetch",le="+Inf"} 8"#,
            "# TYPE gateway_upstream_requests_total counter",
            #"gateway_upstream_requests_total{status="200"} 3"#,
            #"gateway_upstream_requests_total{status="404"} 1"#,
            "# TYPE gateway_upstream_duration_seconds histogram",
            "gateway_upstream_duration_seconds_count 4",
            #"gateway_upstream_duration_seconds_bucket{le="+Inf"} 4"#,
            "# TYPE gateway_upstream_inflight gauge",
            "gateway_upstream_inflight 0.0",
            // One exchange of two identifiers, three of one.
            "# TYPE gateway_upstream_identifiers_per_call histogram",
            "gateway_upstream_identifiers_per_call_count 4",
            "gateway_upstream_identifiers_per_call_sum 5.0",
            #"gateway_upstream_identifiers_per_call_bucket{le="1.0"} 3"#,
            #"gateway_upstream_identifiers_per_call_bucket{le="2.0"} 4"#,
            #"gateway_upstream_identifiers_per_call_bucket{le="50.0"} 4"#,
            "# TYPE gateway_coalesced_identifiers_total counter",
            "gateway_coalesced_identifiers_total 1",
            "# TYPE gateway_cache_hits_total counter",
            "gateway_cache_hits_total 1",
        ]
        let counters = lines.filter { !$0.contains("_bucket{") && !$0.hasSuffix(" 0") }.sorted()
        #expect(expected.filter { !lines.contains($0) } == [], "non-zero series: \(counters)")
        // No status the upstream never sent.
        #expect(!lines.contains { $0.hasPrefix("gateway_upstream_requests_total{status=\"connection_error\"}") })
    }

    @Test func everySeriesIsThereBeforeTheFirstCall() async throws {
        let gateway = try await GatewayProcess.start()
        let text = try await gateway.get("/metrics").bodyText
        let lines = Set(text.split(separator: "\n").map(String.init))
        for line in [
            "# TYPE gateway_rpc_requests_total counter",
            #"gateway_rpc_requests_total{method="products.fetch",outcome="ok"} 0"#,
            "# TYPE gateway_rpc_duration_seconds histogram",
            "# TYPE gateway_upstream_duration_seconds histogram",
            "# TYPE gateway_upstream_inflight gauge",
            "gateway_upstream_inflight 0.0",
            "# HELP gateway_upstream_identifiers_per_call Identifiers asked in each upstream exchange (retries included), at most UPSTREAM_MAX_IDS: above 1 under load when concurrent calls' misses share calls.",
            "# TYPE gateway_upstream_identifiers_per_call histogram",
            #"gateway_upstream_identifiers_per_call_bucket{le="50.0"} 0"#,
            "gateway_upstream_identifiers_per_call_count 0",
            "gateway_coalesced_identifiers_total 0",
            "gateway_cache_hits_total 0",
            "# TYPE gateway_cache_bytes gauge",
            "gateway_cache_bytes 0.0",
            "# TYPE gateway_cache_evictions_total counter",
            "gateway_cache_evictions_total 0",
        ] where !lines.contains(line) {
            Issue.record("missing: \(line)")
        }
    }

    /// Catalog mode runs the same pipeline: a cache never applies (no
    /// max-age), calls are counted, and no upstream status is recorded.
    @Test func catalogModeCountsCalls() async throws {
        let gateway = try await GatewayProcess.start()
        _ = try await gateway.rpc(Self.fetch(["premium_monthly"]))
        _ = try await gateway.rpc(Self.fetch(["premium_monthly", "no_such_product"]))
        let lines = Set(try await gateway.get("/metrics").bodyText.split(separator: "\n").map(String.init))
        #expect(lines.contains(#"gateway_rpc_requests_total{method="products.fetch",outcome="ok"} 2"#))
        #expect(!lines.contains { $0.hasPrefix("gateway_upstream_requests_total{") })
    }
}
