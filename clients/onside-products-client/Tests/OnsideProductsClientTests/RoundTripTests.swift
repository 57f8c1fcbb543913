import Foundation
import HTTPTypes
import OnsideProductsClient
import OpenAPIRuntime
import Testing

/// The client generated from `openapi/openapi.yaml` against a live gateway
/// on the embedded catalog: every documented example is sent or decoded,
/// and every answer decodes into the generated types with the exact values
/// the description documents.
@Suite struct RoundTripTests {
    typealias Body = Operations.Rpc.Input.Body.JsonPayload
    typealias Answer = Operations.Rpc.Output.Ok.Body.JsonPayload

    // MARK: - Every example is covered

    /// The examples answered live below, and those only decoded because the
    /// embedded catalog never produces them (upstream failures, a fault of
    /// the gateway). A new example fails this test until it is covered.
    static let liveRequests: Set<String> = ["explicitCountry", "defaultAssumption", "noRegion", "batch", "discover", "notification"]
    static let liveAnswers: Set<String> = [
        "success", "batch", "parseError", "invalidRequest", "emptyBatch", "batchTooLarge", "methodNotFound",
        "invalidParams", "regionUnresolved",
    ]
    static let decodedOnlyAnswers: [String: Int] = [
        "internalError": -32603, "connectionError": -32001, "serviceUnavailable": -32002, "appNotRegistered": -32003,
        "invalidProductIdentifier": -32004, "cancelled": -32005, "upstreamInternalError": -32006,
    ]

    @Test func everyExampleIsCovered() {
        #expect(Set(Examples.requests.keys) == Self.liveRequests)
        #expect(Set(Examples.responses(status: "200").keys) == Self.liveAnswers.union(Self.decodedOnlyAnswers.keys))
    }

    // MARK: - Examples decode, requests round-trip

    /// Each request example decodes into the generated request type and
    /// encodes back to the same JSON.
    @Test(arguments: Self.liveRequests.sorted())
    func requestExampleRoundTrips(name: String) throws {
        let example = try #require(Examples.requests[name])
        let decoded = try Examples.decode(Body.self, example)
        #expect(try Examples.plainJSON(decoded) == Examples.plainJSON(Examples.decode(AnyJSON.self, example)))
    }

