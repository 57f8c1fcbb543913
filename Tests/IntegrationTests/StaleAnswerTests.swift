import Foundation
import MockUpstream
import Testing

/// RFC 5861 against the TLS test upstream: `stale-if-error` answers a
/// failed refresh from an expired entry, `stale-while-revalidate` answers
/// at once while one background fetch refreshes it; both capped by
/// `GATEWAY_CACHE_MAX_STALE_S`. The sleeps wait for `max-age=1` to pass
/// (the cache's windows themselves are tested on chosen instants in
/// `GatewayServiceTests`); nothing is timed.
@Suite("Stale answers", .serialized)
struct StaleAnswerIntegrationTests {
    static let ids = ["premium_monthly", "coins_100", "unknown_cached"]
    static let expiry = Duration.milliseconds(1200)

    @Test(arguments: [MockUpstreamFault.status(503), .status(429), .status(500)])
    func staleIfErrorAnswersAfterExpiryWhenTheUpstreamFails(fault: MockUpstreamFault) async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=1, stale-if-error=30")
            let first = try await gateway.fetchProducts(Self.ids)
            #expect(first.productIDs == ["premium_monthly", "coins_100"])
            // Wall clock: the gateway's cache reads the real clock (none is injected yet); this only needs at least 1.2 s to pass (a bound, not a race).
            try await Task.sleep(for: Self.expiry)
            upstream.upstream.enqueue(fault)
            let stale = try await gateway.fetchProducts(Self.ids)
            #expect(stale.error == nil)
            #expect(stale.result == first.result)
            #expect(upstream.upstream.requests.count == 2)
            #expect(try await gateway.metricValue("gateway_stale_identifiers_total") == 3)
            #expect(try await gateway.metricValue("gateway_cache_hits_total") == 0)

            // The next success refreshes the entries: fresh hits again.
            _ = try await gateway.fetchProducts(Self.ids)
            #expect(upstream.upstream.requests.count == 3)
            #expect(try await gateway.fetchProducts(Self.ids).result == first.result)
            #expect(upstream.upstream.requests.count == 3)
            #expect(try await gateway.metricValue("gateway_cache_hits_total") == 3)
            #expect(try await gateway.metricValue("gateway_stale_identifiers_total") == 3)
        }
    }

    /// Only `connectionError` and `serviceUnavailable` fall back; a 404,
    /// a 422 or a body that does not parse fail the call as before.
    @Test(arguments: [
        (MockUpstreamFault.status(404), "appNotRegistered"),
        (.status(422), "invalidProductIdentifier"),
        (.invalidJSON, "internalError"),
    ])
    func otherFailuresAreNotHiddenByAStaleEntry(fault: MockUpstreamFault, reason: String) async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=1, stale-if-error=30")
            _ = try await gateway.fetchProducts(Self.ids)
            // Wall clock: the gateway's cache reads the real clock (none is injected yet); this only needs at least 1.2 s to pass (a bound, not a race).
            try await Task.sleep(for: Self.expiry)
            upstream.upstream.enqueue(fault)
            #expect(try await gateway.fetchProducts(Self.ids).reason == reason)
            #expect(try await gateway.metricValue("gateway_stale_identifiers_total") == 0)
        }
    }

    /// Without the directive, or with the cap at 0, an expired entry never answers.
    @Test(arguments: [("max-age=1", "300"), ("max-age=1, stale-if-error=30", "0")])
    func withoutStaleIfErrorOrWithAZeroCapTheFailureStands(cacheControl: String, cap: String) async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0", "GATEWAY_CACHE_MAX_STALE_S": cap]) { upstream, gateway in
            upstream.upstream.setCacheControl(cacheControl)
            _ = try await gateway.fetchProducts(Self.ids)
            // Wall clock: the gateway's cache reads the real clock (none is injected yet); this only needs at least 1.2 s to pass (a bound, not a race).
            try await Task.sleep(for: Self.expiry)
            upstream.upstream.enqueue(.status(503))
            #expect(try await gateway.fetchProducts(Self.ids).reason == "serviceUnavailable")
            #expect(try await gateway.metricValue("gateway_stale_identifiers_total") == 0)
        }
    }

    /// A call mixing a stale-if-error entry and an identifier never seen:
    /// the fetch that failed covered both, so the call fails (no
    /// half-filled result).
    @Test func aFailedFetchWithAnIdentifierNoEntryCoversStillFails() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=1, stale-if-error=30")
            _ = try await gateway.fetchProducts(["premium_monthly"])
            // Wall clock: the gateway's cache reads the real clock (none is injected yet); this only needs at least 1.2 s to pass (a bound, not a race).
            try await Task.sleep(for: Self.expiry)
            upstream.upstream.enqueue(.status(503))
            #expect(try await gateway.fetchProducts(["premium_monthly", "coins_100"]).reason == "serviceUnavailable")
        }
    }

    /// Expired entries within `stale-while-revalidate` answer at once, even
    /// while the upstream hangs: five concurrent calls cost one background
    /// fetch. Once a refresh succeeds the entries are fresh again.
    @Test func staleWhileRevalidateAnswersAtOnceAndRefreshesInTheBackgroundOnce() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "400"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=1, stale-while-revalidate=30")
            let first = try await gateway.fetchProducts(Self.ids)
            // Wall clock: the gateway's cache reads the real clock (none is injected yet); this only needs at least 1.2 s to pass (a bound, not a race).
            try await Task.sleep(for: Self.expiry)

            // The refresh hangs; had a call waited for it, it would fail.
            upstream.upstream.setStandingFault(.hang)
            let answers = try await withThrowingTaskGroup(of: FetchAnswer.self) { group in
                for _ in 0..<5 { group.addTask { try await gateway.fetchProducts(Self.ids) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.result == first.result })
            #expect(try await gateway.metricValue("gateway_stale_identifiers_total") == 15)
            try await UpstreamScenario.waitFor("the background refresh") { upstream.upstream.requests.count == 2 }
            #expect(upstream.upstream.requests.last?.identifiers == Self.ids)

            // The refresh times out and is forgotten; the next stale answer
            // starts another, which succeeds.
            upstream.upstream.setStandingFault(nil)
            try await UpstreamScenario.waitFor("the hung refresh to end") {
                (try? await gateway.metricValue("gateway_upstream_requests_total{status=\"connection_error\"}")) == 1
            }
            #expect(try await gateway.fetchProducts(Self.ids).result == first.result)
            try await UpstreamScenario.waitFor("the second refresh") { upstream.upstream.requests.count == 3 }
            try await UpstreamScenario.waitFor("the second refresh to succeed") {
                (try? await gateway.metricValue("gateway_upstream_requests_total{status=\"200\"}")) == 2
            }
            // Stored right after the answer arrived: a call now hits fresh
            // entries (polled only for the store that follows the metric).
            try await UpstreamScenario.waitFor("fresh entries") {
                _ = try? await gateway.fetchProducts(Self.ids)
                return (try? await gateway.metricValue("gateway_cache_hits_total")) ?? 0 > 0
            }
            let staleCount = try await gateway.metricValue("gateway_stale_identifiers_total")
            #expect(try await gateway.fetchProducts(Self.ids).result == first.result)
            #expect(try await gateway.metricValue("gateway_stale_identifiers_total") == staleCount)
            #expect(try await gateway.metricValue("gateway_cache_hits_total") == 6)
            #expect(upstream.upstream.requests.count == 3)
        }
    }
}
