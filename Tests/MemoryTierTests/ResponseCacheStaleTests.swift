@testable import MemoryTier
import MonotonicTime
import ProductsDomain
import Testing

/// RFC 5861 in memory: the cache's windows, on instants the tests choose
/// (no clock, no sockets). How the directives are read from
/// `Cache-Control` is tested in GatewayServiceTests.
@Suite("Stale answers in the memory cache")
struct ResponseCacheStaleTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)
    static let ids = ["premium_monthly", "coins_100", "unknown_x"]

    @Test func onlyUnreachableOrUnavailableUpstreamsAllowAStaleAnswer() {
        #expect(ProductsFetchFailure.connectionError(detail: "refused").allowsStaleAnswer)
        #expect(ProductsFetchFailure.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: nil).allowsStaleAnswer)
        #expect(!ProductsFetchFailure.appNotRegistered(upstreamStatus: 404).allowsStaleAnswer)
        #expect(!ProductsFetchFailure.invalidProductIdentifier(upstreamStatus: 422, detail: nil).allowsStaleAnswer)
        #expect(!ProductsFetchFailure.internalError(upstreamStatus: 200, detail: "bad").allowsStaleAnswer)
        #expect(!ProductsFetchFailure.cancelled(detail: "deadline").allowsStaleAnswer)
    }

    static func page(maxAge: Int, staleIfError: Int? = nil, revalidate: Int? = nil) -> SourcePage {
        SourcePage(
            page: Catalog.sample.page(ids: ids, country: scope.country, language: nil),
            maxAgeSeconds: maxAge, staleIfErrorSeconds: staleIfError, staleWhileRevalidateSeconds: revalidate
        )
    }

    struct Lookup: Equatable {
        var fresh: Int
        var stale: [String]
        var answered: Int
    }

    static func lookup(_ cache: ResponseCache, at now: MonotonicInstant) -> Lookup {
        var answers = [ProductAnswer?](repeating: nil, count: ids.count)
        var stale: [String] = []
        let fresh = cache.lookup(scope: scope, identifiers: ids, now: now, into: &answers, revalidating: &stale)
        return Lookup(fresh: fresh, stale: stale, answered: answers.count { $0 != nil })
    }

    static func staleIfError(_ cache: ResponseCache, at now: MonotonicInstant, failed: [String] = ids) -> (filled: Int, complete: Bool) {
        var answers = [ProductAnswer?](repeating: nil, count: ids.count)
        return cache.fillStaleIfError(scope: scope, identifiers: ids, failedIdentifiers: failed, now: now, into: &answers)
    }

    @Test func staleWhileRevalidateAnswersWithinItsWindowAndAsksForARefresh() {
        let cache = ResponseCache(maxTTLSeconds: 60, maxStaleSeconds: 300)
        let t0 = MonotonicInstant.now
        cache.store(Self.page(maxAge: 1, revalidate: 10), scope: Self.scope, identifiers: Self.ids, now: t0)
        #expect(Self.lookup(cache, at: t0 + .milliseconds(999)) == Lookup(fresh: 3, stale: [], answered: 3))
        #expect(Self.lookup(cache, at: t0 + .seconds(1)) == Lookup(fresh: 0, stale: Self.ids, answered: 3))
        #expect(Self.lookup(cache, at: t0 + .milliseconds(10_999)) == Lookup(fresh: 0, stale: Self.ids, answered: 3))
        // Past the window the entries are dropped.
        #expect(Self.lookup(cache, at: t0 + .seconds(11)) == Lookup(fresh: 0, stale: [], answered: 0))
        #expect(cache.count == 0)
        // A refresh stores fresh entries again.
        cache.store(Self.page(maxAge: 1, revalidate: 10), scope: Self.scope, identifiers: Self.ids, now: t0 + .seconds(11))
        #expect(Self.lookup(cache, at: t0 + .seconds(11)) == Lookup(fresh: 3, stale: [], answered: 3))
    }

    @Test func staleIfErrorAnswersOnlyAfterAFailureAndWithinItsWindow() {
        let cache = ResponseCache(maxTTLSeconds: 60, maxStaleSeconds: 300)
        let t0 = MonotonicInstant.now
        cache.store(Self.page(maxAge: 1, staleIfError: 30), scope: Self.scope, identifiers: Self.ids, now: t0)
        // Stale, but not for a plain lookup: the call must try the upstream.
        #expect(Self.lookup(cache, at: t0 + .milliseconds(1500)) == Lookup(fresh: 0, stale: [], answered: 0))
        #expect(cache.count == 3)
        #expect(Self.staleIfError(cache, at: t0 + .milliseconds(1500)) == (3, true))
        #expect(Self.staleIfError(cache, at: t0 + .milliseconds(30_999)) == (3, true))
        #expect(Self.staleIfError(cache, at: t0 + .seconds(31)) == (0, false))
        // Only the failed fetch's identifiers are filled.
        #expect(Self.staleIfError(cache, at: t0 + .seconds(2), failed: ["coins_100"]) == (1, true))
        // Identifiers of the fetch that this call did not ask for do not matter.
        #expect(Self.staleIfError(cache, at: t0 + .seconds(2), failed: ["coins_100", "unknown_x", "other"]) == (2, true))
        #expect(Self.lookup(cache, at: t0 + .seconds(31)).answered == 0)
        #expect(cache.count == 0)
    }

    @Test func aMissingEntryLeavesTheFailureStanding() {
        let cache = ResponseCache(maxTTLSeconds: 60, maxStaleSeconds: 300)
        let t0 = MonotonicInstant.now
        cache.store(Self.page(maxAge: 1, staleIfError: 30), scope: Self.scope, identifiers: ["coins_100"], now: t0)
        #expect(Self.staleIfError(cache, at: t0 + .seconds(2)) == (1, false))
    }

    @Test func theCapBoundsBothWindows() {
        let capped = ResponseCache(maxTTLSeconds: 60, maxStaleSeconds: 5)
        let t0 = MonotonicInstant.now
        capped.store(Self.page(maxAge: 1, staleIfError: 30, revalidate: 30), scope: Self.scope, identifiers: Self.ids, now: t0)
        #expect(Self.lookup(capped, at: t0 + .milliseconds(5_999)).stale == Self.ids)
        #expect(Self.staleIfError(capped, at: t0 + .milliseconds(5_999)) == (3, true))
        #expect(Self.staleIfError(capped, at: t0 + .seconds(6)) == (0, false))
        #expect(Self.lookup(capped, at: t0 + .seconds(6)).answered == 0)

        let off = ResponseCache(maxTTLSeconds: 60, maxStaleSeconds: 0)
        off.store(Self.page(maxAge: 1, staleIfError: 30, revalidate: 30), scope: Self.scope, identifiers: Self.ids, now: t0)
        #expect(Self.lookup(off, at: t0 + .seconds(1)) == Lookup(fresh: 0, stale: [], answered: 0))
        #expect(Self.staleIfError(off, at: t0 + .seconds(1)) == (0, false))
        #expect(off.count == 0)
    }

    @Test func withoutDirectivesAnEntryEndsWithItsFreshness() {
        let cache = ResponseCache(maxTTLSeconds: 60, maxStaleSeconds: 300)
        let t0 = MonotonicInstant.now
        cache.store(Self.page(maxAge: 1), scope: Self.scope, identifiers: Self.ids, now: t0)
        #expect(Self.staleIfError(cache, at: t0 + .seconds(1)) == (0, false))
        #expect(Self.lookup(cache, at: t0 + .seconds(1)).answered == 0)
        #expect(cache.count == 0)
    }
}
