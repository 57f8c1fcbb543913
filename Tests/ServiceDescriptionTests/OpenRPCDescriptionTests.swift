import JSONRPC
import ServiceDescription
import Testing

/// The OpenRPC document made from `openapi/openapi.yaml`: what the contract
/// asks of `rpc.discover` (`products.fetch` with its params, result and
/// every error of the error table, and `rpc.discover` itself), taken from
/// the OpenAPI description and nowhere else, valid against the OpenRPC
/// meta-schema.
@Suite struct OpenRPCDescriptionTests {
    @Test func describesBothMethods() throws {
        let document = try Fixtures.openRPC()
        #expect(document["openrpc"] == "1.3.2")
        #expect(document["methods"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["products.fetch", "rpc.discover"])
        #expect(document.objectValue?.keys == ["openrpc", "info", "servers", "methods", "components"])
    }

    @Test func infoAndServersAreTheOpenAPIOnes() throws {
        let document = try Fixtures.openRPC()
        #expect(document["info"] == [
            "title": "Onside products gateway",
            "description": "JSON-RPC 2.0 gateway in front of the Onside products backend.",
            "version": "0.1.0",
            "license": ["name": "Proprietary"],
        ])
        #expect(document["servers"] == [
            ["url": "http://localhost:8080/rpc", "description": "A local gateway (the container listens on 0.0.0.0:8080)."],
        ])
    }

    @Test func productsFetchHasTheContractsParamsByName() throws {
        let method = try #require(try Fixtures.openRPC()["methods"]?[0])
        #expect(method["summary"] == "Fetch Onside in-app product details for a region.")
        #expect(method["paramStructure"] == "by-name")
        let params = try #require(method["params"]?.arrayValue)
        #expect(params.map { $0["name"] } == ["productIdentifiers", "countryCode", "defaultCountryCodeAssumption", "language"])
        #expect(params.map { $0["required"] } == [true, false, false, false])
        #expect(params[0]["schema"] == [
            "type": "array", "minItems": 1, "maxItems": 100,
            "items": ["$ref": "#/components/schemas/ProductIdentifier"],
        ])
        #expect(params[1]["schema"] == ["$ref": "#/components/schemas/CountryCodeParam"])
        #expect(params[1]["description"] == "Explicit region; wins over everything else (source `explicit`).")
        #expect(params[2]["schema"] == ["$ref": "#/components/schemas/CountryCodeParam"])
        #expect(params[3]["schema"] == ["$ref": "#/components/schemas/LanguageTag"])
        // A param without a description of its own takes its schema's.
        #expect(params[3]["description"]?.stringValue?.hasPrefix("A BCP 47 language tag (`de`, `de-DE`, `pt-BR`, `zh-Hant-TW`)") == true)
        #expect(method["result"]?["name"] == "ProductsFetchResult")
        #expect(method["result"]?["schema"] == ["$ref": "#/components/schemas/ProductsFetchResult"])
    }

    /// The contract's error table, with `-32602` (also for
    /// `regionUnresolved`) and `-32603`.
    @Test func productsFetchHasEveryErrorOfTheTable() throws {
        let method = try #require(try Fixtures.openRPC()["methods"]?[0])
        #expect(method["errors"] == [
            ["code": -32602, "message": "Invalid params"],
            ["code": -32602, "message": "Invalid params", "data": ["reason": "regionUnresolved"]],
            ["code": -32603, "message": "Internal error"],
            ["code": -32001, "message": "The upstream could not be reached", "data": ["reason": "connectionError", "retryable": true]],
            ["code": -32002, "message": "The upstream is unavailable", "data": ["reason": "serviceUnavailable", "retryable": true]],
            ["code": -32003, "message": "The app is not registered with Onside", "data": ["reason": "appNotRegistered", "retryable": false]],
            ["code": -32004, "message": "The products service rejected the request", "data": ["reason": "invalidProductIdentifier", "retryable": false]],
            ["code": -32005, "message": "The call was cancelled", "data": ["reason": "cancelled", "retryable": true]],
            ["code": -32006, "message": "The products service gave an answer the gateway cannot use", "data": ["reason": "internalError", "retryable": false]],
        ])
    }

    @Test func rpcDiscoverDescribesItself() throws {
        let method = try #require(try Fixtures.openRPC()["methods"]?[1])
        #expect(method["name"] == "rpc.discover")
        #expect(method["summary"] == "Describe this service as an OpenRPC 1.3 document.")
        #expect(method["params"] == [])
        #expect(method["paramStructure"] == nil)
        #expect(method["result"]?["name"] == "OpenRpcDocument")
        #expect(method["result"]?["schema"] == ["$ref": "#/components/schemas/OpenRpcDocument"])
        #expect(method["errors"] == [
            ["code": -32602, "message": "Invalid params"],
            ["code": -32603, "message": "Internal error"],
        ])
    }

    /// One source: the params and every schema are the OpenAPI
    /// description's own, and every reference resolves inside the document.
    @Test func schemasAreTheOpenAPIOnes() throws {
        let openAPI = try Fixtures.openAPI()
        let document = try Fixtures.openRPC()
        let openAPISchemas = try #require(openAPI["components"]?["schemas"]?.objectValue)
        let schemas = try #require(document["components"]?["schemas"]?.objectValue)
        #expect(Set(schemas.keys) == [
            "ProductIdentifier", "CountryCodeParam", "LanguageTag", "ProductsFetchResult", "Region", "Product",
            "Price", "PeriodUnit", "Period", "SubscriptionPeriod", "Offer",
            "OpenRpcDocument", "OpenRpcInfo", "OpenRpcServer", "OpenRpcMethod", "OpenRpcContentDescriptor",
            "OpenRpcError", "OpenRpcComponents",
        ])
        for (name, schema) in schemas {
            #expect(schema == openAPISchemas[name], "components.schemas.\(name)")
        }
        // In the description's order.
        #expect(schemas.keys == openAPISchemas.keys.filter { schemas[$0] != nil })

        let params = try #require(openAPISchemas["ProductsFetchParams"]?["properties"]?.objectValue)
        for param in try #require(document["methods"]?[0]?["params"]?.arrayValue) {
            let name = try #require(param["name"]?.stringValue)
            var expected = try #require(params[name]?.objectValue)
            expected["description"] = nil
            #expect(param["schema"] == .object(expected))
        }

        for reference in Self.references(in: document) {
            let name = reference.replacingOccurrences(of: "#/components/schemas/", with: "")
            #expect(reference.hasPrefix("#/components/schemas/") && schemas[name] != nil, "\(reference) does not resolve")
        }
    }

    @Test func validatesAgainstTheOpenRPCMetaSchema() throws {
        let validator = MetaSchemaValidator(root: try Fixtures.metaSchema())
        #expect(validator.violations(of: try Fixtures.openRPC()) == [])
    }

    /// The validator is not vacuous: it finds what a broken document lacks.
    @Test func metaSchemaCheckFindsViolations() throws {
        let validator = MetaSchemaValidator(root: try Fixtures.metaSchema())
        guard case .object(var document) = try Fixtures.openRPC() else { Issue.record("not an object"); return }
        document["openrpc"] = "2.0.0"
        document["extra"] = true
        document["methods"] = [["name": "m"], ["name": "n", "params": [], "errors": [["code": .number("1.5"), "message": "x"]]]]
        #expect(validator.violations(of: .object(document)) == [
            "/openrpc: 2.0.0 does not match ^1\\.[0-3]\\.[0-9]+$",
            "/methods/0: matches 0 of the oneOf members, not 1",
            "/methods/1: matches 0 of the oneOf members, not 1",
            ": extra is not allowed",
        ])
    }

    /// The server's methods and the documented ones must be the same.
    @Test func refusesMethodsTheDescriptionDoesNotHave() throws {
        let openAPI = try Fixtures.openAPI()
        #expect(throws: ServiceDescriptionError(#"the OpenAPI description documents the methods ["products.fetch", "rpc.discover"], the server has ["products.fetch", "products.list", "rpc.discover"]"#)) {
            try OpenRPCDescription.document(fromOpenAPI: openAPI, methods: [.init(name: "products.fetch"), .init(name: "rpc.discover"), .init(name: "products.list")])
        }
        #expect(throws: ServiceDescriptionError(#"the OpenAPI description documents the methods ["products.fetch", "rpc.discover"], the server has ["products.fetch"]"#)) {
            try OpenRPCDescription.document(fromOpenAPI: openAPI, methods: [.init(name: "products.fetch")])
        }
    }

    static func references(in value: JSONValue) -> [String] {
        switch value {
        case .object(let object):
            object.flatMap { key, member in key == "$ref" ? [member.stringValue ?? ""] : references(in: member) }
        case .array(let elements):
            elements.flatMap(references(in:))
        case .null, .bool, .number, .string, .encoded:
            []
        }
    }
}
