import Foundation
import Testing

/// Contract section 1's framing, deadline and connection rules, through a
/// whole gateway: what a client on the wire sees, and the metrics.
@Suite(.serialized) struct ConnectionLimitsTests {
    /// Each could be framed differently by a proxy in front: a 400 (or 501),
    /// the contract's JSON body with a request id, and a closed connection.
    @Test(arguments: [
        ("Content-Length: 2\r\nContent-Length: 30", 400, "more than one Content-Length field"),
        ("Content-Length: 2\r\nTransfer-Encoding: chunked", 400, "both Content-Length and Transfer-Encoding"),
        ("Transfer-Encoding: gzip", 501, "the only transfer coding accepted is chunked"),
        ("Content-Length : 2", 400, "whitespace between a header name and its colon"),
    ])
    func ambiguousFramingIsRefusedAndTheConnectionCloses(fields: String, status: Int, message: String) async throws {
        let gateway = try RunningGateway.start()
        let connection = try TestHTTPConnection(port: gateway.port)
        try await connection.sendRaw(Array("POST /rpc HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n\(fields)\r\n\r\n{}GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        let response = try await connection.readResponse()
        let closed = await connection.isClosedByPeer()
        let next = try await TestHTTP.get(port: gateway.port, path: "/healthz")
        await gateway.stop()
        #expect(response.status == status)
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.header("Connection") == "close")
        #expect(response.header("X-Request-Id")?.count == 32)
        #expect(response.bodyText == #"{"error":{"status":\#(status),"message":"\#(message)"}}"#)
        #expect(closed)
        #expect(next.status == 200)
    }

    /// A refusal after the fields were read echoes the caller's sane
    /// `X-Request-Id`, as every answer does; one before gets a fresh id.
    @Test(arguments: [
        ("Content-Length: 70000", 413, "echoed-413"),
        ("Content-Length: 2\r\nTransfer-Encoding: chunked", 400, "echoed-400"),
        ("Transfer-Encoding: chunked", 413, "echoed-chunked-413"),
    ])
    func aRefusalEchoesTheCallersRequestID(fields: String, status: Int, requestID: String) async throws {
        let gateway = try RunningGateway.start()
        let connection = try TestHTTPConnection(port: gateway.port)
        let body = fields.hasPrefix("Transfer-Encoding") ? "11170\r\n" + String(repeating: "x", count: 70000) + "\r\n0\r\n\r\n" : ""
        try await connection.sendRaw(Array("POST /rpc HTTP/1.1\r\nHost: a\r\nX-Request-Id: \(requestID)\r\n\(fields)\r\n\r\n\(body)".utf8))
        let response = try await connection.readResponse()
        await gateway.stop()
        #expect(response.status == status)
        #expect(response.header("X-Request-Id") == requestID)
    }

    @Test func aRequestSlowerThanTheReadTimeoutGets408() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_READ_TIMEOUT_MS": "300"])
        let connection = try TestHTTPConnection(port: gateway.port)
        try await connection.sendRaw(Array("POST /rpc HTTP/1.1\r\nHost: a\r\nContent-Length: 40\r\n\r\n{\"jsonrpc\"".utf8))
        let response = try await connection.readResponse()
        let closed = await connection.isClosedByPeer()
        await gateway.stop()
        #expect(response.status == 408)
        #expect(response.header("X-Request-Id")?.count == 32)
        #expect(response.bodyText == #"{"error":{"status":408,"message":"the request's header and body did not arrive within 300 ms (GATEWAY_READ_TIMEOUT_MS)"}}"#)
        #expect(closed)
    }

