import Foundation
import JSONRPC
import MockUpstream
import Testing

/// `LOG_LEVEL=debug`: one `products.fetch steps` line per call, saying
/// which tier answered each identifier and how long each step took
/// (in-process gateways log at debug).
@Suite struct CallStepsTests {
    /// The steps line of `requestID` in `logs`.
    static func stepsLine(_ logs: LogCapture, _ requestID: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
        let lines = logs.all.compactMap(GatewayProcess.jsonObject).filter { $0["msg"] == "products.fetch steps" && $0["requestId"]?.stringValue == requestID }
        #expect(lines.count == 1, "steps lines of \(requestID): \(lines)", sourceLocation: sourceLocation)
        let line = try #require(lines.first, sourceLocation: sourceLocation)
        #expect(line["level"] == "debug", sourceLocation: sourceLocation)
        return line
    }

    /// The line's tier of each identifier.
    static func tiers(_ line: JSONObject) -> [String: String] {
        var tiers: [String: String] = [:]
        for (identifier, tier) in line["tiers"]?.objectValue ?? JSONObject() { tiers[identifier] = tier.stringValue }
        return tiers
    }

    /// The names of the line's steps, in order.
    static func stepNames(_ line: JSONObject) -> [String] {
        line["steps"]?.arrayValue?.compactMap { $0["step"]?.stringValue } ?? []
    }

    @Test(.timeLimit(.minutes(1))) func memoryTheUpstreamAndAJoinedFetchAreToldApart() async throws {
        // Attempts and calls outlast the held fetch below, however slow the
        // machine (a 1.5 s delay ran past the 2 s attempt under ThreadSanitizer).
        let environment = ["UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "30000", "GATEWAY_REQUEST_TIMEOUT_MS": "40000"]
        try await UpstreamScenario.run(environment: environment) { upstream, gateway in
            upstream.upstream.setCacheControl("max-age=30")
            let first = try await gateway.fetchProducts(["premium_monthly", "unknown_x"], headers: [("X-Request-Id", "trace-1")])
            #expect(first.productIDs == ["premium_monthly"])
            let cold = try Self.stepsLine(gateway.logs, "trace-1")
            #expect(Self.tiers(cold) == ["premium_monthly": "upstream", "unknown_x": "upstream"])
            #expect(Self.stepNames(cold) == ["memory", "upstream"])
            #expect(cold["outcome"] == "ok")
            for step in cold["steps"]?.arrayValue ?? [] {
                guard case .number(let text)? = step["ms"], let milliseconds = Double(text) else {
                    Issue.record("a step without ms: \(step)")
                    continue
                }
                #expect(milliseconds >= 0)
            }

            let second = try await gateway.fetchProducts(["premium_monthly", "coins_100", "unknown_x"], headers: [("X-Request-Id", "trace-2")])
            #expect(second.productIDs == ["premium_monthly", "coins_100"])
            let warm = try Self.stepsLine(gateway.logs, "trace-2")
            #expect(Self.tiers(warm) == ["premium_monthly": "memory", "coins_100": "upstream", "unknown_x": "memory"])

            // A call that joins a fetch another call started: the upstream
            // holds the fetch until the second call has joined it.
            upstream.upstream.enqueue(.held)
            async let starter = gateway.fetchProducts(["coins_550"], headers: [("X-Request-Id", "trace-starter")])
            try await UpstreamScenario.waitFor("the first call's upstream request") { upstream.upstream.heldCount == 1 }
            let coalescedBefore = try await gateway.metricValue("gateway_coalesced_identifiers_total") ?? -1
            async let joiner = gateway.fetchProducts(["coins_550"], headers: [("X-Request-Id", "trace-joiner")])
            try await UpstreamScenario.waitFor("the second call joined") {
                (try? await gateway.metricValue("gateway_coalesced_identifiers_total")) == coalescedBefore + 1
            }
            #expect(upstream.upstream.answerHeld() == 1)
            #expect(try await joiner.productIDs == ["coins_550"])
            #expect(try await starter.productIDs == ["coins_550"])
            #expect(upstream.upstream.requestCount(for: "coins_550") == 1)
            #expect(Self.tiers(try Self.stepsLine(gateway.logs, "trace-starter")) == ["coins_550": "upstream"])
            let joined = try Self.stepsLine(gateway.logs, "trace-joiner")
            #expect(Self.tiers(joined) == ["coins_550": "shared-fetch"])
            #expect(Self.stepNames(joined) == ["memory", "shared-fetch"])
        }
    }

    @Test func aFailedCallSaysNothingAnsweredIt() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0"]) { upstream, gateway in
            upstream.upstream.enqueue(.status(503))
            let failed = try await gateway.fetchProducts(["remove_ads"], headers: [("X-Request-Id", "trace-failed")])
            #expect(failed.reason == "serviceUnavailable")
            let line = try Self.stepsLine(gateway.logs, "trace-failed")
            #expect(Self.tiers(line) == ["remove_ads": "none"])
            #expect(line["outcome"] == "serviceUnavailable")
            let upstreamStep = line["steps"]?.arrayValue?.first { $0["step"] == "upstream" }
            #expect(upstreamStep?["failed"] == true, "\(line)")
        }
    }

    /// Another replica fetched it: this one's answer comes from Redis.
    @Test func theSharedTierIsNamed() async throws {
        try await SharedTierScenario.run { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            let fetched = try await gateways[0].fetchProducts(["premium_monthly"], headers: [("X-Request-Id", "trace-replica-1")])
            #expect(fetched.productIDs == ["premium_monthly"])
            // Stored after the answer (pipelined at the end of the turn).
            try await UpstreamScenario.waitFor("the entry stored") {
                (try? redis.cli("GET", "test-gw:v1:p:demo:DE:-:premium_monthly"))?.hasPrefix("OGW1") == true
            }
            let fromRedis = try await gateways[1].fetchProducts(["premium_monthly"], headers: [("X-Request-Id", "trace-replica-2")])
            #expect(fromRedis.productIDs == ["premium_monthly"])
            #expect(upstream.upstream.requestCount(for: "premium_monthly") == 1)
            let first = try Self.stepsLine(gateways[0].logs, "trace-replica-1")
            #expect(Self.tiers(first) == ["premium_monthly": "upstream"])
            #expect(Self.stepNames(first) == ["memory", "redis", "upstream"])
            let second = try Self.stepsLine(gateways[1].logs, "trace-replica-2")
            #expect(Self.tiers(second) == ["premium_monthly": "redis"])
            #expect(Self.stepNames(second) == ["memory", "redis"])
        }
    }
}
