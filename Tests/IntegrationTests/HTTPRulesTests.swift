import Testing

/// Contract section 1, HTTP rules, against a real server on the embedded catalog.
@Suite struct HTTPRulesTests {
    static let fetchDE = #"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["premium_monthly"],"countryCode":"DE"}}"#

    @Test func healthzAnswersOk() async throws {
        let gateway = try RunningGateway.start()
        let response = try await TestHTTP.get(port: gateway.port, path: "/healthz")
        await gateway.stop()
        #expect(response.status == 200)
        #expect(response.bodyText == #"{"status":"ok"}"#)
        #expect(response.header("Content-Type") == "application/json")
    }

    @Test func headAnswersHeadersOnly() async throws {
        let gateway = try RunningGateway.start()
        let connection = try TestHTTPConnection(port: gateway.port)
        let head = try await connection.request("HEAD", "/healthz", contentType: nil)
        // The same connection goes on: nothing of a body was left behind.
        let get = try await connection.request("GET", "/healthz", contentType: nil)
        await gateway.stop()
        #expect(head.status == 200)
        #expect(head.header("X-Request-Id") != nil)
        #expect(get.bodyText == #"{"status":"ok"}"#)
    }

    @Test func readyzIsReadyWhileServing() async throws {
        let gateway = try RunningGateway.start()
        let response = try await TestHTTP.get(port: gateway.port, path: "/readyz")
        await gateway.stop()
        #expect(response.status == 200)
        #expect(response.bodyText == #"{"status":"ready"}"#)
    }

    @Test func unknownPathIs404WithJSONBody() async throws {
        let gateway = try RunningGateway.start()
        let response = try await TestHTTP.get(port: gateway.port, path: "/nope")
        await gateway.stop()
        #expect(response.status == 404)
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.bodyText == #"{"error":{"status":404,"message":"no route for /nope; the API is POST /rpc"}}"#)
    }

    @Test(arguments: ["GET", "PUT", "DELETE", "PATCH", "OPTIONS"])
    func rpcRefusesOtherMethodsWith405(method: String) async throws {
        let gateway = try RunningGateway.start()
        let response = try await TestHTTPConnection(port: gateway.port).request(method, "/rpc", body: method == "GET" ? [] : Array("{}".utf8))
        await gateway.stop()
        #expect(response.status == 405)
        #expect(response.header("Allow") == "POST")
        #expect(response.bodyText == #"{"error":{"status":405,"message":"\#(method) is not allowed on /rpc; use POST"}}"#)
    }

    @Test func postOnHealthzIs405AllowingGetAndHead() async throws {
        let gateway = try RunningGateway.start()
        let response = try await TestHTTP.post(port: gateway.port, path: "/healthz", json: "{}")
        await gateway.stop()
        #expect(response.status == 405)
        #expect(response.header("Allow") == "GET, HEAD")
    }

    @Test(arguments: ["text/plain", "application/x-www-form-urlencoded", "application/jsonp", "multipart/form-data; boundary=x"])
    func wrongContentTypeIs415(contentType: String) async throws {
        let gateway = try RunningGateway.start()
        let response = try await TestHTTPConnection(port: gateway.port).request("POST", "/rpc", body: Array(Self.fetchDE.utf8), contentType: contentType)
        await gateway.stop()
        #expect(response.status == 415)
        #expect(response.bodyText.contains("Content-Type must be application/json, got \(contentType)"))
    }

    @Test(arguments: ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8", nil])
    func jsonOrAbsentContentTypeIsAccepted(contentType: String?) async throws {
        let gateway = try RunningGateway.start()
        let response = try await TestHTTPConnection(port: gateway.port).request("POST", "/rpc", body: Array(Self.fetchDE.utf8), contentType: contentType)
        await gateway.stop()
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/json")
        #expect(try parseJSON(response.body)["result"]?["region"] == ["countryCode": "DE", "source": "explicit"])
    }

    @Test func bodyOverTheLimitIs413AndTheConnectionCloses() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_MAX_BODY_BYTES": "1024"])
        let connection = try TestHTTPConnection(port: gateway.port)
        let padding = String(repeating: " ", count: 2000)
        let response = try await connection.request("POST", "/rpc", body: Array((Self.fetchDE + padding).utf8))
        let closed = await connection.isClosedByPeer()
        // The server goes on serving others.
        let next = try await gateway.rpc(Self.fetchDE)
        await gateway.stop()
        #expect(response.status == 413)
        #expect(response.header("X-Request-Id")?.count == 32)
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.bodyText == #"{"error":{"status":413,"message":"the request body is larger than 1024 bytes (GATEWAY_MAX_BODY_BYTES)"}}"#)
        #expect(closed)
        #expect(next.status == 200)
    }

