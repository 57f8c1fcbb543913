@testable import GatewayService
import JSONRPC
import ProductsDomain
import Testing

/// The memory cache ageing through whole calls, on manual time: freshness
/// (`min(max-age, GATEWAY_CACHE_MAX_TTL_S)`), `stale-while-revalidate` and
/// `stale-if-error` (RFC 5861, capped by `GATEWAY_CACHE_MAX_STALE_S`), each
/// checked at the last instant a rule allows and at the first it does not.
/// The windows alone, on chosen instants, are in `ResponseCacheStaleTests`.
@Suite("Cache ageing on manual time", .timeLimit(.minutes(1)))
struct CacheAgeingTests {
    static let ids = ["premium_monthly", "coins_100", "unknown_cached"]
    static let expected = AnswerBytesTests.treeResult(ids)
    static let unavailable = ProductsFetchFailure.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: nil)

    @Test(arguments: [(30, 60, Duration.seconds(30)), (30, 10, .seconds(10)), (1, 60, .seconds(1))])
    func anEntryAnswersUntilTheSmallerOfMaxAgeAndTheCap(maxAge: Int, cap: Int, kept: Duration) async throws {
        let gateway = ManualTimeService(cacheMaxTTLSeconds: cap)
        gateway.source.script(.page(maxAge: maxAge), .page(maxAge: maxAge))
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        await gateway.clock.advance(by: kept - .milliseconds(1))
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        #expect(gateway.source.asked == [Self.ids])
        #expect(gateway.counter("gateway_cache_hits_total") == 3)
        await gateway.clock.advance(by: .milliseconds(1))
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        #expect(gateway.source.asked == [Self.ids, Self.ids])
        #expect(gateway.counter("gateway_cache_hits_total") == 3)
        #expect(gateway.counter("gateway_stale_identifiers_total") == 0)
    }

    /// Expired entries within `stale-while-revalidate` answer at once, even
    /// while the refresh hangs: three calls cost one background fetch. Once
    /// the refresh lands the entries are fresh again.
    @Test func withinStaleWhileRevalidateCallsAnswerAtOnceAndOneRefreshGoesOut() async throws {
        let gateway = ManualTimeService()
        gateway.source.script(.page(maxAge: 10, revalidate: 20))
        _ = try await gateway.fetch(Self.ids).get()
        await gateway.clock.advance(by: .seconds(10))
        for _ in 0..<3 {
            #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        }
        #expect(gateway.source.asked == [Self.ids, Self.ids])
        #expect(gateway.source.heldCount == 1)
        #expect(gateway.counter("gateway_stale_identifiers_total") == 9)
        #expect(gateway.counter("gateway_cache_hits_total") == 0)

        await gateway.source.answerHeld(.page(maxAge: 10, revalidate: 20))
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        #expect(gateway.counter("gateway_cache_hits_total") == 3)
        #expect(gateway.counter("gateway_stale_identifiers_total") == 9)
        #expect(gateway.source.asked.count == 2)
    }

    /// The window's last instant still answers stale; from its end a call
    /// waits for the fetch like any miss.
    @Test func pastStaleWhileRevalidateACallWaitsForTheFetch() async throws {
        let gateway = ManualTimeService()
        gateway.source.script(.page(maxAge: 10, revalidate: 20))
        _ = try await gateway.fetch(Self.ids).get()
        await gateway.clock.advance(by: .milliseconds(29_999))
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        #expect(gateway.counter("gateway_stale_identifiers_total") == 3)
        // The refresh fails, and is forgotten.
        await gateway.source.answerHeld(.failure(Self.unavailable))

        await gateway.clock.advance(by: .milliseconds(1))
        let waiting = try await gateway.start(Self.ids)
        #expect(waiting.answered == nil)
        #expect(gateway.source.asked == [Self.ids, Self.ids, Self.ids])
        await gateway.source.answerHeld(.page(maxAge: 10))
        #expect(try await waiting.outcome().get().serialized() == Self.expected)
        #expect(gateway.counter("gateway_stale_identifiers_total") == 3)
        #expect(gateway.counter("gateway_cache_hits_total") == 0)
    }

    /// Within `stale-if-error`, a fetch that fails as unreachable or
    /// unavailable is answered from the expired entries; from the window's
    /// end the failure stands.
    @Test(arguments: [unavailable, .connectionError(detail: "refused")])
    func withinStaleIfErrorAFailedFetchIsAnsweredFromTheEntries(failure: ProductsFetchFailure) async throws {
        let gateway = ManualTimeService()
        gateway.source.script(.page(maxAge: 10, staleIfError: 20))
        _ = try await gateway.fetch(Self.ids).get()
        await gateway.clock.advance(by: .seconds(10))
        gateway.source.script(.failure(failure))
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        #expect(gateway.counter("gateway_stale_identifiers_total") == 3)

        await gateway.clock.advance(by: .milliseconds(19_999))
        gateway.source.script(.failure(failure))
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        #expect(gateway.counter("gateway_stale_identifiers_total") == 6)

        // A call that started within the window, whose fetch fails just
        // after the window ended: the failure stands.
        let waiting = try await gateway.start(Self.ids)
        await gateway.clock.advance(by: .milliseconds(1))
        await gateway.source.answerHeld(.failure(failure))
        let error = try #require(await waiting.outcome().failure)
        #expect(error.code == failure.code)
        #expect(error.data?.objectValue?["reason"] == .string(failure.reason))
        // And so it does for one that starts after it.
        gateway.source.script(.failure(failure))
        let after = try #require(try await gateway.fetch(Self.ids).failure)
        #expect(after.data?.objectValue?["reason"] == .string(failure.reason))
        #expect(gateway.counter("gateway_stale_identifiers_total") == 6)
        #expect(gateway.counter("gateway_cache_hits_total") == 0)
        #expect(gateway.source.asked.count == 5)

        // The next success is kept: fresh hits again.
        gateway.source.script(.page(maxAge: 10))
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        #expect(try await gateway.fetch(Self.ids).get().serialized() == Self.expected)
        #expect(gateway.counter("gateway_cache_hits_total") == 3)
        #expect(gateway.source.asked.count == 6)
    }

    /// Only `connectionError` and `serviceUnavailable` fall back; the
    /// others fail the call though an entry is within `stale-if-error`.
    @Test(arguments: [
        ProductsFetchFailure.appNotRegistered(upstreamStatus: 404),
        .invalidProductIdentifier(upstreamStatus: 422, detail: nil),
        .internalError(upstreamStatus: 200, detail: "not JSON"),
    ])
    func otherFailuresAreNotHiddenByAStaleEntry(failure: ProductsFetchFailure) async throws {
        let gateway = ManualTimeService()
        gateway.source.script(.page(maxAge: 10, staleIfError: 30), .failure(failure))
        _ = try await gateway.fetch(Self.ids).get()
        await gateway.clock.advance(by: .seconds(10))
        let error = try #require(try await gateway.fetch(Self.ids).failure)
        #expect(error.data?.objectValue?["reason"] == .string(failure.reason))
        #expect(gateway.counter("gateway_stale_identifiers_total") == 0)
    }

    /// Without the directive, or with the cap at 0, an expired entry never
    /// answers.
    @Test(arguments: [(nil, 300), (30, 0)] as [(Int?, Int)])
    func withoutStaleIfErrorOrWithAZeroCapTheFailureStands(staleIfError: Int?, cap: Int) async throws {
        let gateway = ManualTimeService(cacheMaxStaleSeconds: cap)
        gateway.source.script(.page(maxAge: 10, staleIfError: staleIfError), .failure(Self.unavailable))
        _ = try await gateway.fetch(Self.ids).get()
        await gateway.clock.advance(by: .seconds(10))
        let error = try #require(try await gateway.fetch(Self.ids).failure)
        #expect(error.data?.objectValue?["reason"] == .string("serviceUnavailable"))
        #expect(gateway.counter("gateway_stale_identifiers_total") == 0)
    }

    /// A call mixing a `stale-if-error` entry and an identifier never seen:
    /// the fetch that failed covered both, so the call fails (no
    /// half-filled result).
    @Test func aFailedFetchWithAnIdentifierNoEntryCoversStillFails() async throws {
        let gateway = ManualTimeService()
        gateway.source.script(.page(maxAge: 10, staleIfError: 30), .failure(Self.unavailable))
        _ = try await gateway.fetch(["premium_monthly"]).get()
        await gateway.clock.advance(by: .seconds(10))
        let error = try #require(try await gateway.fetch(["premium_monthly", "coins_100"]).failure)
        #expect(error.data?.objectValue?["reason"] == .string("serviceUnavailable"))
        #expect(gateway.source.asked == [["premium_monthly"], ["premium_monthly", "coins_100"]])
        #expect(gateway.counter("gateway_stale_identifiers_total") == 1)
    }
}
