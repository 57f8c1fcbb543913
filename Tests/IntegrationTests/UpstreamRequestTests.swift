import Foundation
import Testing

/// What the gateway sends upstream (contract section 2): path, query,
/// `Authorization`, `Accept`, `Accept-Language` only with a language, and
/// the call's `X-Request-Id`.
@Suite("Upstream request", .serialized)
struct UpstreamRequestTests {
    @Test func theHeadersOfACallWithoutALanguage() async throws {
        try await UpstreamScenario.run { upstream, gateway in
            let answer = try await gateway.fetchProducts(["premium_monthly", "coins_100"], country: "de", headers: [("X-Request-Id", "caller-id-42")])
            #expect(answer.http.header("X-Request-Id") == "caller-id-42")
            #expect(answer.productIDs == ["premium_monthly", "coins_100"])
            let request = try #require(upstream.upstream.requests.first)
            #expect(upstream.upstream.requests.count == 1)
            #expect(request.path == "/v1/apps/demo/products")
            #expect(request.identifiers == ["premium_monthly", "coins_100"])
            #expect(request.country == "DE")
            #expect(request.headers["Authorization"] == "Bearer \(UpstreamScenario.token)")
            #expect(request.headers["Accept"] == "application/json")
            #expect(request.headers["Accept-Language"] == nil)
            #expect(request.headers["X-Request-Id"] == "caller-id-42")
            #expect(request.headers.values("Authorization").count == 1)
        }
    }

    /// An item the upstream sends for an identifier its fetch did not ask
    /// for is dropped: it never fills a slot another fetch answers, even
    /// one of the same call.
    @Test func anItemAFetchDidNotAskForFillsNoSlot() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_MAX_IDS": "1"]) { upstream, gateway in
            upstream.upstream.setStandingFault(.extraItem(id: "coins_100", title: "Forged"))
            let answer = try await gateway.fetchProducts(["premium_monthly", "coins_100"])
            #expect(answer.productIDs == ["premium_monthly", "coins_100"])
            let titles = answer.result?["products"]?.arrayValue?.compactMap { $0["localizedTitle"]?.stringValue } ?? []
            #expect(titles.count == 2)
            #expect(!titles.contains("Forged"), "\(titles)")
            #expect(upstream.upstream.requests.count == 2)
        }
    }

    /// Identifiers are compared byte for byte: an upstream item whose id is
    /// only canonically equivalent to the one asked for (KELVIN SIGN for K)
    /// does not answer for it.
    @Test func anIDEquivalentOnlyUnderUnicodeDoesNotAnswer() async throws {
        try await UpstreamScenario.run { upstream, gateway in
            upstream.upstream.setStandingFault(.extraItem(id: "\u{212A}ey", title: "Kelvin"))
            let answer = try await gateway.fetchProducts(["Key", "premium_monthly"])
            #expect(answer.error == nil)
            #expect(answer.productIDs == ["premium_monthly"])
            #expect(answer.invalidIDs == ["Key"])
        }
    }

    @Test func theLanguageIsSentAsAcceptLanguage() async throws {
        try await UpstreamScenario.run { upstream, gateway in
            let answer = try await gateway.fetchProducts(["premium_monthly"], language: "de-DE")
            #expect(answer.error == nil)
            #expect(upstream.upstream.requests.first?.headers["Accept-Language"] == "de-DE")
        }
    }

    @Test(arguments: [String(repeating: "x", count: 129), "has space", ""])
    func anInsaneCallerRequestIDIsReplacedEverywhere(callerID: String) async throws {
        try await UpstreamScenario.run { upstream, gateway in
            let answer = try await gateway.fetchProducts(["premium_monthly"], headers: [("X-Request-Id", callerID)])
            let requestID = try #require(answer.http.header("X-Request-Id"))
            #expect(requestID != callerID)
            #expect(requestID.count == 32)
            #expect(upstream.upstream.requests.first?.headers["X-Request-Id"] == requestID)
        }
    }

    @Test func aSaneCallerRequestIDOfTheLongestLengthIsKept() async throws {
        let callerID = String(repeating: "a", count: 64) + String(repeating: "~", count: 64)
        try await UpstreamScenario.run { upstream, gateway in
            let answer = try await gateway.fetchProducts(["premium_monthly"], headers: [("X-Request-Id", callerID)])
            #expect(answer.http.header("X-Request-Id") == callerID)
            #expect(upstream.upstream.requests.first?.headers["X-Request-Id"] == callerID)
        }
    }

    @Test func theTokenFileIsSentAsTheBearerToken() async throws {
        let file = NSTemporaryDirectory() + "upstream-token-\(UUID().uuidString)"
        try Data("token-from-file-0123456789\n".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        var environment = upstream.gatewayEnvironment(["ONSIDE_API_TOKEN_FILE": file])
        environment["ONSIDE_API_TOKEN"] = nil
        let gateway = try RunningGateway.start(environment)
        _ = try await gateway.fetchProducts(["premium_monthly"])
        await gateway.stop()
        #expect(upstream.upstream.requests.first?.headers["Authorization"] == "Bearer token-from-file-0123456789")
    }

    @Test func withoutATokenNoAuthorizationIsSent() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        var environment = upstream.gatewayEnvironment()
        environment["ONSIDE_API_TOKEN"] = nil
        let gateway = try RunningGateway.start(environment)
        _ = try await gateway.fetchProducts(["premium_monthly"])
        await gateway.stop()
        #expect(upstream.upstream.requests.first?.headers["Authorization"] == nil)
    }

    @Test func theBasePathOfTheUpstreamURLPrefixesThePath() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try RunningGateway.start(upstream.gatewayEnvironment([
            "ONSIDE_UPSTREAM_URL": "https://localhost:\(upstream.port)/onside/api/", "UPSTREAM_RETRIES": "0",
        ]))
        let answer = try await gateway.fetchProducts(["premium_monthly"])
        await gateway.stop()
        // The mock serves /v1/... only, so it answers 404 here.
        #expect(answer.reason == "appNotRegistered")
        #expect(upstream.upstream.requests.map(\.path) == ["/onside/api/v1/apps/demo/products"])
    }

    @Test func anUnknownIDThatIsInNeitherListIsInvalidAndOrderIsTheCallers() async throws {
        try await UpstreamScenario.run { upstream, gateway in
            let answer = try await gateway.fetchProducts(["zzz_unknown", "coins_100", "sticker_pack_cats", "premium_monthly", "coins_100"])
            #expect(answer.productIDs == ["coins_100", "premium_monthly"])
            #expect(answer.invalidIDs == ["zzz_unknown", "sticker_pack_cats"])
            // Duplicates are asked for once.
            #expect(upstream.upstream.requests.first?.identifiers == ["zzz_unknown", "coins_100", "sticker_pack_cats", "premium_monthly"])
        }
    }
}
