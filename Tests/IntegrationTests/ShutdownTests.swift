import Foundation
import GatewayService
import MockUpstream
import Testing

/// The command as an operator runs it (contract sections 3 and 5):
/// graceful shutdown on SIGTERM, exit codes, `--help`, `--version`.
@Suite struct ShutdownTests {
    /// Sends `GET /readyz` on a connection opened before the signal (the
    /// listener is closed by then) until it answers 503; returns that answer.
    static func readyzUntilDraining(on connection: TestHTTPConnection) async throws -> RawHTTPResponse {
        for _ in 0..<500 {
            let response = try await connection.request("GET", "/readyz", contentType: nil)
            if response.status != 200 { return response }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestHTTPError("/readyz never left 200")
    }

    /// Call and upstream deadlines far beyond the upstream delays used here,
    /// so only the shutdown decides how a call ends.
    static func patient(_ extra: [String: String]) -> [String: String] {
        var environment = ["GATEWAY_REQUEST_TIMEOUT_MS": "600000", "UPSTREAM_TIMEOUT_MS": "600000", "UPSTREAM_RETRIES": "0"]
        environment.merge(extra) { _, new in new }
        return environment
    }

    @Test func sigtermLetsTheCallInFlightFinish() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.delay(milliseconds: 1500))
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": "60000"])))

        // A keep-alive connection, accepted before the listener closes.
        let probe = try TestHTTPConnection(port: gateway.port)
        let ready = try await probe.request("GET", "/readyz", contentType: nil)
        #expect(ready.status == 200)

        async let call = gateway.rpc(MetricsTests.fetch(["premium_monthly"]), headers: [("X-Request-Id", "in-flight-call")])
        try await waitForEvent("the upstream to receive the call") { upstream.upstream.requestCount(for: "premium_monthly") == 1 }
        gateway.sendSignal(SIGTERM)
        try #require(await gateway.waitForLine { $0.contains(#""msg":"shutting down""#) } != nil)

        let draining = try await Self.readyzUntilDraining(on: probe)
        #expect(draining.status == 503)
        #expect(try parseJSON(draining.body)["status"] == "draining")
        #expect(draining.header("Connection")?.lowercased() == "close")

