import Foundation
import Testing

/// One product is at most 64 KiB wherever it comes from (contract,
/// `GATEWAY_MAX_ANSWER_BYTES`'s row): a larger one from the upstream leaves
/// its identifier unknown; a shared-tier entry holding one is refused as
/// damaged, counted, and the identifier fetched as on a miss.
@Suite(.serialized) struct ProductSizeTests {
    /// A `200` the upstream could send: `coins_100` as usual, and
    /// `premium_monthly` with a title of 70,000 characters.
    static func answerWithAHugeProduct() -> String {
        let title = String(repeating: "a", count: 70_000)
        let body = #"{"country":"DE","items":[{"id":"coins_100","title":"100 Coins","description":"A handful of coins","price":{"amount":"0.99","currency":"EUR"}},"#
            + #"{"id":"premium_monthly","title":"\#(title)","description":"All features","price":{"amount":"4.99","currency":"EUR"}}],"not_found":[]}"#
        return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    /// The real process: the upstream's product over 64 KiB is left out,
    /// and its identifier answered as invalid; the other is served.
    @Test func anUpstreamProductOver64KiBLeavesItsIdentifierUnknown() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment())
        upstream.upstream.setStandingFault(.rawResponse(Array(Self.answerWithAHugeProduct().utf8)))
        let answer = try FetchAnswer(try await gateway.rpc(UpstreamScenario.request(["premium_monthly", "coins_100"])))
        #expect(answer.http.status == 200)
        #expect(answer.productIDs == ["coins_100"])
        #expect(answer.invalidIDs == ["premium_monthly"])
        #expect(answer.http.body.count < 2048)
        #expect(upstream.upstream.requests.count == 1)
    }

    /// An entry someone wrote into Redis, well-formed, whose product is
    /// over 64 KiB: not served; counted in
    /// `gateway_shared_cache_errors_total`; the upstream answers instead.
    @Test func aSharedEntryWhoseProductIsOver64KiBIsAMissAndCounted() async throws {
        try await SharedTierScenario.run(replicas: 1, environment: ["GATEWAY_CACHE_MAX_TTL_S": "60"]) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            let gateway = gateways[0]
            let product = #"{"productIdentifier":"premium_monthly","localizedTitle":""# + String(repeating: "a", count: 70_000) + #""}"#
            let freshUntil = Int64(Date().timeIntervalSince1970 * 1000) + 30_000
            try redis.cli(
                "EVAL",
                "local t = tonumber(ARGV[1]) local b = {} for i = 8, 1, -1 do b[i] = t % 256 t = math.floor(t / 256) end "
                    + "redis.call('SET', KEYS[1], 'OGW1' .. string.char(unpack(b)) .. string.char(0,0,0,0, 0,0,0,0) .. 'P' .. ARGV[2], 'PX', 30000) return 1",
                "1", "test-gw:v1:p:demo:DE:-:premium_monthly", "\(freshUntil)", product
            )
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.productIDs == ["premium_monthly"])
            #expect(answer.result?["products"]?[0]?["localizedTitle"]?.stringValue == "Premium")
            #expect(upstream.upstream.requests.count == 1)
            #expect(try await gateway.metricValue("gateway_shared_cache_hits_total") == 0)
            #expect(try await gateway.metricValue("gateway_shared_cache_errors_total") == 1)
        }
    }
}

/// `GATEWAY_MAX_ANSWER_BYTES`: the largest answer to one request, on the
/// real process (embedded catalog). An answer over it is replaced by one
/// `-32600` error object that gives the limit: with the call's id for a
/// single call, `null` for a batch; one within it is answered as usual.
@Suite struct AnswerLimitTests {
    /// A call asking for `count` unknown identifiers of 128 characters:
    /// each comes back in `invalidProductIdentifiers`, 131 bytes apiece.
    static func call(_ count: Int, id: Int, prefix: String) -> String {
        let ids = (0..<count).map { "\"\(prefix)\(String(format: "%06d", $0))\(String(repeating: "x", count: 128 - prefix.count - 6))\"" }
        return #"{"jsonrpc":"2.0","id":\#(id),"method":"products.fetch","params":{"productIdentifiers":[\#(ids.joined(separator: ","))],"countryCode":"DE"}}"#
    }