    /// `Expect: 100-continue`: the client reads exactly the interim answer
    /// before it sends its body, and then the body is read and answered.
    @Test func expectContinueGetsExactlyTheInterimAnswerThenTheBodyIsRead() async throws {
        let gateway = try RunningGateway.start()
        let body = #"{"jsonrpc":"2.0","id":7,"method":"products.fetch","params":{"productIdentifiers":["remove_ads"],"countryCode":"DE"}}"#
        let connection = try TestHTTPConnection(port: gateway.port)
        try await connection.sendRaw(Array("POST /rpc HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: \(body.utf8.count)\r\n\r\n".utf8))
        let interim = try await connection.readBytes(25)
        try await connection.sendRaw(Array(body.utf8))
        let response = try await connection.readResponse()
        await gateway.stop()
        #expect(String(decoding: interim, as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(response.status == 200)
        let answer = try FetchAnswer(response)
        #expect(answer.body["id"] == 7)
        #expect(answer.productIDs == ["remove_ads"])
    }

    @Test func anIdleConnectionIsClosedAfterTheIdleTimeout() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_IDLE_TIMEOUT_MS": "200"])
        let connection = try TestHTTPConnection(port: gateway.port)
        let first = try await connection.request("GET", "/healthz", contentType: nil)
        let closed = await connection.isClosedByPeer()
        await gateway.stop()
        #expect(first.status == 200)
        #expect(closed)
    }

    @Test func connectionsOverTheCapAreRefusedAndCounted() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_MAX_CONNECTIONS": "2", "GATEWAY_WORKERS": "1"])
        let kept = try TestHTTPConnection(port: gateway.port)
        #expect(try await kept.request("GET", "/healthz", contentType: nil).status == 200)
        var second: TestHTTPConnection? = try TestHTTPConnection(port: gateway.port)
        #expect(try await second?.request("GET", "/healthz", contentType: nil).status == 200)

        let third = try TestHTTPConnection(port: gateway.port)
        let refused = try await third.readResponse()
        #expect(refused.status == 503)
        #expect(refused.header("Connection") == "close")
        #expect(refused.bodyText == #"{"error":{"status":503,"message":"too many connections; retry later"}}"#)
        #expect(await third.isClosedByPeer())

        second = nil
        try await waitForEvent("the second connection to close") {
            gateway.application.metrics.exposition().containsLine("gateway_connections_open 1.0")
        }
        // The freed place serves the scrape itself.
        let metrics = try await gateway.metricsText()
        await gateway.stop()
        #expect(metrics.containsLine("gateway_connections_open 2.0"))
        #expect(metrics.containsLine("gateway_connections_rejected_total 1"))
    }

    /// Probes and metrics never compete with callers: with the callers' cap
    /// full, `GATEWAY_ADMIN_LISTEN` still answers `/healthz`, `/readyz` and
    /// `/metrics`, under a cap of its own, and nothing else. The `503` over
    /// the callers' cap carries a request id, as every answer does.
    @Test func theAdminListenerServesProbesWhileTheCapIsFull() async throws {
        let gateway = try RunningGateway.start(["GATEWAY_MAX_CONNECTIONS": "2", "GATEWAY_WORKERS": "1", "GATEWAY_ADMIN_LISTEN": "127.0.0.1:0"])
        let adminPort = try #require(gateway.application.adminPort)
        #expect(adminPort != gateway.port)
        let held = [try TestHTTPConnection(port: gateway.port), try TestHTTPConnection(port: gateway.port)]
        for connection in held { #expect(try await connection.request("GET", "/healthz", contentType: nil).status == 200) }
        let refused = try await TestHTTPConnection(port: gateway.port).readResponse()
        #expect(refused.status == 503)
        #expect(refused.header("X-Request-Id")?.count == 32)
        #expect(refused.header("Content-Type") == "application/json")

        #expect(try await TestHTTP.get(port: adminPort, path: "/healthz").bodyText == #"{"status":"ok"}"#)
        let ready = try await TestHTTP.get(port: adminPort, path: "/readyz", headers: [("X-Request-Id", "probe-1")])
        #expect(ready.status == 200)
        #expect(ready.header("X-Request-Id") == "probe-1")
        let metrics = try await TestHTTP.get(port: adminPort, path: "/metrics")
        #expect(metrics.status == 200)
        // The admin listener's connections are not the callers'.
        #expect(metrics.bodyText.containsLine("gateway_connections_open 2.0"))
        #expect(metrics.bodyText.containsLine("gateway_connections_rejected_total 1"))

        for path in ["/rpc", "/openapi.yaml", "/nothing"] {
            let other = try await TestHTTP.get(port: adminPort, path: path)
            #expect(other.status == 404, "\(path)")
            #expect(other.header("Content-Type") == "application/json")
            #expect(other.header("X-Request-Id")?.count == 32)
            #expect(other.bodyText.hasPrefix(#"{"error":{"status":404,"message":"no route for \#(path) on this address"#))
        }
        let posted = try await TestHTTP.post(port: adminPort, json: "{}")
        #expect(posted.status == 404)
        #expect(try await TestHTTPConnection(port: adminPort).request("POST", "/healthz", body: Array("{}".utf8)).status == 405)

        // Its own cap: 64 connections. The next one is served, and the
        // connection idle longest is closed to make room: the first of
        // them, then the second.
        var adminHeld: [TestHTTPConnection] = []
        for _ in 0..<64 {
            let connection = try TestHTTPConnection(port: adminPort)
            #expect(try await connection.request("GET", "/healthz", contentType: nil).status == 200)
            adminHeld.append(connection)
        }
        let overAdminCap = try TestHTTPConnection(port: adminPort)
        #expect(try await overAdminCap.request("GET", "/healthz", contentType: nil).status == 200)
        #expect(await adminHeld[0].isClosedByPeer())
        let next = try TestHTTPConnection(port: adminPort)
        #expect(try await next.request("GET", "/readyz", contentType: nil).status == 200)
        #expect(await adminHeld[1].isClosedByPeer())
        // The rest, and the two newcomers, are still served.
        #expect(try await adminHeld[2].request("GET", "/healthz", contentType: nil).status == 200)
        #expect(try await overAdminCap.request("GET", "/healthz", contentType: nil).status == 200)
        adminHeld.removeAll()
        await gateway.stop()
        _ = held
    }

    /// The real process, two loops: more connections than the admin
    /// listener's cap of 64, silent ones and ones that stop halfway
    /// through a request's head, cannot fail a probe. Once the listener has
    /// dealt with all of them (at least the 36 over the cap have heard from
    /// it: refused with a `503` before, closed to make room now), every
    /// probe still answers `200`: the connection idle longest makes room.
    @Test func connectionsOverTheAdminCapCannotFailAProbe() async throws {
        let gateway = try await GatewayProcess.start(["GATEWAY_ADMIN_LISTEN": "127.0.0.1:0", "GATEWAY_WORKERS": "2"])
        let line = try #require(await gateway.waitForLine { $0.contains("listening for probes and metrics") })
        let adminPort = try #require(GatewayProcess.jsonObject(line)?["port"]?.intValue)

        var held: [TestHTTPConnection] = []
        for _ in 0..<60 { held.append(try TestHTTPConnection(port: adminPort)) }
        let halfHeads = (0..<40).map { _ in try? TestHTTPConnection(port: adminPort) }.compactMap { $0 }
        #expect(halfHeads.count == 40)
        try await TestHTTPConnection.sendAll(halfHeads, Array(repeating: Array("GET /healthz HTTP/1.1\r\nHost: a\r\n".utf8), count: halfHeads.count))
        held += halfHeads
        let all = held
        try await waitForEvent("the admin listener to deal with every connection") {
            all.filter(\.serverHasActed).count >= 36
        }
        #expect(all.filter { !$0.serverHasActed }.count <= 64)

        var statuses: [Int] = []
        var bodies: [String] = []
        for path in ["/healthz", "/healthz", "/readyz", "/healthz", "/metrics", "/healthz"] {
            let response = try await TestHTTP.get(port: adminPort, path: path)
            statuses.append(response.status)
            if path == "/healthz" { bodies.append(response.bodyText) }
        }
        #expect(statuses == [200, 200, 200, 200, 200, 200])
        #expect(bodies == Array(repeating: #"{"status":"ok"}"#, count: 4))
        // The callers' port never noticed.
        #expect(try await gateway.get("/healthz").status == 200)
        held.removeAll()
    }

    /// Idle sockets cannot take the descriptors upstream calls need: client
    /// connections are capped at what the open-file limit leaves beside the
    /// upstream's reserve, and a miss still reaches the upstream while
    /// hundreds of idle sockets knock.
    @Test func idleSocketsCannotStarveTheUpstreamOfDescriptors() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(["GATEWAY_WORKERS": "2"]), openFileLimit: 256)
        let warning = try #require(gateway.jsonLines.first { $0["msg"]?.stringValue?.hasPrefix("the open-file limit allows fewer") == true })
        // 256 - (64 upstream in use + 2 x 32 idle + 32 + 4 x 2 workers)
        #expect(warning["maxConnections"] == 88)
        #expect(warning["reservedDescriptors"] == 168)
        #expect(warning["GATEWAY_MAX_CONNECTIONS"] == 1024)

        let kept = try TestHTTPConnection(port: gateway.port)
        #expect(try await kept.request("GET", "/healthz", contentType: nil).status == 200)
        var idle: [TestHTTPConnection] = []
        for _ in 0..<300 { idle.append(try TestHTTPConnection(port: gateway.port)) }
        // Scraped on the kept connection: a new one would be refused.
        // All 300 are taken in or refused: 87 beside the kept one, 213 refused.
        var metrics = ""
        func settled() -> Bool {
            metrics.containsLine("gateway_connections_open 88.0") && metrics.containsLine("gateway_connections_rejected_total 213")
        }
        for _ in 0..<100 where !settled() {
            metrics = try await kept.request("GET", "/metrics", contentType: nil).bodyText
            // Polls for the event (the counts settled), 5 s at most: the sleep is only the poll's interval.
            if !settled() { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(metrics.containsLine("gateway_connections_open 88.0"))
        #expect(metrics.containsLine("gateway_connections_rejected_total 213"))
        let miss = try await kept.request("POST", "/rpc", body: Array(MetricsTests.fetch(["coins_100", "premium_monthly"]).utf8))
        #expect(miss.status == 200)
        #expect(try parseJSON(miss.body)["result"]?["products"]?[1]?["productIdentifier"] == "premium_monthly")
        idle.removeAll()
    }

    /// When something else holds the descriptors, the listener pauses
    /// instead of spinning on `accept`, says so once (not once per
    /// attempt), and takes connections again when descriptors free up.
    @Test func runningOutOfDescriptorsPausesTheListenerAndLogsOnce() async throws {
        let gateway = try await GatewayProcess.start(["GATEWAY_WORKERS": "1"], openFileLimit: 230, heldDescriptors: 180)
        var sockets: [TestHTTPConnection] = []
        for _ in 0..<60 { sockets.append(try TestHTTPConnection(port: gateway.port)) }
        let line = await gateway.waitForLine { $0.contains("cannot accept connections") }
        #expect(line?.contains("Too many open files") == true)
        sockets.removeAll()

        var served: RawHTTPResponse?
        for _ in 0..<100 where served == nil {
            served = try? await TestHTTP.get(port: gateway.port, path: "/healthz")
            // Polls for the event (the listener taking connections again), 5 s at most: the sleep is only the poll's interval.
            if served == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(served?.status == 200)
        #expect(gateway.stderrLines.filter { $0.contains("cannot accept connections") }.count == 1)
    }

    @Test func anOpenFileLimitWithNoRoomForClientsStopsStartUp() async throws {
        let result = try await GatewayProcess.run(["GATEWAY_WORKERS": "1"], arguments: [], openFileLimit: 64)
        #expect(result.status == 2)
        #expect(result.stderr.contains("GATEWAY_MAX_CONNECTIONS"))
        #expect(result.stderr.contains("the open-file limit of 64 leaves no descriptor for client connections beside the 164 kept"))
    }
}

extension [UInt8] {
    func containsLine(_ line: String) -> Bool {
        String(decoding: self, as: UTF8.self).containsLine(line)
    }
}

extension String {
    func containsLine(_ line: String) -> Bool {
        split(separator: "\n").contains { $0 == line }
    }
}
