import Foundation
import MockUpstream
import Testing

/// RFC 5861 against the TLS test upstream, end to end: the directives of
/// the upstream's `Cache-Control` reach the entries, `stale-if-error`
/// answers a failed refresh from an expired entry, `stale-while-revalidate`
/// answers at once while one background fetch refreshes it. The windows'
/// rules (their ends, the cap, which failures fall back, a fetch no entry
/// covers) are tested on manual time in `GatewayServiceTests`
/// (`CacheAgeingTests`); these two only need `max-age=1` to have passed.
@Suite("Stale answers", .serialized)
struct StaleAnswerIntegrationTests {
    static let ids = ["premium_monthly", "coins_100", "unknown_cached"]
    static let expiry = Duration.milliseconds(1200)

    @Test func staleIfErrorAnswersAfterExpiryWhenTheUpstreamFails() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=1, stale-if-error=30")
            let first = try await gateway.fetchProducts(Self.ids)
            #expect(first.productIDs == ["premium_monthly", "coins_100"])
            // Wall clock: the binary's cache ages on the system clock, which a test cannot move; at least 1.2 s must pass (a bound, not a race).
            try await Task.sleep(for: Self.expiry)
            upstream.upstream.enqueue(.status(503))
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

    /// Expired entries within `stale-while-revalidate` answer at once, even
    /// while the upstream hangs: five concurrent calls cost one background
    /// fetch. Once a refresh succeeds the entries are fresh again.
    @Test func staleWhileRevalidateAnswersAtOnceAndRefreshesInTheBackgroundOnce() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "400"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=1, stale-while-revalidate=30")
            let first = try await gateway.fetchProducts(Self.ids)
            // Wall clock: the binary's cache ages on the system clock, which a test cannot move; at least 1.2 s must pass (a bound, not a race).
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
            // starts another, which succeeds. Its entries are kept a minute:
            // with a second they could age again before the last call, under
            // a sanitizer with the other core busy (seen: a fourth request).
            upstream.upstream.setCacheControl("max-age=60, stale-while-revalidate=30")
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