    @Test func anAnswerOverTheLimitIsOneErrorThatGivesIt() async throws {
        let gateway = try await GatewayProcess.start([
            "GATEWAY_MAX_ANSWER_BYTES": "262144", "GATEWAY_MAX_IDS": "5000", "GATEWAY_MAX_BODY_BYTES": "2000000",
        ])
        // 1,000 identifiers: about 131 kB, within the limit.
        let within = try FetchAnswer(try await gateway.rpc(Self.call(1000, id: 1, prefix: "a")))
        #expect(within.invalidIDs.count == 1000)
        #expect(within.http.body.count <= 262_144)

        // 2,500: about 328 kB.
        let single = try await gateway.rpc(Self.call(2500, id: 2, prefix: "b"))
        let singleJSON = try parseJSON(single.body)
        #expect(single.status == 200)
        #expect(singleJSON["id"] == 2)
        #expect(singleJSON["error"]?["code"] == -32600)
        let singleMessage = singleJSON["error"]?["message"]?.stringValue ?? ""
        #expect(singleMessage.hasPrefix("Invalid request: the answer would be "), "\(singleMessage)")
        #expect(singleMessage.hasSuffix(" bytes, over the limit of 262144; ask for fewer identifiers, or send fewer requests in one batch"), "\(singleMessage)")
        #expect(singleJSON["result"] == nil)

        // Three calls of 1,000 each, each within the limit, about 393 kB together.
        let batch = try await gateway.rpc("[" + (3...5).map { Self.call(1000, id: $0, prefix: "c\($0)") }.joined(separator: ",") + "]")
        let batchJSON = try parseJSON(batch.body)
        #expect(batchJSON["id"] == .null)
        #expect(batchJSON["error"]?["code"] == -32600)
        #expect(batchJSON["error"]?["message"]?.stringValue?.hasSuffix(" bytes, over the limit of 262144; ask for fewer identifiers, or send fewer requests in one batch") == true)
    }

    /// The real process, one loop: answers held for clients that never
    /// read are bounded in total (64 MiB, or two of the largest answers):
    /// five batches of 16 MiB each, none read, are 80 MiB; the connection
    /// with the most bytes still to write is reset and the gateway says so,
    /// long before the write deadline, and goes on serving.
    @Test func unreadAnswersPastTheProcessBoundResetTheLargest() async throws {
        let catalog = try BatchConcurrencyTests.catalogWithAHugeProduct()
        defer { try? FileManager.default.removeItem(atPath: catalog) }
        let gateway = try await GatewayProcess.start([
            "GATEWAY_CATALOG": catalog, "GATEWAY_WORKERS": "1", "GATEWAY_MAX_ANSWER_BYTES": "33554432",
            "GATEWAY_READ_TIMEOUT_MS": "60000", "GATEWAY_REQUEST_TIMEOUT_MS": "20000",
        ])
        let batch = BatchConcurrencyTests.post("[" + (1...16).map { UpstreamScenario.request(["huge_pack"], id: $0) }.joined(separator: ",") + "]")
        var readers: [TestHTTPConnection] = []
        for _ in 0..<5 {
            let reader = try TestHTTPConnection(port: gateway.port)
            try await reader.sendRaw(batch)
            readers.append(reader)
        }
        let line = await gateway.waitForLine { $0.contains("resetting the connection with the most unwritten bytes") }
        #expect(line?.contains("answers not read by their clients hold more than 67108864 bytes on this loop") == true, "\(line ?? "no line")")
        #expect(try await gateway.get("/healthz").status == 200)
        readers.removeAll()
    }

    /// A value out of its range stops start-up naming the variable.
    @Test(arguments: ["1024", "x", "2000000000"])
    func aBadValueStopsStartUpNamingIt(value: String) async throws {
        let result = try await GatewayProcess.run(["GATEWAY_MAX_ANSWER_BYTES": value, "GATEWAY_LISTEN": "127.0.0.1:0"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("invalid GATEWAY_MAX_ANSWER_BYTES (--max-answer-bytes): expected an integer from 131072 to 1073741824, got '\(value)'"), "\(result.stderr)")
    }
}