    /// Upstream failures and gateway faults, which the embedded catalog never
    /// answers: their examples decode into the matching generated error.
    @Test(arguments: Self.decodedOnlyAnswers.keys.sorted())
    func errorExampleDecodes(name: String) throws {
        let answer = try Examples.decode(Answer.self, try #require(Examples.responses(status: "200")[name]))
        guard case .RpcResponse(.ErrorResponse(let response)) = answer else {
            Issue.record("\(name) did not decode as an error response: \(answer)")
            return
        }
        #expect(response.jsonrpc == ._2_0)
        let expectedCode = try #require(Self.decodedOnlyAnswers[name])
        switch response.error {
        case .StandardError(let error):
            #expect(error.code.rawValue == expectedCode)
            #expect(error.message == "Internal error: the call could not be completed")
        case .ConnectionError(let error):
            #expect(error.code.rawValue == expectedCode)
            #expect(error.data.reason == .connectionError && error.data.retryable && error.data.requestId == exampleRequestID)
        case .ServiceUnavailableError(let error):
            #expect(error.code.rawValue == expectedCode)
            #expect(error.data.reason == .serviceUnavailable && error.data.retryable)
            #expect(error.data.upstreamStatus == 503 && error.data.retryAfterSeconds == 5)
        case .AppNotRegisteredError(let error):
            #expect(error.code.rawValue == expectedCode)
            #expect(error.data.reason == .appNotRegistered && !error.data.retryable && error.data.upstreamStatus == 404)
        case .InvalidProductIdentifierError(let error):
            #expect(error.code.rawValue == expectedCode)
            #expect(error.data.reason == .invalidProductIdentifier && !error.data.retryable && error.data.upstreamStatus == 422)
        case .CancelledError(let error):
            #expect(error.code.rawValue == expectedCode)
            #expect(error.data.reason == .cancelled && error.data.retryable)
            #expect(error.message == "The call was cancelled: the gateway is shutting down")
        case .UpstreamInternalError(let error):
            #expect(error.code.rawValue == expectedCode)
            #expect(error.data.reason == .internalError && !error.data.retryable && error.data.upstreamStatus == 403)
        case .InvalidParamsError:
            Issue.record("\(name) decoded as invalid params")
        }
    }

    @Test func readinessExamplesDecode() throws {
        let starting = try Examples.decode(Components.Schemas.NotReady.self, try #require(Examples.responses("/readyz", "get", status: "503")["starting"]))
        let draining = try Examples.decode(Components.Schemas.NotReady.self, try #require(Examples.responses("/readyz", "get", status: "503")["draining"]))
        #expect(starting.status == .starting)
        #expect(draining.status == .draining)
    }

    // MARK: - Live answers equal to the documented ones

    /// Sent as documented (with the examples' request id), the gateway
    /// answers exactly the documented answer.
    @Test(arguments: [("explicitCountry", "success"), ("noRegion", "regionUnresolved"), ("batch", "batch")])
    func documentedRequestGetsTheDocumentedAnswer(request: String, answer: String) async throws {
        let body = try Examples.decode(Body.self, try #require(Examples.requests[request]))
        let expected = try Examples.decode(Answer.self, try #require(Examples.responses(status: "200")[answer]))
        let output = try await Live.client().rpc(headers: .init(xRequestId: exampleRequestID), body: .json(body))
        let ok = try output.ok
        #expect(ok.headers.xRequestId == exampleRequestID)
        #expect(try ok.body.json == expected)
    }

    /// The success in detail: partial success, nulls, subscription, offer,
    /// exact prices and a number id.
    @Test func successHasTheContractValues() async throws {
        let body = try Examples.decode(Body.self, try #require(Examples.requests["explicitCountry"]))
        guard case .RpcResponse(.ProductsFetchSuccess(let success)) = try await Live.client().rpc(body: .json(body)).ok.body.json else {
            Issue.record("not a products.fetch success")
            return
        }
        #expect(success.id == .NumberId(1))
        let product = try #require(success.result.products.first)
        #expect(success.result.products.count == 1)
        #expect(product.productIdentifier == "premium_monthly")
        #expect(product.localizedTitle == "Premium")
        #expect(product.localizedDescription == "All features, billed monthly")
        #expect(product.iconUrl == "https://cdn.example.com/premium.png")
        #expect(product.price == .init(value: 4.99, currencyCode: "EUR"))
        #expect(product.subscriptionPeriod == .init(unit: .month, numberOfUnits: 1))
        #expect(product.subscriptionGroupIdentifier == "premium")
        #expect(product.introductoryPrice == .init(price: .init(value: 0.00, currencyCode: "EUR"), period: .init(unit: .week, numberOfUnits: 1)))
        #expect(product.discountedPrice == nil)
        #expect(success.result.invalidProductIdentifiers == ["retired_pack"])
        #expect(success.result.region == .init(countryCode: "DE", source: .explicit))
    }

    /// A string id, the region from the caller's assumption, German texts,
    /// and a one-time product whose optional parts are all `null`.
    @Test func stringIdAssumedRegionAndLanguage() async throws {
        var body = try Examples.decode(Body.self, try #require(Examples.requests["defaultAssumption"]))
        guard case .RpcRequest(.ProductsFetchRequest(var call)) = body else {
            Issue.record("the example is not a products.fetch request")
            return
        }
        call.params.productIdentifiers.append("coins_1200")
        body = .RpcRequest(.ProductsFetchRequest(call))
        guard case .RpcResponse(.ProductsFetchSuccess(let success)) = try await Live.client().rpc(body: .json(body)).ok.body.json else {
            Issue.record("not a products.fetch success")
            return
        }
        #expect(success.id == .StringId("req-2"))
        #expect(success.result.region == .init(countryCode: "DE", source: .defaultAssumption))
        #expect(success.result.products.map(\.localizedTitle) == ["Premium", "1200 Münzen"])
        #expect(success.result.products.map(\.localizedDescription) == ["Alle Funktionen, monatlich abgerechnet", "Eine Truhe Münzen, 20 % extra"])
        let coins = try #require(success.result.products.last)
        #expect(coins.price == .init(value: 9.99, currencyCode: "EUR"))
        #expect(coins.subscriptionPeriod == nil && coins.subscriptionGroupIdentifier == nil)
        #expect(coins.introductoryPrice == nil && coins.discountedPrice == nil)
        #expect(success.result.invalidProductIdentifiers == [])
    }

    /// Ids come back as sent: a string that looks like a number stays a
    /// string, a fraction stays a number.
    @Test(arguments: [Components.Schemas.JsonRpcId.StringId("1"), .NumberId(1), .NumberId(1.5)])
    func idsComeBackAsSent(id: Components.Schemas.JsonRpcId) async throws {
        let call = Components.Schemas.ProductsFetchRequest(
            jsonrpc: ._2_0, method: .products_fetch,
            params: .init(productIdentifiers: ["coins_100"], countryCode: "de"), id: id
        )
        guard case .RpcResponse(.ProductsFetchSuccess(let success)) = try await Live.client().rpc(body: .json(.RpcRequest(.ProductsFetchRequest(call)))).ok.body.json else {
            Issue.record("not a products.fetch success")
            return
        }
        #expect(success.id == id)
        #expect(success.result.products.map(\.productIdentifier) == ["coins_100"])
    }

    @Test func notificationAnswersNoContent() async throws {
        let body = try Examples.decode(Body.self, try #require(Examples.requests["notification"]))
        let output = try await Live.client().rpc(headers: .init(xRequestId: "client-notification"), body: .json(body))
        #expect(try output.noContent.headers.xRequestId == "client-notification")
    }

    @Test func discoverAnswersTheOpenRPCDocument() async throws {
        let body = try Examples.decode(Body.self, try #require(Examples.requests["discover"]))
        guard case .RpcResponse(.RpcDiscoverSuccess(let success)) = try await Live.client().rpc(body: .json(body)).ok.body.json else {
            Issue.record("not an rpc.discover success")
            return
        }
        #expect(success.id == .NumberId(13))
        let document = success.result
        #expect(document.openrpc == "1.3.2")
        #expect(document.info.title == "Onside products gateway")
        #expect(document.info.version == "0.1.0")
        #expect(document.methods.map(\.name) == ["products.fetch", "rpc.discover"])
        let fetch = document.methods[0]
        #expect(fetch.paramStructure == .byName)
        #expect(fetch.params.map(\.name) == ["productIdentifiers", "countryCode", "defaultCountryCodeAssumption", "language"])
        #expect(fetch.params.map(\.required) == [true, false, false, false])
        #expect(fetch.result?.name == "ProductsFetchResult")
        #expect(fetch.errors?.map(\.code) == [-32602, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006])
        #expect(document.methods[1].params.isEmpty)
        #expect(document.methods[1].result?.name == "OpenRpcDocument")
        #expect(document.components?.schemas?.value["Offer"] != nil)
    }

    // MARK: - JSON-RPC errors the embedded gateway answers

    /// Answers to bodies the generated types cannot express are reached by
    /// rewriting the request; they still decode through the generated types.
    @Test(arguments: [
        ("parseError", #"{"jsonrpc":"2.0","method":"products.fetch""#),
        ("invalidRequest", #"{"jsonrpc":"1.0","method":"products.fetch","id":null}"#),
        ("methodNotFound", #"{"jsonrpc":"2.0","method":"products.list","params":{"productIdentifiers":["premium_monthly"]},"id":4}"#),
    ])
    func brokenBodyGetsTheDocumentedError(answer: String, body: String) async throws {
        let expected = try Examples.decode(Answer.self, try #require(Examples.responses(status: "200")[answer]))
        let anyBody = try Examples.decode(Body.self, try #require(Examples.requests["explicitCountry"]))
        let output = try await Live.client(RequestRewrite(body: body)).rpc(body: .json(anyBody))
        #expect(try output.ok.body.json == expected)
    }

    @Test func emptyBatchIsOneError() async throws {
        let expected = try Examples.decode(Answer.self, try #require(Examples.responses(status: "200")["emptyBatch"]))
        #expect(try await Live.client().rpc(body: .json(.RpcBatchRequest([]))).ok.body.json == expected)
    }

    @Test func batchOverTheLimitIsOneError() async throws {
        let expected = try Examples.decode(Answer.self, try #require(Examples.responses(status: "200")["batchTooLarge"]))
        guard case .RpcRequest(let call) = try Examples.decode(Body.self, try #require(Examples.requests["explicitCountry"])) else {
            Issue.record("the example is not a single request")
            return
        }
        let output = try await Live.client().rpc(body: .json(.RpcBatchRequest(Array(repeating: call, count: 51))))
        #expect(try output.ok.body.json == expected)
    }

    @Test func unassignedCountryIsTheDocumentedInvalidParams() async throws {
        let expected = try Examples.decode(Answer.self, try #require(Examples.responses(status: "200")["invalidParams"]))
        let call = Components.Schemas.ProductsFetchRequest(
            jsonrpc: ._2_0, method: .products_fetch,
            params: .init(productIdentifiers: ["premium_monthly"], countryCode: "XX"), id: .NumberId(5)
        )
        let output = try await Live.client().rpc(headers: .init(xRequestId: exampleRequestID), body: .json(.RpcRequest(.ProductsFetchRequest(call))))
        #expect(try output.ok.body.json == expected)
        guard case .RpcResponse(.ErrorResponse(let response)) = try output.ok.body.json, case .InvalidParamsError(let error) = response.error else {
            Issue.record("not an invalid params error")
            return
        }
        #expect(error.data?.param == "countryCode")
        #expect(error.data?.reason == nil)
    }

    // MARK: - HTTP errors

    @Test func missingAPIKeyIsTheDocumented401() async throws {
        let expected = try Examples.decode(Components.Schemas.HttpError.self, Examples.response(status: "401"))
        let body = try Examples.decode(Body.self, try #require(Examples.requests["explicitCountry"]))
        let output = try await Live.client(url: Live.keyedGatewayURL()).rpc(body: .json(body))
        let refused = try output.unauthorized
        #expect(try refused.body.json == expected)
        #expect(refused.headers.wwwAuthenticate == #"Bearer realm="products-gateway""#)

        // With the key the same call succeeds.
        let keyed = RequestRewrite(headers: [(.authorization, "Bearer \(try Live.setting("GATEWAY_API_KEY"))")])
        guard case .RpcResponse(.ProductsFetchSuccess) = try await Live.client(keyed, url: Live.keyedGatewayURL()).rpc(body: .json(body)).ok.body.json else {
            Issue.record("the call with the key did not succeed")
            return
        }
    }

    @Test func getIsTheDocumented405() async throws {
        let expected = try Examples.decode(Components.Schemas.HttpError.self, Examples.response(status: "405"))
        let body = try Examples.decode(Body.self, try #require(Examples.requests["explicitCountry"]))
        let refused = try await Live.client(RequestRewrite(method: .get)).rpc(body: .json(body)).methodNotAllowed
        #expect(try refused.body.json == expected)
        #expect(refused.headers.allow == .post)
    }

    @Test func oversizedBodyIsTheDocumented413() async throws {
        let expected = try Examples.decode(Components.Schemas.HttpError.self, Examples.response(status: "413"))
        // Over 65536 bytes, under twice that: the gateway's own JSON 413.
        let identifiers = (0..<3000).map { "product_identifier_\($0)" }
        let call = Components.Schemas.ProductsFetchRequest(
            jsonrpc: ._2_0, method: .products_fetch, params: .init(productIdentifiers: identifiers, countryCode: "DE"), id: .NumberId(1)
        )
        let refused = try await Live.client().rpc(headers: .init(xRequestId: "client-413"), body: .json(.RpcRequest(.ProductsFetchRequest(call)))).contentTooLarge
        #expect(try refused.body.json == expected)
        #expect(refused.headers.xRequestId == "client-413")
    }

    @Test func textBodyIsTheDocumented415() async throws {
        let expected = try Examples.decode(Components.Schemas.HttpError.self, Examples.response(status: "415"))
        let body = try Examples.decode(Body.self, try #require(Examples.requests["explicitCountry"]))
        let refused = try await Live.client(RequestRewrite(contentType: "text/plain")).rpc(body: .json(body)).unsupportedMediaType
        #expect(try refused.body.json == expected)
    }

    // MARK: - Operations endpoints

    @Test func healthAndReadiness() async throws {
        let client = try Live.client()
        let health = try await client.healthz().ok.body.json
        #expect(health == (try Examples.decode(Components.Schemas.Health.self, Examples.response("/healthz", "get", status: "200"))))
        #expect(health.status == .ok)
        let ready = try await client.readyz().ok.body.json
        #expect(ready == (try Examples.decode(Components.Schemas.Ready.self, Examples.response("/readyz", "get", status: "200"))))
        #expect(ready.status == .ready)
    }

    @Test func metricsCountTheCalls() async throws {
        let client = try Live.client()
        let body = try Examples.decode(Body.self, try #require(Examples.requests["explicitCountry"]))
        _ = try await client.rpc(body: .json(body)).ok
        let text = try await String(collecting: try client.metrics().ok.body.plainText, upTo: 4 << 20)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(#"gateway_rpc_requests_total{method="products.fetch",outcome="ok"} "#) })
        #expect((Int(line.split(separator: " ").last ?? "") ?? 0) >= 1)
        #expect(text.contains("# TYPE gateway_rpc_requests_total counter"))
    }

    @Test func openAPIDocumentIsTheFile() async throws {
        let served = try await Data(collecting: try Live.client().openapi().ok.body.yaml, upTo: 4 << 20)
        let file = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/OnsideProductsClient/openapi.yaml")
        #expect(served == (try Data(contentsOf: file)))
    }
}

/// Any JSON value, for reading an example back as plain JSON.
struct AnyJSON: Codable {
    let value: OpenAPIValueContainer

    init(from decoder: any Decoder) throws { value = try OpenAPIValueContainer(from: decoder) }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}
