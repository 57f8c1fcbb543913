@testable import GatewayMetrics
@testable import MemoryTier
@testable import SharedTier
import JSONRPC
import ProductsDomain
import Testing

/// The outcome a replica publishes for the replicas waiting on its claim,
/// and how a fetch's parts become one outcome. No Redis.
@Suite("Shared outcome messages")
struct SharedOutcomeMessageTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: LanguageTag("de"))

    static func page(_ ids: [String], maxAge: Int?, staleIfError: Int? = nil) -> SourcePage {
        SourcePage(
            page: Catalog.sample.page(ids: ids, country: scope.country, language: scope.language),
            maxAgeSeconds: maxAge, staleIfErrorSeconds: staleIfError
        )
    }

    @Test func aSuccessCarriesTheProductsWhetherOrNotTheyMayBeKept() throws {
        for maxAge in [30, nil] as [Int?] {
            let page = Self.page(["premium_monthly", "coins_100", "gone"], maxAge: maxAge, staleIfError: 9)
            let message = SharedOutcomeMessage(scope: Self.scope, identifiers: ["premium_monthly", "coins_100", "gone"], kind: .success(page))
            let read = try #require(SharedOutcomeMessage(decoding: message.encoded))
            #expect(read.scope == Self.scope)
            #expect(read.identifiers == ["premium_monthly", "coins_100", "gone"])
            guard case .success(let got) = read.kind else { Issue.record("not a success"); continue }
            #expect(got.encodedProducts == page.encodedProducts)
            #expect(got.maxAgeSeconds == maxAge)
            #expect(got.staleIfErrorSeconds == 9)
            #expect(got.staleWhileRevalidateSeconds == nil)
        }
    }

    /// A message whose product is over 64 KiB is refused whole (and
    /// counted where it is read), one of exactly 64 KiB is read.
    @Test func aMessageWithAProductOver64KiBIsRefused() throws {
        func message(productBytes: Int) throws -> [UInt8] {
            let product = try #require(EncodedJSON(validating: SharedCacheEntryTests.product(bytes: productBytes, identifier: "x"), maxDepth: 16))
            let page = SourcePage(encodedProducts: ["x": product], maxAgeSeconds: 30)
            return SharedOutcomeMessage(scope: Self.scope, identifiers: ["x", "y"], kind: .success(page)).encoded
        }
        let fits = try #require(SharedOutcomeMessage(decoding: try message(productBytes: 65536)))
        guard case .success(let page) = fits.kind else { Issue.record("not a success"); return }
        #expect(page.encodedProducts["x"]?.bytes.count == 65536)
        #expect(SharedOutcomeMessage(decoding: try message(productBytes: 65537)) == nil)
    }

    @Test(arguments: [
        ProductsFetchFailure.connectionError(detail: "refused"),
        .serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: 7),
        .serviceUnavailable(upstreamStatus: 429, retryAfterSeconds: nil),
        .appNotRegistered(upstreamStatus: 404),
        .invalidProductIdentifier(upstreamStatus: 422, detail: nil),
        .internalError(upstreamStatus: nil, detail: "bad JSON"),
    ])
    func aFailureReadsBackAsTheSameCase(failure: ProductsFetchFailure) throws {
        let message = SharedOutcomeMessage(scope: Self.scope, identifiers: ["a"], kind: .failure(failure))
        let read = try #require(SharedOutcomeMessage(decoding: message.encoded))
        guard case .failure(let got) = read.kind else { Issue.record("not a failure"); return }
        #expect(got == failure)
    }

    @Test(arguments: [
        "", "garbage", "{}", #"{"v":2,"app":"demo","country":"DE","language":null,"ids":["a"],"kind":"released"}"#,
        #"{"v":1,"app":"demo","country":"ZZ","language":null,"ids":["a"],"kind":"released"}"#,
        #"{"v":1,"app":"demo","country":"DE","language":null,"ids":["a"],"kind":"failure","reason":"serviceUnavailable","status":null,"retryAfter":null}"#,
        #"{"v":1,"app":"demo","country":"DE","language":null,"ids":["a"],"kind":"success","maxAge":1,"staleIfError":null,"revalidate":null,"products":{"a":{"productIdentifier":"b"}}}"#,
    ])
    func whatDoesNotParseIsIgnored(text: String) {
        #expect(SharedOutcomeMessage(decoding: Array(text.utf8)) == nil)
    }

    @Test func partsMergeIntoOnePageKeptAsLongAsItsShortestPart() throws {
        let a = Self.page(["premium_monthly"], maxAge: 30, staleIfError: 10)
        let b = Self.page(["coins_100"], maxAge: 5, staleIfError: 60)
        guard case .success(let merged) = SharedClaimDriver.merge([.success(a), .success(b)]) else { Issue.record("failed"); return }
        #expect(Set(merged.encodedProducts.keys) == ["premium_monthly", "coins_100"])
        #expect(merged.maxAgeSeconds == 5)
        #expect(merged.staleIfErrorSeconds == 10)
        let uncacheable = Self.page(["coins_100"], maxAge: nil)
        guard case .success(let never) = SharedClaimDriver.merge([.success(a), .success(uncacheable)]) else { Issue.record("failed"); return }
        #expect(never.maxAgeSeconds == nil)
        let failed = SharedClaimDriver.merge([.success(a), .failure(.connectionError(detail: "x")), .failure(.appNotRegistered(upstreamStatus: 404))])
        #expect(failed.failureReason == "appNotRegistered")
    }

    /// One part (the usual miss) is the outcome as it came.
    @Test func onePartIsItsOwnOutcome() throws {
        let a = Self.page(["premium_monthly"], maxAge: 30, staleIfError: 10)
        guard case .success(let one) = SharedClaimDriver.merge([.success(a)]) else { Issue.record("failed"); return }
        #expect(Set(one.encodedProducts.keys) == ["premium_monthly"])
        #expect(one.maxAgeSeconds == 30)
        #expect(one.staleIfErrorSeconds == 10)
        #expect(SharedClaimDriver.merge([.failure(.connectionError(detail: "x"))]).failureReason == "connectionError")
    }
}

extension Result where Failure == ProductsFetchFailure {
    var failureReason: String? {
        if case .failure(let failure) = self { return failure.reason }
        return nil
    }
}
