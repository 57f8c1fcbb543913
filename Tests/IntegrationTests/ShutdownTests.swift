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
            // Polls for the event (/readyz leaving 200), 5 s at most: the sleep is only the poll's interval.
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
        // A grace far longer than the call: the process must exit once the
        // call is answered, not when the grace ends.
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": "600000"])))

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
        // Answered while draining: the client must not reuse the connection.
        #expect(response.header("Connection")?.lowercased() == "close")
        let body = try parseJSON(response.body)
        #expect(body["result"]?["products"]?[0]?["productIdentifier"] == "premium_monthly")
        #expect(await gateway.waitForExit(killingAfter: .seconds(30)) == 0)
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
                // Polls for the event (the listener closed), 5 s at most: the sleep is only the poll's interval.
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
            // Concurrent calls share upstream calls: each identifier is
            // asked once per country, in however many calls.
            try await waitForEvent("every upstream request") { identifiers.allSatisfy { upstream.upstream.requestCount(for: $0) == 2 } }
            gateway.sendSignal(SIGTERM)
            for try await (identifier, response) in group {
                #expect(response.status == 200)
                #expect(try parseJSON(response.body)["result"]?["products"]?[0]?["productIdentifier"] == .string(identifier))
            }
        }
        #expect(await gateway.waitForExit() == 0)
    }

    /// An answer many times libevent's 16 KiB single write, for a call in
    /// flight at SIGTERM, reaches the client whole before the connections
    /// close.
    @Test func aLargeAnswerInFlightIsWrittenOutWhole() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.delay(milliseconds: 1000))
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": "600000"])))
        let identifiers = ["premium_monthly", "premium_yearly", "premium_weekly", "boost_7days", "family_monthly", "coins_100", "coins_550", "coins_1200"]
        let batch = "[" + (1...50).map { MetricsTests.fetch(identifiers, id: $0) }.joined(separator: ",") + "]"

        async let call = gateway.rpc(batch)
        try await waitForEvent("the upstream to receive the fetch") { upstream.upstream.requests.count == 1 }
        gateway.sendSignal(SIGTERM)

        let response = try await call
        #expect(response.status == 200)
        #expect(response.body.count > 8 * 16384, "\(response.body.count) bytes")
        let answers = try #require(try parseJSON(response.body).arrayValue)
        #expect(answers.count == 50)
        #expect(answers.allSatisfy { $0["result"]?["products"]?.arrayValue?.count == identifiers.count })
        #expect(await gateway.waitForExit(killingAfter: .seconds(30)) == 0)
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

    /// The grace ends while the upstream never answers: the call is
    /// answered `cancelled` and the process exits 0 without waiting for the
    /// upstream exchange (its deadline is ten minutes away). A grace of 0
    /// cancels at once.
    @Test(arguments: ["300", "0"])
    func graceOverExitsWhileTheUpstreamHangs(grace: String) async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.hang)
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": grace])))

        async let call = gateway.rpc(MetricsTests.fetch(["boost_7days"]), headers: [("X-Request-Id", "upstream-hangs")])
        try await waitForEvent("the upstream to receive the call") { upstream.upstream.requestCount(for: "boost_7days") == 1 }
        gateway.sendSignal(SIGTERM)

        let response = try await call
        #expect(response.status == 200)
        #expect(response.header("Connection")?.lowercased() == "close")
        let error = try parseJSON(response.body)["error"]
        #expect(error?["code"] == -32005)
        #expect(error?["data"]?["reason"] == "cancelled")
        #expect(error?["data"]?["requestId"] == "upstream-hangs")
        #expect(await gateway.waitForExit(killingAfter: .seconds(20)) == 0)
        #expect(gateway.jsonLines.contains { $0["msg"] == "shutdown grace over; cancelling calls in flight" && $0["level"] == "warning" })
        #expect(gateway.jsonLines.contains { $0["msg"] == "stopped" })
    }

    /// A fetch waiting for an upstream connection (`UPSTREAM_CONCURRENCY`
    /// reached) when the grace ends: its caller is answered `cancelled`, the
    /// fetch never reaches the upstream, and the process exits 0.
    @Test func graceOverCancelsACallWaitingForALease() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.hang)
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient([
            "GATEWAY_SHUTDOWN_GRACE_MS": "300",
            "UPSTREAM_CONCURRENCY": "1",
            "UPSTREAM_MAX_IDS": "1",
        ])))

        // Two identifiers, two fetches, one lease: one fetch hangs upstream,
        // the other waits for the lease.
        async let call = gateway.rpc(MetricsTests.fetch(["coins_100", "coins_550"]), headers: [("X-Request-Id", "lease-wait")])
        try await waitForEvent("the upstream to receive one fetch") { upstream.upstream.requests.count == 1 }
        gateway.sendSignal(SIGTERM)

        let response = try await call
        let error = try parseJSON(response.body)["error"]
        #expect(error?["code"] == -32005)
        #expect(error?["data"]?["reason"] == "cancelled")
        #expect(error?["data"]?["requestId"] == "lease-wait")
        #expect(await gateway.waitForExit(killingAfter: .seconds(20)) == 0)
        #expect(upstream.upstream.requests.count == 1)
    }

    /// A fetch whose caller left at its deadline still runs: the graceful
    /// shutdown waits for it, within the grace, before it closes the
    /// upstream pool and stops the loops. (In process: the metrics show the
    /// exchange ended with the upstream's 200.)
    @Test func gracefulShutdownWaitsForAFetchWhoseCallerLeft() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.delay(milliseconds: 1000))
        let gateway = try RunningGateway.start(upstream.gatewayEnvironment([
            "GATEWAY_REQUEST_TIMEOUT_MS": "200", "UPSTREAM_TIMEOUT_MS": "600000", "UPSTREAM_RETRIES": "0",
        ]))
        let response = try await gateway.rpc(MetricsTests.fetch(["premium_weekly"]))
        #expect(try parseJSON(response.body)["error"]?["data"]?["reason"] == "cancelled")
        #expect(upstream.upstream.requestCount(for: "premium_weekly") == 1)

        await gateway.stop()
        let metrics = String(decoding: gateway.application.metrics.exposition(), as: UTF8.self)
        #expect(metrics.contains(#"gateway_upstream_requests_total{status="200"} 1"#), "\(metrics)")
    }

    @Test func sigintDrainsToo() async throws {
        let gateway = try await GatewayProcess.start()
        #expect(try await gateway.get("/readyz").status == 200)
        gateway.sendSignal(SIGINT)
        #expect(await gateway.waitForExit() == 0)
        #expect(gateway.jsonLines.contains { $0["msg"] == "shutting down" && $0["signal"] == "SIGINT" })
    }

    /// A signal sent the moment the port is announced, which may be before
    /// the service group has trapped it, still drains and exits 0.
    @Test func aSignalRightAfterListeningStillDrains() async throws {
        let gateway = try await GatewayProcess.start()
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit(killingAfter: .seconds(20)) == 0)
        #expect(gateway.jsonLines.contains { $0["msg"] == "shutting down" && $0["signal"] == "SIGTERM" })
        #expect(gateway.jsonLines.contains { $0["msg"] == "stopped" })
    }

    /// A second SIGTERM or SIGINT while draining: exit at once, status 1.
    @Test(arguments: [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")])
    func aSecondSignalExitsAtOnce(second: Int32, name: String) async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setStandingFault(.hang)
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.patient(["GATEWAY_SHUTDOWN_GRACE_MS": "600000"])))
        async let call: RawHTTPResponse? = try? gateway.rpc(MetricsTests.fetch(["coins_1200"]))
        try await waitForEvent("the upstream to receive the call") { upstream.upstream.requestCount(for: "coins_1200") == 1 }
        gateway.sendSignal(SIGTERM)
        try #require(await gateway.waitForLine { $0.contains(#""msg":"shutting down""#) } != nil)
        gateway.sendSignal(second)
        // At once: the grace is ten minutes and the upstream never answers.
        #expect(await gateway.waitForExit(killingAfter: .seconds(20)) == 1)
        _ = await call
        #expect(gateway.jsonLines.contains { $0["level"] == "critical" && $0["msg"] == .string("second \(name), exiting now") })
        #expect(!gateway.jsonLines.contains { $0["msg"] == "stopped" })
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

    @Test(arguments: ["abc", "-1", "3600001", "1.5"])
    func aBadShutdownGraceStopsStartUp(value: String) async throws {
        let result = try await GatewayProcess.run(["GATEWAY_SHUTDOWN_GRACE_MS": value])
        #expect(result.status == 2)
        #expect(result.stderr.contains("GATEWAY_SHUTDOWN_GRACE_MS"))
        #expect(result.stderr.contains(value))
        #expect(!result.stderr.contains("listening"))

        let flag = try await GatewayProcess.run(arguments: ["--shutdown-grace-ms=\(value)"])
        #expect(flag.status == 2)
        #expect(flag.stderr.contains("GATEWAY_SHUTDOWN_GRACE_MS"))
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

    /// `0.1.0 (commit <12 hex digits>)`: the commit HEAD was at when the
    /// binary was built (Plugins/BuildCommit), which in a checkout is the
    /// one the tests run from.
    @Test func versionPrintsTheVersionAndTheCommit() async throws {
        let result = try await GatewayProcess.run(arguments: ["--version"])
        #expect(result.status == 0)
        let version = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let git = try ChildProcess.spawn("/usr/bin/git", arguments: ["-C", root.path, "rev-parse", "--short=12", "HEAD"], environment: GatewayProcess.baseEnvironment())
        let status = await git.0.exitStatus()
        await git.2.waitForEnd()
        let head = git.2.lines.first ?? ""
        if FileManager.default.fileExists(atPath: root.appendingPathComponent("BUILD_COMMIT").path) || status != 0 {
            // Built from a BUILD_COMMIT file, or outside a git checkout.
            #expect(version.hasPrefix("0.1.0 (commit "), "version: \(version)")
        } else {
            #expect(head.count == 12 && head.allSatisfy(\.isHexDigit), "git: \(head)")
            #expect(version == "0.1.0 (commit \(head))")
        }
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
