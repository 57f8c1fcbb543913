@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
@testable import SharedTier
import Testing

/// `GET {base}/v1/apps/{appId}/products?ids=a,b,c&country=DE`, with the app
/// id and every identifier percent-encoded (contract section 2).
@Suite("UpstreamRequestPath")
struct UpstreamRequestPathTests {
    static func request(app: String = "demo", country: String = "DE", language: String? = nil, ids: [String]) -> SourceRequest {
        SourceRequest(
            scope: FetchScope(appID: app, country: CountryCode(country)!, language: language.flatMap(LanguageTag.init)),
            identifiers: ids,
            requestID: "req-1",
            deadline: .now + .seconds(5)
        )
    }

    @Test func plainIdentifiersAndUpperCaseCountry() {
        let path = UpstreamRequestPath.make(basePath: "", request: Self.request(country: "de", ids: ["premium_monthly", "coins_100", "a.b-c"]))
        #expect(path == "/v1/apps/demo/products?ids=premium_monthly,coins_100,a.b-c&country=DE")
    }

    @Test func theBasePathComesFirst() {
        let path = UpstreamRequestPath.make(basePath: "/api/onside", request: Self.request(ids: ["a"]))
        #expect(path == "/api/onside/v1/apps/demo/products?ids=a&country=DE")
    }

    @Test func theLanguageIsNotInThePath() {
        let path = UpstreamRequestPath.make(basePath: "", request: Self.request(language: "de-DE", ids: ["a"]))
        #expect(path == "/v1/apps/demo/products?ids=a&country=DE")
    }

    @Test func theAppIDAndIdentifiersArePercentEncoded() {
        let path = UpstreamRequestPath.make(basePath: "", request: Self.request(app: "my app/1?x", ids: ["a,b", "c&country=US", "d+e", "é"]))
        #expect(path == "/v1/apps/my%20app%2F1%3Fx/products?ids=a%2Cb,c%26country%3DUS,d%2Be,%C3%A9&country=DE")
    }

    @Test(arguments: [
        ("AZaz09-._~", "AZaz09-._~"),
        (" ", "%20"),
        ("%", "%25"),
        ("/", "%2F"),
        ("#", "%23"),
        ("\u{7F}", "%7F"),
        ("日", "%E6%97%A5"),
    ])
    func onlyUnreservedCharactersStayAsTheyAre(text: String, encoded: String) {
        #expect(UpstreamRequestPath.percentEncode(text) == encoded)
    }
}