        let response = try await call
        #expect(response.status == 200)
        #expect(response.header("X-Request-Id") == "in-flight-call")
        let body = try parseJSON(response.body)
        #expect(body["result"]?["products"]?[0]?["productIdentifier"] == "premium_monthly")
        #expect(await gateway.waitForExit() == 0)
        #expect(gateway.jsonLines.contains { $0["msg"] == "stopped" })
        // The call was never cut short.
        #expect(!gateway.jsonLines.contains { $0["outcome"] == "cancelled" })
    }

    @Test func newConnectionsAreRefusedWhileDraining() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.delay(milliseconds: 1500))
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": "60000"])))
        let probe = try TestHTTPConnection(port: gateway.port)
        #expect(try await probe.request("GET", "/healthz", contentType: nil).status == 200)

        async let call = gateway.rpc(MetricsTests.fetch(["coins_100"]))
        try await waitForEvent("the upstream to receive the call") { upstream.upstream.requestCount(for: "coins_100") == 1 }
        gateway.sendSignal(SIGTERM)
        _ = try await Self.readyzUntilDraining(on: probe)
        // /readyz turns 503 first, then the listeners close: soon a new
        // connection cannot be made, or is dropped unanswered, while the
        // call is still in flight.
        var refused = false
        for _ in 0..<500 where !refused {
            do {
                _ = try await gateway.get("/healthz")
                try await Task.sleep(for: .milliseconds(10))
            } catch {
                refused = true
            }
        }
        #expect(refused)
        let response = try await call
        #expect(response.status == 200)
        #expect(try parseJSON(response.body)["result"] != nil)
        #expect(await gateway.waitForExit() == 0)
    }

    /// Every answer is written out before the connections close, however
    /// many calls were in flight.
    @Test func manyCallsInFlightAllGetTheirAnswers() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.delay(milliseconds: 1000))
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": "60000"])))
        let identifiers = ["premium_monthly", "premium_yearly", "premium_weekly", "boost_7days", "family_monthly", "coins_100", "coins_550", "coins_1200"]
        try await withThrowingTaskGroup(of: (String, RawHTTPResponse).self) { group in
            for (index, identifier) in (identifiers + identifiers).enumerated() {
                group.addTask {
                    let country = index < identifiers.count ? "DE" : "FR"
                    return (identifier, try await gateway.rpc(MetricsTests.fetch([identifier], country: country)))
                }
            }
            try await waitForEvent("every upstream request") { upstream.upstream.requests.count == 2 * identifiers.count }
            gateway.sendSignal(SIGTERM)
            for try await (identifier, response) in group {
                #expect(response.status == 200)
                #expect(try parseJSON(response.body)["result"]?["products"]?[0]?["productIdentifier"] == .string(identifier))
            }
        }
        #expect(await gateway.waitForExit() == 0)
    }

    @Test func graceShorterThanTheCallCancelsIt() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.delay(milliseconds: 10000))
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": "300"])))

        async let call = gateway.rpc(MetricsTests.fetch(["premium_yearly"]), headers: [("X-Request-Id", "cut-short")])
        try await waitForEvent("the upstream to receive the call") { upstream.upstream.requestCount(for: "premium_yearly") == 1 }
        gateway.sendSignal(SIGTERM)

        let response = try await call
        #expect(response.status == 200)
        let error = try parseJSON(response.body)["error"]
        #expect(error?["code"] == -32005)
        #expect(error?["data"]?["reason"] == "cancelled")
        #expect(error?["data"]?["retryable"] == true)
        #expect(error?["data"]?["requestId"] == "cut-short")
        #expect(await gateway.waitForExit() == 0)
        #expect(gateway.jsonLines.contains { $0["requestId"] == "cut-short" && $0["outcome"] == "cancelled" })
    }

    @Test func sigintDrainsToo() async throws {
        let gateway = try await GatewayProcess.start()
        #expect(try await gateway.get("/readyz").status == 200)
        gateway.sendSignal(SIGINT)
        #expect(await gateway.waitForExit() == 0)
        #expect(gateway.jsonLines.contains { $0["msg"] == "shutting down" && $0["signal"] == "SIGINT" })
    }

    @Test func aSecondSignalExitsAtOnce() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.hang)
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": "600000"])))
        async let call: RawHTTPResponse? = try? gateway.rpc(MetricsTests.fetch(["coins_1200"]))
        try await waitForEvent("the upstream to receive the call") { upstream.upstream.requestCount(for: "coins_1200") == 1 }
        gateway.sendSignal(SIGTERM)
        try #require(await gateway.waitForLine { $0.contains(#""msg":"shutting down""#) } != nil)
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 1)
        _ = await call
        #expect(gateway.jsonLines.contains { $0["level"] == "critical" && $0["msg"] == "second SIGTERM, exiting now" })
        #expect(gateway.jsonLines.count == gateway.stderrLines.count, "\(gateway.stderrLines)")
    }

    @Test func aConfigurationErrorNamesTheVariable() async throws {
        let result = try await GatewayProcess.run(["GATEWAY_MAX_IDS": "abc"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("GATEWAY_MAX_IDS"))
        #expect(result.stderr.contains("abc"))

        let flag = try await GatewayProcess.run(arguments: ["--max-batch", "lots"])
        #expect(flag.status != 0)
        #expect(flag.stderr.contains("GATEWAY_MAX_BATCH"))

        let url = try await GatewayProcess.run(["ONSIDE_UPSTREAM_URL": "http://localhost:1", "ONSIDE_APP_ID": "demo"])
        #expect(url.status != 0)
        #expect(url.stderr.contains("ONSIDE_UPSTREAM_URL"))
    }

    @Test func aPortInUseFailsStartUp() async throws {
        let gateway = try await GatewayProcess.start()
        // The listeners of one process share their port through SO_REUSEPORT;
        // a second process must not join it and silently take half the traffic.
        let second = try await GatewayProcess.run(["GATEWAY_LISTEN": "127.0.0.1:\(gateway.port)", "GATEWAY_WORKERS": "1"])
        #expect(second.status != 0)
        #expect(second.stderr.contains("GATEWAY_LISTEN"))
        #expect(second.stderr.contains("in use"))
        // Standard error is the log by then: JSON lines only.
        for line in second.stderr.split(separator: "\n") {
            #expect(GatewayProcess.jsonObject(String(line)) != nil, "not JSON: \(line)")
        }
        #expect(try await gateway.get("/healthz").status == 200)
    }

    @Test func versionPrintsTheVersion() async throws {
        let result = try await GatewayProcess.run(arguments: ["--version"])
        #expect(result.status == 0)
        let version = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.split(separator: ".").count == 3, "version: \(version)")
        #expect(version.split(separator: ".").allSatisfy { Int($0) != nil }, "version: \(version)")
    }

    @Test(arguments: [["--help"], ["serve", "--help"]])
    func helpListsEveryFlagWithItsVariable(arguments: [String]) async throws {
        let result = try await GatewayProcess.run(arguments: arguments)
        #expect(result.status == 0)
        // Help wraps lines; compare with the whitespace folded.
        let help = result.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let missing = ConfigurationVariable.allCases.filter { variable in
            !help.contains("--\(variable.flag) ") || !help.contains("Env: \(variable.rawValue).")
                || !help.contains("Default: \(variable.defaultDescription).")
        }
        #expect(missing.isEmpty, "\(arguments) lacks flag, variable or default of \(missing.map(\.rawValue))")
    }
}
