import Foundation
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
import Testing

/// Answers kept for `Cache-Control: max-age=N` capped by
/// `GATEWAY_CACHE_MAX_TTL_S`, per (app, country, language, identifier);
/// nothing kept without `max-age`, with `no-store`/`no-cache`, or for a
/// failure. When an entry expires (`min(max-age, cap)`, to the
/// millisecond) is tested on manual time in `GatewayServiceTests`
/// (`CacheAgeingTests`), with no wait.
@Suite("Response cache", .serialized)
struct CacheTests {
    static let ids = ["premium_monthly", "coins_100", "unknown_cached"]

    @Test func aSecondCallWithinMaxAgeIsAnsweredFromMemory() async throws {
        try await UpstreamScenario.run { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=30")
            let first = try await gateway.fetchProducts(Self.ids)
            let second = try await gateway.fetchProducts(Self.ids)
            #expect(first.error == nil)
            #expect(second.result == first.result)
            #expect(second.productIDs == ["premium_monthly", "coins_100"])
            #expect(second.invalidIDs == ["unknown_cached"])
            #expect(upstream.upstream.requests.count == 1)
            // Unknown identifiers are remembered too.
            #expect(try await gateway.metricValue("gateway_cache_hits_total") == 3)
        }
    }

    @Test func onlyTheIdentifiersNotInMemoryGoUpstream() async throws {
        try await UpstreamScenario.run { upstream, gateway in
            upstream.upstream.setCacheControl("public, max-age=30")
            _ = try await gateway.fetchProducts(["premium_monthly", "unknown_cached"])
            let second = try await gateway.fetchProducts(["coins_100", "premium_monthly", "unknown_cached", "unknown_new"])
            #expect(second.productIDs == ["coins_100", "premium_monthly"])
            #expect(second.invalidIDs == ["unknown_cached", "unknown_new"])
            #expect(upstream.upstream.requests.count == 2)
            #expect(upstream.upstream.requests.last?.identifiers == ["coins_100", "unknown_new"])
            #expect(try await gateway.metricValue("gateway_cache_hits_total") == 2)
        }
    }

    @Test(arguments: [nil, "no-store", "no-cache", "max-age=30, no-store", "no-cache, max-age=30", "private", "max-age=0"] as [String?])
    func withoutAUsableMaxAgeEveryCallGoesUpstream(cacheControl: String?) async throws {
        try await UpstreamScenario.run { upstream, gateway in
            upstream.upstream.setCacheControl(cacheControl)
            let first = try await gateway.fetchProducts(Self.ids)
            let second = try await gateway.fetchProducts(Self.ids)
            #expect(second.result == first.result)
            #expect(upstream.upstream.requests.count == 2)
            #expect(try await gateway.metricValue("gateway_cache_hits_total") ?? 0 == 0)
        }
    }

