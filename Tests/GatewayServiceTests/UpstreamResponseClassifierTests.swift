import EventTransport
@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
import ProductsDomain
import Testing

/// Every row of the contract's error table as the classifier sees it: one
/// upstream exchange in, a page or (failure, retryable, Retry-After) out.
@Suite("UpstreamResponseClassifier")
struct UpstreamResponseClassifierTests {
    struct Failed: Equatable {
        let failure: ProductsFetchFailure
        let retryable: Bool
        let retryAfterSeconds: Int?
    }

    static let validBody = #"""
    {"country":"DE","items":[{"id":"premium_monthly","title":"Premium","description":"All features",
    "price":{"amount":"4.99","currency":"EUR"}}],"not_found":["retired_pack"]}
    """#

    static func response(_ status: Int, _ headers: HTTPHeaders = [:], body: String = #"{"error":"x"}"#) -> Result<HTTPClientResponse, HTTPClientError> {
        .success(HTTPClientResponse(status: status, headers: headers, body: Array(body.utf8)))
    }

    static func failed(_ outcome: Result<HTTPClientResponse, HTTPClientError>) -> Failed? {
        guard case .failure(let failure, let retryable, let retryAfter) = UpstreamResponseClassifier.classify(outcome) else { return nil }
        return Failed(failure: failure, retryable: retryable, retryAfterSeconds: retryAfter)
    }

    static func page(_ outcome: Result<HTTPClientResponse, HTTPClientError>) -> SourcePage? {
        guard case .success(let page) = UpstreamResponseClassifier.classify(outcome) else { return nil }
        return page
    }

    // MARK: 200

    /// One product is at most 64 KiB: `premium_monthly` whose result item
    /// is exactly that is kept; one byte more and it is left out (its
    /// identifier then unknown, as one the upstream did not answer), the
    /// others kept.
    @Test func aProductOver64KiBIsLeftOut() throws {
        func body(titleCount: Int) -> String {
            #"{"country":"DE","items":[{"id":"premium_monthly","title":""# + String(repeating: "t", count: titleCount)
                + #"","description":"d","price":{"amount":"4.99","currency":"EUR"}},"#
                + #"{"id":"coins_100","title":"100 Coins","description":"d","price":{"amount":"0.99","currency":"EUR"}}],"not_found":[]}"#
        }
        let probe = try #require(Self.page(Self.response(200, body: body(titleCount: 1000))))
        let fixed = try #require(probe.encodedProducts["premium_monthly"]).bytes.count - 1000
        let exact = try #require(Self.page(Self.response(200, body: body(titleCount: 65536 - fixed))))
        #expect(exact.encodedProducts["premium_monthly"]?.bytes.count == 65536)
        let over = try #require(Self.page(Self.response(200, body: body(titleCount: 65537 - fixed))))
        #expect(over.encodedProducts["premium_monthly"] == nil)
        #expect(over.encodedProducts["coins_100"] != nil)
    }

    @Test func okIsParsed() throws {
        let page = try #require(Self.page(Self.response(200, ["Content-Type": "application/json"], body: Self.validBody)))
        // Normalised and encoded once, as the answer splices it; the
        // unknown id is simply absent.
        #expect(page.encodedProducts.mapValues { String(decoding: $0.bytes, as: UTF8.self) } == [
            "premium_monthly": #"{"productIdentifier":"premium_monthly","localizedTitle":"Premium","localizedDescription":"All features","#
                + #""iconUrl":null,"price":{"value":4.99,"currencyCode":"EUR"},"subscriptionPeriod":null,"#
                + #""subscriptionGroupIdentifier":null,"introductoryPrice":null,"discountedPrice":null}"#,
        ])
        #expect(page.maxAgeSeconds == nil)
    }

    @Test func okCarriesItsMaxAge() throws {
        let page = try #require(Self.page(Self.response(200, ["Cache-Control": "public, max-age=30"], body: Self.validBody)))
        #expect(page.maxAgeSeconds == 30)
        let noStore = try #require(Self.page(Self.response(200, ["Cache-Control": "max-age=30, no-store"], body: Self.validBody)))
        #expect(noStore.maxAgeSeconds == nil)
    }

    @Test(arguments: [
        "<html>not json</html>",
        #"{"country":"DE","items":[{"id":"a","description":"d","price":{"amount":"1.00","currency":"EUR"}}]}"#,
        #"{"country":"DE","items":[{"id":"a","title":"A","description":"d","price":{"amount":1.00,"currency":"EUR"}}]}"#,
        #"{"country":"DE","not_found":[]}"#,
        "",
    ])
    func unreadableOkIsAnInternalError(body: String) throws {
        let failed = try #require(Self.failed(Self.response(200, body: body)))
        #expect(failed.failure.reason == "internalError")
        #expect(failed.failure.code == -32006)
        #expect(failed.failure.upstreamStatus == 200)
        #expect(failed.retryable == false)
        #expect(failed.retryAfterSeconds == nil)
    }

    // MARK: Statuses

    @Test func notFoundIsAppNotRegistered() {
        #expect(Self.failed(Self.response(404)) == Failed(failure: .appNotRegistered(upstreamStatus: 404), retryable: false, retryAfterSeconds: nil))
    }

    @Test func unprocessableIsInvalidProductIdentifier() {
        #expect(Self.failed(Self.response(422)) == Failed(failure: .invalidProductIdentifier(upstreamStatus: 422, detail: nil), retryable: false, retryAfterSeconds: nil))
    }

    @Test func tooManyRequestsIsServiceUnavailableWithRetryAfterAndNotRetried() {
        #expect(Self.failed(Self.response(429, ["Retry-After": "7"])) == Failed(
            failure: .serviceUnavailable(upstreamStatus: 429, retryAfterSeconds: 7), retryable: false, retryAfterSeconds: 7
        ))
        #expect(Self.failed(Self.response(429)) == Failed(
            failure: .serviceUnavailable(upstreamStatus: 429, retryAfterSeconds: nil), retryable: false, retryAfterSeconds: nil
        ))
    }

    @Test(arguments: [500, 501, 505, 599])
    func serverErrorsOtherThanGatewayOnesAreNotRetried(status: Int) {
        #expect(Self.failed(Self.response(status)) == Failed(
            failure: .serviceUnavailable(upstreamStatus: status, retryAfterSeconds: nil), retryable: false, retryAfterSeconds: nil
        ))
    }

    @Test(arguments: [502, 503, 504])
    func gatewayErrorsAreRetried(status: Int) {
        #expect(Self.failed(Self.response(status)) == Failed(
            failure: .serviceUnavailable(upstreamStatus: status, retryAfterSeconds: nil), retryable: true, retryAfterSeconds: nil
        ))
    }

    @Test func serviceUnavailableCarriesRetryAfter() {
        #expect(Self.failed(Self.response(503, ["Retry-After": "3"])) == Failed(
            failure: .serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: 3), retryable: true, retryAfterSeconds: 3
        ))
    }

    @Test(arguments: [401, 403])
    func refusedCredentialsAreAnInternalErrorNamingTheTokenVariable(status: Int) throws {
        let failed = try #require(Self.failed(Self.response(status)))
        #expect(failed.failure.reason == "internalError")
        #expect(failed.failure.upstreamStatus == status)
        #expect(failed.retryable == false)
        #expect(failed.failure.message.contains("ONSIDE_API_TOKEN"))
    }

    @Test(arguments: [400, 405, 409, 410, 418, 451, 301, 204])
    func otherStatusesAreAnInternalError(status: Int) throws {
        let failed = try #require(Self.failed(Self.response(status)))
        #expect(failed.failure.reason == "internalError")
        #expect(failed.failure.code == -32006)
        #expect(failed.failure.upstreamStatus == status)
        #expect(failed.retryable == false)
        #expect(failed.failure.message.contains("\(status)"))
    }

    @Test func aConnectionFailureIsARetryableConnectionError() throws {
        let error = HTTPClientError(kind: .connection, message: "Connection reset by peer (localhost:443)")
        let failed = try #require(Self.failed(.failure(error)))
        #expect(failed == Failed(failure: .connectionError(detail: "Connection reset by peer (localhost:443)"), retryable: true, retryAfterSeconds: nil))
        #expect(failed.failure.upstreamStatus == nil)
    }

    @Test func aTLSFailureIsAConnectionError() throws {
        let error = HTTPClientError(kind: .tls, message: "certificate verification failed: unable to get local issuer certificate")
        let failed = try #require(Self.failed(.failure(error)))
        #expect(failed.failure.reason == "connectionError")
        #expect(failed.failure.message.contains("certificate verification failed"))
    }

    /// The wait for a free connection ran into the fetch's deadline (that
    /// of the call that started it): the deadline's failure, not the
    /// upstream's, and nothing to retry.
    @Test func noLeaseBeforeTheDeadlineIsCancelled() throws {
        let message = "no upstream connection became free before the deadline (UPSTREAM_CONCURRENCY exchanges in flight)"
        let failed = try #require(Self.failed(.failure(HTTPClientError(kind: .noLease, message: message))))
        #expect(failed == Failed(failure: .cancelled(detail: message), retryable: false, retryAfterSeconds: nil))
    }

    // MARK: Header parsing

    @Test(arguments: [
        (["max-age=30"], 30),
        (["public, max-age=30"], 30),
        (["MAX-AGE=5"], 5),
        (["max-age = 12"], 12),
        (["max-age=\"10\""], 10),
        (["public", "max-age=7"], 7),
        (["max-age=0"], 0),
    ] as [([String], Int)])
    func maxAgeIsRead(values: [String], expected: Int) {
        #expect(UpstreamResponseClassifier.maxAge(values) == expected)
    }

    @Test(arguments: [
        [],
        ["public"],
        ["no-store"],
        ["no-cache"],
        ["max-age=30, no-store"],
        ["no-cache, max-age=30"],
        ["max-age=30", "no-store"],
        ["max-age=abc"],
        ["max-age=-1"],
        ["max-age"],
        ["s-maxage=40"],
    ] as [[String]])
    func maxAgeIsAbsent(values: [String]) {
        #expect(UpstreamResponseClassifier.maxAge(values) == nil)
    }

    @Test(arguments: [
        ("120", 120),
        (" 5 ", 5),
        ("0", 0),
        ("999999999", 86_400),
    ] as [(String, Int)])
    func retryAfterInSecondsIsRead(value: String, expected: Int) {
        #expect(UpstreamResponseClassifier.retryAfterSeconds(value) == expected)
    }

    @Test(arguments: [nil, "", "-1", "1.5", "soon", "Wed, 21 Oct 2015 07:28:00 GMT"] as [String?])
    func retryAfterThatIsNotDeltaSecondsIsIgnored(value: String?) {
        #expect(UpstreamResponseClassifier.retryAfterSeconds(value) == nil)
    }
}