    /// Far over the limit: refused from its declared length, before the
    /// body is read.
    @Test func bodyFarOverTheLimitIsCutOffWith413() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_MAX_BODY_BYTES": "1024"])
        let connection = try TestHTTPConnection(port: gateway.port)
        let response = try await connection.request("POST", "/rpc", body: [UInt8](repeating: 0x20, count: 200_000))
        let closed = await connection.isClosedByPeer()
        let next = try await gateway.rpc(Self.fetchDE)
        await gateway.stop()
        #expect(response.status == 413)
        #expect(closed)
        #expect(next.status == 200)
    }

    /// A body sent with HEAD is framed by its Content-Length like any
    /// other: read and dropped, never parsed as the next request.
    @Test func aBodySentWithHeadIsNeverReadAsTheNextRequest() async throws {
        let gateway = try RunningGateway.start()
        let connection = try TestHTTPConnection(port: gateway.port)
        let smuggled = "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        let response = try await connection.request("HEAD", "/healthz", body: Array(smuggled.utf8), contentType: "text/plain")
        let next = try await connection.request("GET", "/readyz", contentType: nil)
        await gateway.stop()
        #expect(response.status == 200)
        #expect(response.body.isEmpty)
        #expect(next.status == 200)
        #expect(next.bodyText == #"{"status":"ready"}"#)
    }

    @Test func bodyAtTheLimitIsServed() async throws {
        let body = Self.fetchDE + String(repeating: " ", count: 1024 - Self.fetchDE.utf8.count)
        let gateway = try RunningGateway.start(["GATEWAY_MAX_BODY_BYTES": "1024"])
        let response = try await gateway.rpc(body)
        await gateway.stop()
        #expect(body.utf8.count == 1024)
        #expect(response.status == 200)
    }

    @Test func saneRequestIdIsEchoed() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(Self.fetchDE, headers: [("X-Request-Id", "caller-id-42")])
        await gateway.stop()
        #expect(response.header("X-Request-Id") == "caller-id-42")
    }

    @Test(arguments: [String(repeating: "a", count: 129), "has space", ""])
    func insaneRequestIdIsReplaced(value: String) async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(Self.fetchDE, headers: [("X-Request-Id", value)])
        await gateway.stop()
        let id = try #require(response.header("X-Request-Id"))
        #expect(id != value)
        #expect(id.count == 32 && id.allSatisfy(\.isHexDigit))
    }

    @Test func everyAnswerCarriesARequestId() async throws {
        let gateway = try RunningGateway.start()
        let answers = [
            try await TestHTTP.get(port: gateway.port, path: "/healthz"),
            try await TestHTTP.get(port: gateway.port, path: "/nope"),
            try await TestHTTP.get(port: gateway.port, path: "/rpc"),
            try await gateway.rpc(#"{"jsonrpc":"2.0","method":"products.fetch"}"#),
        ]
        await gateway.stop()
        #expect(answers.allSatisfy { $0.header("X-Request-Id")?.count == 32 })
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() async throws {
        let gateway = try RunningGateway.start()
        let connection = try TestHTTPConnection(port: gateway.port)
        let first = try await connection.request("POST", "/rpc", body: Array(Self.fetchDE.utf8))
        let second = try await connection.request("GET", "/healthz", contentType: nil)
        let third = try await connection.request("POST", "/rpc", body: Array(Self.fetchDE.utf8))
        await gateway.stop()
        #expect([first.status, second.status, third.status] == [200, 200, 200])
        #expect(first.body == third.body)
    }

    @Test func garbageDoesNotStopTheServer() async throws {
        let gateway = try RunningGateway.start()
        let garbage: [[UInt8]] = [
            Array("NOT HTTP AT ALL\r\n\r\n".utf8),
            [0x00, 0xFF, 0x13, 0x37, 0x0D, 0x0A, 0x0D, 0x0A],
            Array("POST /rpc HTTP/1.1\r\nContent-Length: -5\r\n\r\n".utf8),
            Array("POST /rpc HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n".utf8),
            Array(("GET /" + String(repeating: "x", count: 40000) + " HTTP/1.1\r\n\r\n").utf8),
        ]
        for bytes in garbage {
            let connection = try TestHTTPConnection(port: gateway.port)
            try await connection.sendRaw(bytes)
            _ = try? await connection.readResponse()
        }
        let after = try await gateway.rpc(Self.fetchDE)
        await gateway.stop()
        #expect(after.status == 200)
        #expect(try parseJSON(after.body)["result"]?["products"]?[0]?["productIdentifier"] == "premium_monthly")
    }

    @Test func openAPIDocumentIsServedVerbatim() async throws {
        let gateway = try RunningGateway.start()
        let response = try await TestHTTP.get(port: gateway.port, path: "/openapi.yaml")
        await gateway.stop()
        let file = try String(contentsOfFile: #filePath.replacingOccurrences(of: "Tests/IntegrationTests/HTTPRulesTests.swift", with: "openapi/openapi.yaml"), encoding: .utf8)
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/yaml")
        #expect(response.bodyText == file)
    }
}
