import Foundation
import JSONRPC
import MockUpstream
import Testing

/// One access line at `info` and one `gateway_http_requests_total` count
/// for every request the main listener answers, refused ones included
/// (contract section 4), against the real process: its standard error and
/// its `/metrics`, scraped on the admin listener so that the scrapes are
/// not themselves counted.
@Suite struct AccessLogTests {
    static let key = "access-key-0123456789abcdef"
    /// The first 12 hex digits of the key's SHA-256:
    /// `printf %s access-key-0123456789abcdef | sha256sum | cut -c1-12`.
    static let fingerprint = "3d75521081d1"

    /// A gateway in front of a fresh upstream, with one API key, a small
    /// body limit, one batch turn (so that a sixth batch is refused `503`)
    /// and an admin listener.
    static func start(_ upstream: RunningUpstream) async throws -> (GatewayProcess, adminPort: Int) {
        let adminPort = try GatewayProcess.freePort()
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment([
            "GATEWAY_API_KEYS": key,
            "GATEWAY_MAX_BODY_BYTES": "1024",
            "GATEWAY_ADMIN_LISTEN": "127.0.0.1:\(adminPort)",
            "GATEWAY_BATCH_CONCURRENCY": "1",
            "UPSTREAM_RETRIES": "0",
            "UPSTREAM_TIMEOUT_MS": "8000",
            "GATEWAY_REQUEST_TIMEOUT_MS": "15000",
        ]))
        return (gateway, adminPort)
    }

    /// The one access line of `requestID`, once the process has written it
    /// (it is written before the answer, but read from the pipe by a thread
    /// of the test's own).
    static func accessLine(_ gateway: GatewayProcess, _ requestID: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> JSONObject {
        await gateway.waitForLine { line in
            GatewayProcess.jsonObject(line).map { $0["msg"] == "http request" && $0["requestId"]?.stringValue == requestID } ?? false
        }
        let lines = gateway.jsonLines.filter { $0["msg"] == "http request" && $0["requestId"]?.stringValue == requestID }
        #expect(lines.count == 1, "access lines of \(requestID): \(lines)", sourceLocation: sourceLocation)
        return try #require(lines.first, sourceLocation: sourceLocation)
    }

    /// `line` is the access line of `response`, at `info`, with exactly
    /// these values; `durationMs` is a JSON number.
    static func expectLine(
        _ line: JSONObject, of response: RawHTTPResponse, method: String, path: String, apiKey: String?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(line["level"] == "info", sourceLocation: sourceLocation)
        #expect(line["method"] == .string(method), sourceLocation: sourceLocation)
        #expect(line["path"] == .string(path), sourceLocation: sourceLocation)
        #expect(line["status"] == .number(String(response.status)), sourceLocation: sourceLocation)
        #expect(line["bytes"] == .number(String(response.body.count)), sourceLocation: sourceLocation)
        #expect(line["requestId"] == response.header("X-Request-Id").map(JSONValue.string), sourceLocation: sourceLocation)
        #expect(line["apiKey"] == apiKey.map(JSONValue.string), sourceLocation: sourceLocation)
        guard case .number(let text)? = line["durationMs"], let milliseconds = Double(text) else {
            Issue.record("durationMs is not a JSON number: \(String(describing: line["durationMs"]))", sourceLocation: sourceLocation)
            return
        }
        #expect(milliseconds >= 0 && milliseconds < 15000, sourceLocation: sourceLocation)
    }

    /// The value of `gateway_http_requests_total{status="N"}`, scraped on
    /// the admin listener.
    static func count(_ adminPort: Int, status: Int) async throws -> Double? {
        let text = try await TestHTTP.get(port: adminPort, path: "/metrics").bodyText
        let series = #"gateway_http_requests_total{status="\#(status)"} "#
        return text.split(separator: "\n").first { $0.hasPrefix(series) }.flatMap { Double($0.dropFirst(series.count)) }
    }

    /// A batch of one call.
    static func batch(_ id: Int) -> String {
        "[" + UpstreamScenario.request(["coins_100"], id: id) + "]"
    }

    @Test func everyRefusalAndEveryAnswerLeavesOneLineAndOneCount() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let (gateway, adminPort) = try await Self.start(upstream)
        let call = MetricsTests.fetch(["premium_monthly"])
        let authorized = ("Authorization", "Bearer \(Self.key)") as (String, String)
        for status in [200, 400, 401, 404, 405, 413, 415, 503] {
            #expect(try await Self.count(adminPort, status: status) == 0, "status \(status) before any request")
        }

        // 200, with the key: its fingerprint, never the key; the caller's
        // trace, continued under a span of the call's own.
        let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
        let traceparent = ("traceparent", "00-\(traceID)-00f067aa0ba902b7-01") as (String, String)
        let ok = try await gateway.rpc(call, headers: [authorized, traceparent, ("X-Request-Id", "access-200")])
        #expect(ok.status == 200)
        let okLine = try await Self.accessLine(gateway, "access-200")
        Self.expectLine(okLine, of: ok, method: "POST", path: "/rpc", apiKey: Self.fingerprint)
        #expect(okLine["traceId"] == .string(traceID))
        let spanID = okLine["spanId"]?.stringValue ?? ""
        #expect(spanID.count == 16 && spanID != "00f067aa0ba902b7" && spanID.allSatisfy { $0.isHexDigit && !$0.isUppercase }, "\(spanID)")

        // 401: no key, then an unknown one.
        let missing = try await gateway.rpc(call, headers: [traceparent, ("X-Request-Id", "access-401-none")])
        #expect(missing.status == 401)
        let missingLine = try await Self.accessLine(gateway, "access-401-none")
        Self.expectLine(missingLine, of: missing, method: "POST", path: "/rpc", apiKey: "none")
        // A refused call is part of its trace too.
        #expect(missingLine["traceId"] == .string(traceID))
        let unknown = try await gateway.rpc(call, headers: [("Authorization", "Bearer not-a-key-0123456789"), ("X-Request-Id", "access-401-unknown")])
        #expect(unknown.status == 401)
        Self.expectLine(try await Self.accessLine(gateway, "access-401-unknown"), of: unknown, method: "POST", path: "/rpc", apiKey: "unknown")

        // 404, its query left out of the line; 405; 415.
        let notFound = try await gateway.get("/nowhere?token=secret-in-query", headers: [("X-Request-Id", "access-404")])
        #expect(notFound.status == 404)
        Self.expectLine(try await Self.accessLine(gateway, "access-404"), of: notFound, method: "GET", path: "/nowhere", apiKey: nil)
        let wrongMethod = try await gateway.get("/rpc", headers: [("X-Request-Id", "access-405")])
        #expect(wrongMethod.status == 405)
        Self.expectLine(try await Self.accessLine(gateway, "access-405"), of: wrongMethod, method: "GET", path: "/rpc", apiKey: nil)
        let connection = try TestHTTPConnection(port: gateway.port)
        let wrongType = try await connection.request(
            "POST", "/rpc", headers: [authorized, ("X-Request-Id", "access-415")], body: Array(call.utf8), contentType: "text/plain"
        )
        #expect(wrongType.status == 415)
        Self.expectLine(try await Self.accessLine(gateway, "access-415"), of: wrongType, method: "POST", path: "/rpc", apiKey: Self.fingerprint)

        // 413 and 400, refused by the HTTP front while it reads the request.
        let large = try TestHTTPConnection(port: gateway.port)
        try await large.sendRaw(Array("POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: access-413\r\nContent-Length: 5000\r\n\r\n".utf8))
        let tooLarge = try await large.readResponse()
        #expect(tooLarge.status == 413)
        Self.expectLine(try await Self.accessLine(gateway, "access-413"), of: tooLarge, method: "POST", path: "/rpc", apiKey: nil)
        let smuggled = try TestHTTPConnection(port: gateway.port)
        try await smuggled.sendRaw(Array("POST /rpc?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: access-400\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        let conflicting = try await smuggled.readResponse()
        #expect(conflicting.status == 400)
        Self.expectLine(try await Self.accessLine(gateway, "access-400"), of: conflicting, method: "POST", path: "/rpc", apiKey: nil)
        // A request line that cannot be read: no method and no path to log.
        let garbage = try TestHTTPConnection(port: gateway.port)
        try await garbage.sendRaw(Array("NOT A REQUEST\r\n\r\n".utf8))
        let unreadable = try await garbage.readResponse()
        #expect(unreadable.status == 400)
        let unreadableID = try #require(unreadable.header("X-Request-Id"))
        Self.expectLine(try await Self.accessLine(gateway, unreadableID), of: unreadable, method: "-", path: "-", apiKey: nil)

        // 503: the one batch turn is held (its upstream call hangs) and four
        // batches wait; a sixth is told to retry.
        upstream.upstream.enqueue(.hang)
        let held = Task { try? await gateway.rpc(Self.batch(1), headers: [authorized]) }
        try await UpstreamScenario.waitFor("the held batch's upstream request") { upstream.upstream.requests.count == 1 }
        let waiting = (2...5).map { id in Task { try? await gateway.rpc(Self.batch(id), headers: [authorized]) } }
        try await UpstreamScenario.waitFor("four batches waiting") {
            let text = (try? await TestHTTP.get(port: adminPort, path: "/metrics").bodyText) ?? ""
            return text.containsLine("gateway_batches_waiting 4.0")
        }
        let busy = try await gateway.rpc(Self.batch(6), headers: [authorized, ("X-Request-Id", "access-503")])
        #expect(busy.status == 503)
        Self.expectLine(try await Self.accessLine(gateway, "access-503"), of: busy, method: "POST", path: "/rpc", apiKey: Self.fingerprint)

        // One count per answer, by status; the held and waiting batches
        // have not been answered yet.
        let expected = [200: 1.0, 400: 2, 401: 2, 404: 1, 405: 1, 413: 1, 415: 1, 503: 1]
        for (status, value) in expected {
            #expect(try await Self.count(adminPort, status: status) == value, "gateway_http_requests_total{status=\"\(status)\"}")
        }
        // As many access lines as answers, and never the key.
        let accessLines = gateway.jsonLines.filter { $0["msg"] == "http request" }
        #expect(accessLines.count == 10)
        #expect(!gateway.stderrLines.contains { $0.contains(Self.key) })
        #expect(!gateway.stderrLines.contains { $0.contains("secret-in-query") })

        gateway.sendSignal(SIGKILL)
        _ = await gateway.waitForExit()
        _ = await held.value
        for task in waiting { _ = await task.value }
    }

    /// Probes and scrapes on the admin listener are neither logged nor
    /// counted: the access log is the callers'.
    @Test func theAdminListenerIsNotInTheAccessLog() async throws {
        let adminPort = try GatewayProcess.freePort()
        let gateway = try await GatewayProcess.start(["GATEWAY_ADMIN_LISTEN": "127.0.0.1:\(adminPort)"])
        #expect(try await TestHTTP.get(port: adminPort, path: "/healthz", headers: [("X-Request-Id", "admin-probe")]).status == 200)
        #expect(try await TestHTTP.get(port: adminPort, path: "/nowhere", headers: [("X-Request-Id", "admin-404")]).status == 404)
        #expect(try await Self.count(adminPort, status: 200) == 0)
        #expect(try await Self.count(adminPort, status: 404) == 0)
        let probe = try await gateway.get("/healthz", headers: [("X-Request-Id", "main-probe")])
        Self.expectLine(try await Self.accessLine(gateway, "main-probe"), of: probe, method: "GET", path: "/healthz", apiKey: nil)
        #expect(try await Self.count(adminPort, status: 200) == 1)
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        #expect(!gateway.stderrLines.contains { $0.contains("admin-probe") || $0.contains("admin-404") })
    }

    /// `LOG_LEVEL=warning`: no access line, the counts go on.
    @Test func belowInfoThereIsNoLineButTheCount() async throws {
        let adminPort = try GatewayProcess.freePort()
        let port = try GatewayProcess.freePort()
        let gateway = try await GatewayProcess.start([
            "LOG_LEVEL": "warning", "GATEWAY_LISTEN": "127.0.0.1:\(port)", "GATEWAY_ADMIN_LISTEN": "127.0.0.1:\(adminPort)",
        ])
        // Start-up polled /healthz on the main listener until it answered.
        let before = try #require(try await Self.count(adminPort, status: 200))
        #expect(try await gateway.get("/nowhere", headers: [("X-Request-Id", "quiet-404")]).status == 404)
        #expect(try await gateway.rpc(MetricsTests.fetch(["premium_monthly"]), headers: [("X-Request-Id", "quiet-200")]).status == 200)
        #expect(try await Self.count(adminPort, status: 404) == 1)
        #expect(try await Self.count(adminPort, status: 200) == before + 1)
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        #expect(!gateway.stderrLines.contains { $0.contains("http request") })
    }
}
