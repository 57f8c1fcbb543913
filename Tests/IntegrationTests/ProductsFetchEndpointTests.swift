import Testing

/// `products.fetch` and the JSON-RPC rules through the real HTTP server, on
/// the embedded catalog.
@Suite struct ProductsFetchEndpointTests {
    /// The contract's example, byte for byte (key order, nulls, price digits).
    @Test func answersTheDocumentedShape() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["premium_monthly","retired_pack"],"countryCode":"DE"}}"#)
        await gateway.stop()
        #expect(response.status == 200)
        #expect(response.bodyText == #"{"jsonrpc":"2.0","result":{"products":[{"productIdentifier":"premium_monthly","localizedTitle":"Premium","localizedDescription":"All features, billed monthly","iconUrl":"https://cdn.example.com/premium.png","price":{"value":4.99,"currencyCode":"EUR"},"subscriptionPeriod":{"unit":"month","numberOfUnits":1},"subscriptionGroupIdentifier":"premium","introductoryPrice":{"price":{"value":0.00,"currencyCode":"EUR"},"period":{"unit":"week","numberOfUnits":1}},"discountedPrice":null}],"invalidProductIdentifiers":["retired_pack"],"region":{"countryCode":"DE","source":"explicit"}},"id":1}"#)
    }

    @Test func keepsCatalogDigitsAndLocalizes() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":"j","method":"products.fetch","params":{"productIdentifiers":["coins_1200","boost_7days"],"countryCode":"jp","language":"de-DE"}}"#)
        await gateway.stop()
        let result = try #require(try parseJSON(response.body)["result"])
        #expect(result["products"]?[0]?["price"] == ["value": .number("1200"), "currencyCode": "JPY"])
        #expect(result["products"]?[0]?["localizedTitle"] == "1200 Münzen")
        #expect(result["products"]?[0]?["subscriptionPeriod"] == .null)
        #expect(result["products"]?[1]?["subscriptionPeriod"] == ["unit": "day", "numberOfUnits": 7])
        #expect(result["region"] == ["countryCode": "JP", "source": "explicit"])
    }

    @Test func deduplicatesKeepingRequestOrder() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["coins_100","zz_unknown","premium_monthly","coins_100","aa_unknown","zz_unknown"],"countryCode":"DE"}}"#)
        await gateway.stop()
        let result = try #require(try parseJSON(response.body)["result"])
        let ids = result["products"]?.arrayValue?.compactMap { $0["productIdentifier"]?.stringValue }
        #expect(ids == ["coins_100", "premium_monthly"])
        #expect(result["invalidProductIdentifiers"] == ["zz_unknown", "aa_unknown"])
    }

    @Test func regionComesFromTheAssumptionThenTheConfiguredDefault() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_DEFAULT_COUNTRY": "FR"])
        let assumed = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["coins_100"],"defaultCountryCodeAssumption":"gb"}}"#)
        let configured = try await gateway.rpc(#"{"jsonrpc":"2.0","id":2,"method":"products.fetch","params":{"productIdentifiers":["coins_100"]}}"#)
        let explicit = try await gateway.rpc(#"{"jsonrpc":"2.0","id":3,"method":"products.fetch","params":{"productIdentifiers":["coins_100"],"countryCode":"US","defaultCountryCodeAssumption":"GB"}}"#)
        await gateway.stop()
        #expect(try parseJSON(assumed.body)["result"]?["region"] == ["countryCode": "GB", "source": "defaultAssumption"])
        #expect(try parseJSON(configured.body)["result"]?["region"] == ["countryCode": "FR", "source": "defaultAssumption"])
        #expect(try parseJSON(explicit.body)["result"]?["region"] == ["countryCode": "US", "source": "explicit"])
    }

    @Test func regionFallsBackToTheSystemLocale() async throws {
        let gateway = try RunningGateway.start(["LANG": "de_CH.UTF-8"])
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["coins_100"]}}"#)
        await gateway.stop()
        #expect(try parseJSON(response.body)["result"]?["region"] == ["countryCode": "CH", "source": "systemLocale"])
    }

    @Test func unresolvedRegionIsInvalidParamsWithReason() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["coins_100"]}}"#)
        await gateway.stop()
        let error = try #require(try parseJSON(response.body)["error"])
        #expect(error["code"] == -32602)
        #expect(error["data"]?["reason"] == "regionUnresolved")
        #expect(error["message"]?.stringValue?.contains("countryCode") == true)
    }

    @Test(arguments: [
        (#"{"productIdentifiers":["a"],"countryCode":"XX"}"#, "countryCode"),
        (#"{"productIdentifiers":["a"],"defaultCountryCodeAssumption":"DEU"}"#, "defaultCountryCodeAssumption"),
        (#"{"productIdentifiers":["a b"],"countryCode":"DE"}"#, "productIdentifiers"),
        (#"{"productIdentifiers":[],"countryCode":"DE"}"#, "productIdentifiers"),
        (#"{"productIdentifiers":"coins_100","countryCode":"DE"}"#, "productIdentifiers"),
        (#"{"countryCode":"DE"}"#, "productIdentifiers"),
        (#"{"productIdentifiers":["a"],"country":"DE"}"#, "country"),
        (#"{"productIdentifiers":["a"],"countryCode":"DE","language":"not a tag"}"#, "language"),
    ])
    func badParamsNameTheParam(params: String, param: String) async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":9,"method":"products.fetch","params":\#(params)}"#)
        await gateway.stop()
        let body = try parseJSON(response.body)
        #expect(response.status == 200)
        #expect(body["id"] == 9)
        #expect(body["error"]?["code"] == -32602)
        #expect(body["error"]?["message"]?.stringValue?.contains(param) == true)
    }

    @Test func positionalParamsAreRefused() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":[["coins_100"],"DE"]}"#)
        await gateway.stop()
        #expect(try parseJSON(response.body)["error"]?["code"] == -32602)
    }

    @Test func tooManyIdentifiersAfterDeduplicationIsInvalidParams() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_MAX_IDS": "3"])
        let ok = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["a","b","c","a","b"],"countryCode":"DE"}}"#)
        let tooMany = try await gateway.rpc(#"{"jsonrpc":"2.0","id":2,"method":"products.fetch","params":{"productIdentifiers":["a","b","c","d"],"countryCode":"DE"}}"#)
        await gateway.stop()
        #expect(try parseJSON(ok.body)["result"]?["invalidProductIdentifiers"] == ["a", "b", "c"])
        #expect(try parseJSON(tooMany.body)["error"]?["code"] == -32602)
        #expect(tooMany.bodyText.contains("3"))
    }

    @Test(arguments: ["1", #""1""#, "1.5", "-0", "12345678901234567890", "null", "1e400", #""café-id""#])
    func idIsEchoedAsTheSameJSONText(id: String) async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":\#(id),"method":"nope"}"#)
        await gateway.stop()
        #expect(response.bodyText.hasSuffix(#","id":\#(id)}"#))
    }

    @Test func notificationAnswers204WithNoBody() async throws {
        let gateway = try RunningGateway.start()
        let single = try await gateway.rpc(#"{"jsonrpc":"2.0","method":"products.fetch","params":{"productIdentifiers":["coins_100"],"countryCode":"DE"}}"#)
        let batch = try await gateway.rpc(#"[{"jsonrpc":"2.0","method":"products.fetch"},{"jsonrpc":"2.0","method":"nope"}]"#)
        await gateway.stop()
        #expect(single.status == 204)
        #expect(single.body.isEmpty)
        #expect(batch.status == 204)
        #expect(batch.body.isEmpty)
        #expect(single.header("X-Request-Id") != nil)
    }

    @Test func malformedJSONIsParseErrorWithNullId() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","method":"products.fetch","params":"bar","baz]"#)
        await gateway.stop()
        let body = try parseJSON(response.body)
        #expect(response.status == 200)
        #expect(body["error"]?["code"] == -32700)
        #expect(body["id"] == .null)
    }

    @Test func invalidRequestKeepsAReadableId() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"{"jsonrpc":"1.0","id":"keep-me","method":"products.fetch"}"#)
        await gateway.stop()
        let body = try parseJSON(response.body)
        #expect(body["error"]?["code"] == -32600)
        #expect(body["id"] == "keep-me")
    }

    @Test func emptyBatchIsOneInvalidRequestObject() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc("[]")
        await gateway.stop()
        let body = try parseJSON(response.body)
        #expect(body.objectValue != nil)
        #expect(body["error"]?["code"] == -32600)
        #expect(body["id"] == .null)
    }

    @Test func batchJudgesEachElementAndSkipsNotifications() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(#"""
        [
          {"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["coins_100"],"countryCode":"DE"}},
          {"jsonrpc":"2.0","method":"products.fetch","params":{"productIdentifiers":["coins_100"],"countryCode":"DE"}},
          {"foo":"boo"},
          {"jsonrpc":"2.0","id":"2","method":"nope"},
          7,
          {"jsonrpc":"2.0","id":3,"method":"products.fetch","params":{"productIdentifiers":["coins_100"],"countryCode":"ZZ"}}
        ]
        """#)
        await gateway.stop()
        let answers = try #require(try parseJSON(response.body).arrayValue)
        #expect(answers.count == 5)
        #expect(answers[0]["id"] == 1 && answers[0]["result"]?["products"]?[0]?["productIdentifier"] == "coins_100")
        #expect(answers[1]["id"] == .null && answers[1]["error"]?["code"] == -32600)
        #expect(answers[2]["id"] == "2" && answers[2]["error"]?["code"] == -32601)
        #expect(answers[3]["id"] == .null && answers[3]["error"]?["code"] == -32600)
        #expect(answers[4]["id"] == 3 && answers[4]["error"]?["code"] == -32602)
    }

    @Test func batchOverTheLimitIsOneErrorGivingTheLimit() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_MAX_BATCH": "2"])
        let element = #"{"jsonrpc":"2.0","id":1,"method":"nope"}"#
        let response = try await gateway.rpc("[\(element),\(element),\(element)]")
        await gateway.stop()
        let body = try parseJSON(response.body)
        #expect(body["error"]?["code"] == -32600)
        #expect(body["error"]?["message"] == "Invalid request: batch of 3 requests exceeds the limit of 2")
    }
}
