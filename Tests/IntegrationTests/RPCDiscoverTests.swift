import JSONRPC
import ServiceDescription
import Testing

/// `rpc.discover` through the real HTTP server (contract section "Method
/// rpc.discover"): no params, the OpenRPC document as the result, made from
/// the very OpenAPI description the same gateway serves.
@Suite struct RPCDiscoverTests {
    static let discover = #"{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}"#

    @Test func answersTheOpenRPCDocumentOfTheServedOpenAPIDescription() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(Self.discover, headers: [("X-Request-Id", "discover-1")])
        let served = try await TestHTTP.get(port: gateway.port, path: "/openapi.yaml")
        await gateway.stop()

        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.header("X-Request-Id") == "discover-1")
        let body = try parseJSON(response.body)
        #expect(body.objectValue?.keys == ["jsonrpc", "result", "id"])
        #expect(body["jsonrpc"] == "2.0")
        #expect(body["id"] == 1)

        let result = try #require(body["result"])
        let expected = try OpenRPCDescription.document(
            fromOpenAPI: YAMLDocument.jsonValue(ofYAML: served.bodyText),
            methods: [.init(name: "products.fetch"), .init(name: "rpc.discover", errors: .plain([-32602, -32603]))]
        )
        #expect(result == expected)

        // What the contract names, spelled out.
        #expect(result["openrpc"] == "1.3.2")
        #expect(result["info"]?["title"] == "Onside products gateway")
        let methods = try #require(result["methods"]?.arrayValue)
        #expect(methods.map { $0["name"] } == ["products.fetch", "rpc.discover"])
        #expect(methods[0]["params"]?.arrayValue?.map { $0["name"] } == ["productIdentifiers", "countryCode", "defaultCountryCodeAssumption", "language"])
        #expect(methods[0]["params"]?.arrayValue?.map { $0["required"] } == [true, false, false, false])
        #expect(methods[0]["result"]?["schema"] == ["$ref": "#/components/schemas/ProductsFetchResult"])
        #expect(methods[0]["errors"]?.arrayValue?.map { $0["code"] } == [-32602, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006])
        #expect(methods[0]["errors"]?.arrayValue?.compactMap { $0["data"]?["reason"] } == [
            "regionUnresolved", "connectionError", "serviceUnavailable", "appNotRegistered", "invalidProductIdentifier", "cancelled", "internalError",
        ])
        #expect(methods[0]["errors"]?.arrayValue?.compactMap { $0["data"]?["retryable"] } == [true, true, false, false, true, false])
        #expect(methods[1]["params"] == [])
        #expect(methods[1]["result"]?["schema"] == ["$ref": "#/components/schemas/OpenRpcDocument"])
        #expect(result["components"]?["schemas"]?["Offer"]?["type"] == ["object", "null"])
    }

    /// `[]` and `{}` say "no params" as well as leaving `params` out.
    @Test(arguments: ["[]", "{}"])
    func emptyParamsAreNoParams(params: String) async throws {
        let gateway = try RunningGateway.start()
        let plain = try await gateway.rpc(Self.discover)
        let empty = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"rpc.discover","params":\#(params)}"#)
        await gateway.stop()
        #expect(empty.status == 200)
        #expect(empty.bodyText == plain.bodyText)
        #expect(try parseJSON(empty.body)["result"]?["openrpc"] == "1.3.2")
    }

    @Test(arguments: [#"{"verbose":true}"#, #"["all"]"#])
    func otherParamsAreInvalidParams(params: String) async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(
            #"{"jsonrpc":"2.0","id":"d-7","method":"rpc.discover","params":\#(params)}"#,
            headers: [("X-Request-Id", "discover-params")]
        )
        await gateway.stop()
        #expect(response.status == 200)
        #expect(response.bodyText == #"{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: rpc.discover takes no params","data":{"param":"params","requestId":"discover-params"}},"id":"d-7"}"#)
    }

    @Test func runsInABatchBesideProductsFetch() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"""
            [{"jsonrpc":"2.0","id":"d","method":"rpc.discover"},
             {"jsonrpc":"2.0","id":2,"method":"products.fetch","params":{"productIdentifiers":["coins_100"],"countryCode":"DE"}},
             {"jsonrpc":"2.0","method":"rpc.discover"}]
            """#)
        await gateway.stop()
        let answers = try #require(try parseJSON(response.body).arrayValue)
        #expect(answers.map { $0["id"] } == ["d", 2])
        #expect(answers[0]["result"]?["methods"]?[1]?["name"] == "rpc.discover")
        #expect(answers[1]["result"]?["products"]?[0]?["productIdentifier"] == "coins_100")
    }

    @Test func aNotificationAnswers204() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","method":"rpc.discover"}"#)
        await gateway.stop()
        #expect(response.status == 204)
        #expect(response.body.isEmpty)
    }

    /// Method names match exactly: near misses are unknown methods.
    @Test(arguments: ["rpc.discovery", "RPC.DISCOVER", "rpc.discover "])
    func nearMissesAreMethodNotFound(method: String) async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":3,"method":"\#(method)"}"#)
        await gateway.stop()
        #expect(response.bodyText == #"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: \#(method)"},"id":3}"#)
    }
}