    @Test func aZeroMaxTTLTurnsTheCacheOff() async throws {
        try await UpstreamScenario.run(environment: ["GATEWAY_CACHE_MAX_TTL_S": "0"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=30")
            _ = try await gateway.fetchProducts(Self.ids)
            _ = try await gateway.fetchProducts(Self.ids)
            #expect(upstream.upstream.requests.count == 2)
            #expect(try await gateway.metricValue("gateway_cache_hits_total") ?? 0 == 0)
        }
    }

    @Test func failuresAreNeverKept() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=30")
            upstream.upstream.enqueue(.status(500), .invalidJSON)
            #expect(try await gateway.fetchProducts(Self.ids).reason == "serviceUnavailable")
            #expect(try await gateway.fetchProducts(Self.ids).reason == "internalError")
            let ok = try await gateway.fetchProducts(Self.ids)
            #expect(ok.productIDs == ["premium_monthly", "coins_100"])
            #expect(upstream.upstream.requests.count == 3)
            // The success is kept.
            _ = try await gateway.fetchProducts(Self.ids)
            #expect(upstream.upstream.requests.count == 3)
        }
    }

    @Test func theCacheIsKeyedByCountryAndLanguage() async throws {
        try await UpstreamScenario.run { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=30")
            let scopes: [(String, String?)] = [("DE", nil), ("FR", nil), ("DE", "de"), ("DE", "fr")]
            var first: [FetchAnswer] = []
            for (country, language) in scopes {
                first.append(try await gateway.fetchProducts(["premium_monthly"], country: country, language: language))
            }
            #expect(upstream.upstream.requests.count == 4)
            for (index, (country, language)) in scopes.enumerated() {
                let again = try await gateway.fetchProducts(["premium_monthly"], country: country, language: language)
                #expect(again.result == first[index].result)
            }
            #expect(upstream.upstream.requests.count == 4)
            #expect(first[2].result?["products"]?[0]?["localizedDescription"] == "Alle Funktionen, monatlich abgerechnet")
            #expect(first[1].result?["region"]?["countryCode"] == "FR")
        }
    }

    /// `GATEWAY_CACHE_MAX_BYTES` bounds the entries: each unknown identifier
    /// here costs the same (the fixed overhead, "demo", "DE" and 11 bytes of
    /// identifier), the budget holds four, and SIEVE keeps the identifier
    /// asked again through a scan of identifiers asked once.
    @Test func theCacheStaysWithinItsByteBudgetAndKeepsWhatIsAskedAgain() async throws {
        let cost = ResponseCache.entryOverhead + "demo".utf8.count + "DE".utf8.count + "unknown_000".utf8.count
        let budget = 4 * cost + cost / 2
        try await UpstreamScenario.run(environment: ["GATEWAY_CACHE_MAX_BYTES": "\(budget)"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=60")
            let hot = "unknown_hot"
            _ = try await gateway.fetchProducts([hot])
            #expect(try await gateway.fetchProducts([hot]).invalidIDs == [hot])
            #expect(upstream.upstream.requests.count == 1)

            // Ten identifiers asked once: seven entries go (the hit one
            // stays), the cache holds four.
            let scan = UpstreamScenario.unknownIDs(10)
            for id in scan {
                #expect(try await gateway.fetchProducts([id]).invalidIDs == [id])
                #expect(try await gateway.metricValue("gateway_cache_bytes") ?? .infinity <= Double(budget))
            }
            #expect(upstream.upstream.requests.count == 11)
            #expect(try await gateway.metricValue("gateway_cache_evictions_total") == 7)
            #expect(try await gateway.metricValue("gateway_cache_bytes") == Double(4 * cost))

            // Still in memory: the hit identifier and the scan's newest three.
            #expect(try await gateway.fetchProducts([hot]).invalidIDs == [hot])
            #expect(try await gateway.fetchProducts(Array(scan.suffix(3))).invalidIDs == Array(scan.suffix(3)))
            #expect(upstream.upstream.requests.count == 11)
            #expect(try await gateway.metricValue("gateway_cache_hits_total") == 5)

            // An evicted identifier is fetched again, and evicts another.
            #expect(try await gateway.fetchProducts([scan[0]]).invalidIDs == [scan[0]])
            #expect(upstream.upstream.requests.count == 12)
            #expect(upstream.upstream.requests.last?.identifiers == [scan[0]])
            #expect(try await gateway.metricValue("gateway_cache_evictions_total") == 8)
            #expect(try await gateway.metricValue("gateway_cache_bytes") == Double(4 * cost))
        }
    }

    @Test func aZeroByteBudgetKeepsNothing() async throws {
        try await UpstreamScenario.run(environment: ["GATEWAY_CACHE_MAX_BYTES": "0"]) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=30")
            _ = try await gateway.fetchProducts(Self.ids)
            _ = try await gateway.fetchProducts(Self.ids)
            #expect(upstream.upstream.requests.count == 2)
            #expect(try await gateway.metricValue("gateway_cache_hits_total") ?? 0 == 0)
            #expect(try await gateway.metricValue("gateway_cache_bytes") == 0)
            #expect(try await gateway.metricValue("gateway_cache_evictions_total") == 0)
        }
    }
}
