import Foundation
import JSONRPC
import MockUpstream
import Testing

/// Standard error of the real process: one JSON object per line, the
/// request id in every line of a call, `LOG_LEVEL` and `LOG_FORMAT`
/// honoured (contract sections 1 and 4).
@Suite struct LoggingTests {
    static let lifecycleMessages: Set<String> = ["starting products-gateway", "listening", "shutting down", "stopped"]

    @Test func jsonLinesParseAndCarryTheCallersRequestID() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(["LOG_LEVEL": "debug", "UPSTREAM_RETRIES": "1"]))

        let okID = "log-ok-\(UUID().uuidString)"
        let ok = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"]), headers: [("X-Request-Id", okID)])
        #expect(ok.header("X-Request-Id") == okID)
        #expect(upstream.upstream.requests.last?.headers["X-Request-Id"] == okID, "answer: \(ok.bodyText)")

        // A failing call, retried once: its failure and retry lines carry the id too.
        let failID = "log-fail-\(UUID().uuidString)"
        upstream.upstream.enqueue(.status(503), .status(503))
        let failed = try await gateway.rpc(MetricsTests.fetch(["coins_100"]), headers: [("X-Request-Id", failID)])
        #expect(failed.header("X-Request-Id") == failID)
        #expect(try parseJSON(failed.body)["error"]?["data"]?["requestId"] == .string(failID))
        #expect(upstream.upstream.requests.suffix(2).allSatisfy { $0.headers["X-Request-Id"] == failID })

        // An id that is not sane (a space, too long) is replaced by a fresh one.
        let insane = try await gateway.rpc(MetricsTests.fetch(["coins_550"]), headers: [("X-Request-Id", String(repeating: "x", count: 129))])
        let freshID = try #require(insane.header("X-Request-Id"))
        #expect(freshID.count <= 128 && freshID != String(repeating: "x", count: 129))
        #expect(upstream.upstream.requests.last?.headers["X-Request-Id"] == freshID)

        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)

        let lines = gateway.stderrLines
        #expect(!lines.isEmpty)
        var objects: [JSONObject] = []
        for line in lines {
            guard let object = GatewayProcess.jsonObject(line) else {
                Issue.record("not a JSON object: \(line)")
                continue
            }
            #expect(object["ts"]?.stringValue?.isEmpty == false, "no ts: \(line)")
            #expect(object["level"]?.stringValue?.isEmpty == false, "no level: \(line)")
            #expect(object["msg"]?.stringValue?.isEmpty == false, "no msg: \(line)")
            objects.append(object)
        }

        let okLines = objects.filter { $0["requestId"]?.stringValue == okID }
        let okCall = try #require(okLines.first { $0["msg"]?.stringValue == "rpc call" })
        #expect(okCall["method"] == "products.fetch")
        #expect(okCall["outcome"] == "ok")
        #expect(okCall["level"] == "info")

        let failLines = objects.filter { $0["requestId"]?.stringValue == failID }
        let failCall = try #require(failLines.first { $0["msg"]?.stringValue == "rpc call" })
        #expect(failCall["method"] == "products.fetch")
        #expect(failCall["outcome"] == "serviceUnavailable")
        // The retry (debug) and the failure line belong to the call as well.
        #expect(failLines.count >= 3)

        #expect(objects.contains { $0["requestId"]?.stringValue == freshID && $0["outcome"] == "ok" })

        // Between start-up and shutdown only calls happen: each line is a call's.
        let messages = objects.compactMap { $0["msg"]?.stringValue }
        let listening = try #require(messages.firstIndex(of: "listening"))
        let shutting = try #require(messages.firstIndex(of: "shutting down"))
        for object in objects[(listening + 1)..<shutting] {
            #expect(object["requestId"]?.stringValue?.isEmpty == false, "a call's line without requestId: \(object)")
        }
        for message in Self.lifecycleMessages {
            #expect(messages.contains(message), "no \(message) line")
        }
    }

    @Test func warningLevelSuppressesInfoLines() async throws {
        let port = try GatewayProcess.freePort()
        let gateway = try await GatewayProcess.start(["LOG_LEVEL": "warning", "GATEWAY_LISTEN": "127.0.0.1:\(port)"])
        let response = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"]), headers: [("X-Request-Id", "quiet-call")])
        #expect(try parseJSON(response.body)["result"] != nil)
        let failed = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"], country: nil))
        #expect(try parseJSON(failed.body)["error"] != nil)
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        for line in gateway.stderrLines {
            let level = GatewayProcess.jsonObject(line)?["level"]?.stringValue
            #expect(["warning", "error", "critical"].contains(level ?? ""), "a line below warning: \(line)")
        }
        #expect(!gateway.stderrLines.contains { $0.contains("quiet-call") })
    }

    @Test func debugLevelShowsMoreThanInfo() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(["LOG_LEVEL": "debug", "UPSTREAM_RETRIES": "1"]))
        upstream.upstream.enqueue(.status(502))
        let response = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"]))
        #expect(try parseJSON(response.body)["result"] != nil)
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        #expect(gateway.jsonLines.contains { $0["level"] == "debug" })
    }

    @Test func textFormatIsForPeople() async throws {
        let gateway = try await GatewayProcess.start(["LOG_FORMAT": "text"])
        let requestID = "text-\(UUID().uuidString)"
        let response = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"]), headers: [("X-Request-Id", requestID)])
        #expect(response.header("X-Request-Id") == requestID)
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        let lines = gateway.stderrLines
        #expect(!lines.isEmpty)
        for line in lines {
            #expect(GatewayProcess.jsonObject(line) == nil, "a JSON line in text format: \(line)")
        }
        let call = try #require(lines.first { $0.contains("requestId=\(requestID)") })
        #expect(call.contains("INFO"))
        #expect(call.contains("method=products.fetch"))
        #expect(call.contains("outcome=ok"))
    }
}
