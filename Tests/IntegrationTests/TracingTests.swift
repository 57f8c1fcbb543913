import EventTransport
import Foundation
import JSONRPC
import MockUpstream
import Testing
import Tracing

/// Contract section "Tracing": the real binary, the TLS test upstream
/// (which records the `traceparent` it receives) and a real OTLP/HTTP
/// receiver (``TestCollector``).
@Suite struct TracingTests {
    static let callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let callerSpan = "00f067aa0ba902b7"

    /// Fast batches, so the spans of a call arrive within the test.
    static func exporting(to collector: TestCollector, _ extra: [String: String] = [:]) -> [String: String] {
        var environment = [
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_BSP_EXPORT_TIMEOUT": "1000",
            "LOG_LEVEL": "info",
        ]
        environment.merge(extra) { _, new in new }
        return environment
    }

    static func traceparent(_ header: String?) -> SpanContext? {
        header.flatMap(TraceParent.parse)
    }

    @Test func aValidTraceparentIsContinuedToTheUpstreamIntoTheLogsAndTheSpans() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let collector = try TestCollector()
        defer { collector.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.exporting(to: collector, [
            "OTEL_SERVICE_NAME": "gateway-under-test",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-collector-key=not%20logged-7f3a",
        ])))
        let response = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"], id: 41), headers: [
            ("traceparent", "00-\(Self.callerTrace)-\(Self.callerSpan)-01"), ("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
        ])
        #expect(try parseJSON(response.body)["result"] != nil)

        // The upstream request: the caller's trace and flag, a span id of
        // its own, the caller's tracestate unchanged.
        let request = try #require(upstream.upstream.requests.last)
        let sent = try #require(Self.traceparent(request.headers["traceparent"]))
        #expect(sent.traceID.hex == Self.callerTrace)
        #expect(sent.spanID.hex != Self.callerSpan)
        #expect(sent.flags.isSampled)
        #expect(request.headers["tracestate"] == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")

        // The spans: SERVER under the caller's, CLIENT under the SERVER.
        let spans = try await collector.waitForSpans("a SERVER and a CLIENT span") { spans in
            spans.contains { $0.kind == 2 } && spans.contains { $0.kind == 3 }
        }
        let server = try #require(spans.first { $0.kind == 2 })
        let client = try #require(spans.first { $0.kind == 3 })
        #expect(server.name == "products.fetch")
        #expect(server.traceID == Self.callerTrace)
        #expect(server.parentSpanID == Self.callerSpan)
        #expect(server.attributes["rpc.system"] == "jsonrpc")
        #expect(server.attributes["rpc.method"] == "products.fetch")
        #expect(server.attributes["rpc.jsonrpc.version"] == "2.0")
        #expect(server.attributes["rpc.jsonrpc.request_id"] == "41")
        #expect(server.statusCode == 0)
        #expect(client.traceID == Self.callerTrace)
        #expect(client.spanID == sent.spanID.hex)
        #expect(client.parentSpanID == server.spanID)
        #expect(client.name == "GET")
        #expect(client.attributes["http.request.method"] == "GET")
        #expect(client.attributes["server.address"] == "localhost")
        #expect(client.attributes["server.port"] == String(upstream.port))
        #expect(client.attributes["http.response.status_code"] == "200")
        #expect(client.attributes["url.full"]?.hasPrefix("https://localhost:\(upstream.port)/v1/apps/demo/products?ids=premium_monthly") == true)
        #expect(server.resource["service.name"] == "gateway-under-test")
        #expect(server.resource["service.version"]?.isEmpty == false)
        #expect(server.resource["service.instance.id"]?.count == 32)
        let export = try #require(collector.exports.first)
        #expect(export.path == "/v1/traces")
        #expect(export.headers["Content-Type"] == "application/x-protobuf")
        #expect(export.headers["x-collector-key"] == "not logged-7f3a")

        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        // The call's log line: its trace id and its own span's id.
        let line = try #require(gateway.jsonLines.first { $0["msg"] == "rpc call" })
        #expect(line["traceId"] == .string(Self.callerTrace))
        #expect(line["spanId"] == .string(server.spanID))
        #expect(!gateway.stderrLines.contains { $0.contains("not logged-7f3a") || $0.contains("not%20logged") })
    }

    @Test func aRetryIsACLIENTSpanOfItsOwnAndABatchElementASERVERSpan() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let collector = try TestCollector()
        defer { collector.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.exporting(to: collector, ["UPSTREAM_RETRIES": "1"])))
        upstream.upstream.enqueue(.status(503))
        let retried = "22222222222222222222222222222222"
        _ = try await gateway.rpc(MetricsTests.fetch(["coins_100"]), headers: [("traceparent", "00-\(retried)-\(Self.callerSpan)-01")])
        let sent = upstream.upstream.requests.suffix(2).compactMap { Self.traceparent($0.headers["traceparent"]) }
        #expect(sent.count == 2 && sent[0].spanID != sent[1].spanID && sent.allSatisfy { $0.traceID.hex == retried })

        let batchTrace = "33333333333333333333333333333333"
        let batch = "[" + MetricsTests.fetch(["premium_monthly"], id: 1) + "," + MetricsTests.fetch(["coins_550"], id: 2) + "]"
        _ = try await gateway.rpc(batch, headers: [("traceparent", "00-\(batchTrace)-\(Self.callerSpan)-01")])

        let spans = try await collector.waitForSpans("the retry's and the batch's spans") { spans in
            spans.filter { $0.traceID == retried && $0.kind == 3 }.count == 2 && spans.filter { $0.traceID == batchTrace && $0.kind == 2 }.count == 2
        }
        let server = try #require(spans.first { $0.traceID == retried && $0.kind == 2 })
        let attempts = spans.filter { $0.traceID == retried && $0.kind == 3 }.sorted { $0.attributes["http.response.status_code"] ?? "" > $1.attributes["http.response.status_code"] ?? "" }
        #expect(attempts.map { $0.attributes["http.response.status_code"] } == ["503", "200"])
        #expect(attempts[0].attributes["error.type"] == "503" && attempts[0].statusCode == 2)
        #expect(attempts[1].attributes["error.type"] == nil && attempts[1].statusCode == 0)
        #expect(attempts.allSatisfy { $0.parentSpanID == server.spanID })
        #expect(Set(attempts.map(\.spanID)) == Set(sent.map(\.spanID.hex)))

        let elements = spans.filter { $0.traceID == batchTrace && $0.kind == 2 }
        #expect(Set(elements.map(\.spanID)).count == 2)
        #expect(elements.allSatisfy { $0.parentSpanID == Self.callerSpan })
        #expect(Set(elements.compactMap { $0.attributes["rpc.jsonrpc.request_id"] }) == ["1", "2"])
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        let lines = gateway.jsonLines.filter { $0["msg"] == "rpc call" && $0["traceId"] == .string(batchTrace) }
        #expect(Set(lines.compactMap { $0["spanId"]?.stringValue }) == Set(elements.map(\.spanID)))
    }

    @Test func invalidTraceparentsStartANewTraceAndDropTheTracestate() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment())
        let invalid = [
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-\(Self.callerTrace)-0000000000000000-01",
            "ff-\(Self.callerTrace)-\(Self.callerSpan)-01",
            "00-\(Self.callerTrace)-\(Self.callerSpan)-1",
            "00-\(Self.callerTrace)-\(Self.callerSpan)-01-extra",
        ]
        let ids = ["premium_monthly", "coins_100", "coins_550", "coins_1200", "premium_yearly", "retired_pack"]
        var seen = Set<String>()
        for (header, id) in zip(invalid, ids) {
            _ = try await gateway.rpc(MetricsTests.fetch([id]), headers: [("traceparent", header), ("tracestate", "congo=t61rcWkgMzE")])
            let request = try #require(upstream.upstream.requests.last)
            #expect(request.identifiers == [id])
            let sent = try #require(Self.traceparent(request.headers["traceparent"]), "\(header)")
            #expect(sent.traceID.hex != Self.callerTrace, "\(header) was continued")
            #expect(sent.flags.isSampled)
            #expect(request.headers["tracestate"] == nil, "\(header)")
            seen.insert(sent.traceID.hex)
        }
        #expect(seen.count == invalid.count)

        // Two traceparent fields are one invalid value.
        _ = try await gateway.rpc(MetricsTests.fetch(["coins_100"], country: "FR"), headers: [
            ("traceparent", "00-\(Self.callerTrace)-\(Self.callerSpan)-01"), ("traceparent", "00-\(Self.callerTrace)-\(Self.callerSpan)-01"),
        ])
        #expect(Self.traceparent(upstream.upstream.requests.last?.headers["traceparent"])?.traceID.hex != Self.callerTrace)

        // A higher version is read by its first four fields.
        _ = try await gateway.rpc(MetricsTests.fetch(["coins_100"], country: "JP"), headers: [("traceparent", "cc-\(Self.callerTrace)-\(Self.callerSpan)-01-future")])
        #expect(Self.traceparent(upstream.upstream.requests.last?.headers["traceparent"])?.traceID.hex == Self.callerTrace)
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
    }

    @Test func aSampledOutCallExportsNothingAndPassesItsFlagOn() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let collector = try TestCollector()
        defer { collector.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.exporting(to: collector)))
        _ = try await gateway.rpc(MetricsTests.fetch(["coins_100"]), headers: [("traceparent", "00-\(Self.callerTrace)-\(Self.callerSpan)-00")])
        let sent = try #require(Self.traceparent(upstream.upstream.requests.last?.headers["traceparent"]))
        #expect(sent.traceID.hex == Self.callerTrace)
        #expect(!sent.flags.isSampled)
        // A sampled call after it is exported; the sampled-out one never is.
        let sampledTrace = "11111111111111111111111111111111"
        _ = try await gateway.rpc(MetricsTests.fetch(["coins_550"]), headers: [("traceparent", "00-\(sampledTrace)-\(Self.callerSpan)-01")])
        let spans = try await collector.waitForSpans("the sampled call's spans") { spans in spans.contains { $0.traceID == sampledTrace && $0.kind == 3 } }
        #expect(!spans.contains { $0.traceID == Self.callerTrace })
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        #expect(!collector.spans.contains { $0.traceID == Self.callerTrace })

        // OTEL_TRACES_SAMPLER=always_off: nothing at all, flag 00 upstream.
        let quiet = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.exporting(to: collector, ["OTEL_TRACES_SAMPLER": "always_off"])))
        let before = collector.spans.count
        _ = try await quiet.rpc(MetricsTests.fetch(["coins_1200"]))
        #expect(Self.traceparent(upstream.upstream.requests.last?.headers["traceparent"])?.flags.isSampled == false)
        quiet.sendSignal(SIGTERM)
        #expect(await quiet.waitForExit() == 0)
        #expect(collector.spans.count == before)
    }

    @Test func aHerdMakesOneUpstreamRequestOneSpanPerCallerAndLinks() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let collector = try TestCollector()
        defer { collector.stop() }
        let gateway = try await GatewayProcess.start(upstream.gatewayEnvironment(Self.exporting(to: collector, [
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "GATEWAY_REQUEST_TIMEOUT_MS": "20000", "UPSTREAM_TIMEOUT_MS": "20000",
        ])))
        // The fetch is held by the upstream until every other caller has
        // joined it (counted as coalesced), however slow the machine.
        upstream.upstream.setStandingFault(.held)
        let callers = (0..<12).map { index in String(format: "%032x", index + 1) }
        async let answered: Void = withThrowingTaskGroup(of: Void.self) { group in
            for trace in callers {
                group.addTask {
                    let response = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"]), headers: [("traceparent", "00-\(trace)-\(Self.callerSpan)-01")])
                    #expect(try parseJSON(response.body)["result"] != nil)
                }
            }
            try await group.waitForAll()
        }
        try await UpstreamScenario.waitFor("every other caller joined the fetch") {
            (try? await gateway.metricValue("gateway_coalesced_identifiers_total")) == Double(callers.count - 1)
        }
        #expect(upstream.upstream.answerHeld() == 1)
        try await answered
        #expect(upstream.upstream.requestCount(for: "premium_monthly") == 1)
        let carried = try #require(Self.traceparent(upstream.upstream.requests.last?.headers["traceparent"]))
        #expect(callers.contains(carried.traceID.hex))

        let spans = try await collector.waitForSpans("one SERVER span per caller") { spans in spans.filter { $0.kind == 2 }.count == callers.count }
        #expect(collector.exports.allSatisfy { $0.headers["Content-Type"] == "application/json" })
        let servers = spans.filter { $0.kind == 2 }
        #expect(Set(servers.map(\.traceID)) == Set(callers))
        let starter = try #require(servers.first { $0.traceID == carried.traceID.hex })
        let clients = spans.filter { $0.kind == 3 }
        #expect(clients.count == 1)
        #expect(clients.first?.parentSpanID == starter.spanID)
        #expect(starter.links.isEmpty)
        for server in servers where server.traceID != starter.traceID {
            #expect(server.links.contains { $0.traceID == starter.traceID && $0.spanID == starter.spanID }, "\(server.traceID) has no link to the fetch's call")
        }
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
    }

    @Test(arguments: [TestCollector.Mode.refuse(503), .hang, .refuse(400)])
    func aCollectorThatFailsCostsTheCallsNothing(_ mode: TestCollector.Mode) async throws {
        let collector = try TestCollector()
        defer { collector.stop() }
        collector.setMode(mode)
        let started = ContinuousClock.now
        let gateway = try await GatewayProcess.start(Self.exporting(to: collector, ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4", "OTEL_BSP_EXPORT_TIMEOUT": "300"]))
        for index in 0..<40 {
            let response = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"], id: index))
            #expect(try parseJSON(response.body)["result"] != nil)
        }
        try await waitForEvent("an export attempt") { !collector.exports.isEmpty }
        let text = try await gateway.get("/metrics").bodyText
        #expect(text.contains("gateway_spans_dropped_total"))
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
        // Logged, at most once per 10 s.
        let failures = gateway.jsonLines.filter { $0["msg"] == "trace export failed; calls are not affected" }
        let tenSecondPeriods = Int((ContinuousClock.now - started) / .seconds(10)) + 1
        #expect((1...tenSecondPeriods).contains(failures.count), "\(failures)")
        #expect(failures.allSatisfy { $0["detail"]?.stringValue?.contains("UPSTREAM") == false })
    }

    @Test func anUnreachableCollectorCostsTheCallsNothingAndAFullQueueDrops() async throws {
        let port = try GatewayProcess.freePort()
        let gateway = try await GatewayProcess.start([
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:\(port)/custom/path",
            "OTEL_BSP_MAX_QUEUE_SIZE": "2", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "2", "OTEL_BSP_SCHEDULE_DELAY": "60000",
        ])
        for index in 0..<20 {
            let response = try await gateway.rpc(MetricsTests.fetch(["premium_monthly"], id: index))
            #expect(try parseJSON(response.body)["result"] != nil)
        }
        let metrics = try await gateway.get("/metrics").bodyText
        let dropped = metrics.split(separator: "\n").first { $0.hasPrefix("gateway_spans_dropped_total ") }
        let count = try #require(dropped.flatMap { Double($0.split(separator: " ").last ?? "") })
        #expect(count >= 10, "\(metrics)")
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)
    }

    @Test func anHTTPSCollectorIsVerifiedAsTheUpstreamIs() async throws {
        let certificates = TestCertificates.shared
        let collector = try TestCollector(tls: try TLSServerContext(certificateChainFile: certificates.localhostCert, privateKeyFile: certificates.localhostKey))
        defer { collector.stop() }
        let trusted = try await GatewayProcess.start([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://localhost:\(collector.port)", "OTEL_EXPORTER_OTLP_CERTIFICATE": certificates.caFile,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        ])
        _ = try await trusted.rpc(MetricsTests.fetch(["premium_monthly"]))
        _ = try await collector.waitForSpans("a span over TLS") { !$0.isEmpty }
        trusted.sendSignal(SIGTERM)
        #expect(await trusted.waitForExit() == 0)

        // Another CA: the collector is refused, the call is not.
        let before = collector.exports.count
        let untrusting = try await GatewayProcess.start([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://localhost:\(collector.port)", "OTEL_EXPORTER_OTLP_CERTIFICATE": certificates.rogueCAFile,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        ])
        let response = try await untrusting.rpc(MetricsTests.fetch(["premium_monthly"]))
        #expect(try parseJSON(response.body)["result"] != nil)
        _ = await untrusting.waitForLine(where: { $0.contains("trace export failed") })
        untrusting.sendSignal(SIGTERM)
        #expect(await untrusting.waitForExit() == 0)
        #expect(collector.exports.count == before)
        #expect(untrusting.stderrLines.contains { $0.contains("certificate verification failed") && $0.contains("OTEL_EXPORTER_OTLP_CERTIFICATE") })
    }

    @Test(arguments: [
        ("OTEL_TRACES_SAMPLER", "sometimes"), ("OTEL_TRACES_SAMPLER_ARG", "1.5"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4318"), ("OTEL_BSP_MAX_QUEUE_SIZE", "0"), ("OTEL_SDK_DISABLED", "maybe"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:pw@collector:4318"),
    ])
    func badOTELSettingsStopStartUpNamingTheVariable(_ setting: (String, String)) async throws {
        var environment = [setting.0: setting.1]
        if setting.0 == "OTEL_TRACES_SAMPLER_ARG" { environment["OTEL_TRACES_SAMPLER"] = "traceidratio" }
        let result = try await GatewayProcess.run(environment)
        #expect(result.status == 2)
        #expect(result.stderr.contains(setting.0), "\(result.stderr)")
        #expect(!result.stderr.contains("pw@"))
    }
}
