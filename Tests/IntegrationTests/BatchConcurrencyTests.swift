import JSONRPC
import Testing

/// `GATEWAY_BATCH_CONCURRENCY`: batches are answered in turns, so the
/// memory their answers hold follows the setting, not the connections;
/// single calls never wait for a turn.
@Suite("Batch turns")
struct BatchConcurrencyTests {
    /// With one turn: a batch held up by the upstream keeps it, the next
    /// batch waits (`gateway_batches_waiting` 1) without reaching the
    /// upstream, a single call meanwhile is answered at once, and the
    /// waiting batch is answered in full once the first has been.
    @Test func aBatchWaitsForTheTurnOfTheOneBeforeItButASingleCallDoesNot() async throws {
        // The first batch holds the turn for its upstream attempt's 8 s, long
        // enough for a slow (sanitized) run to see the second one wait.
        let environment = ["GATEWAY_BATCH_CONCURRENCY": "1", "UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "8000", "GATEWAY_REQUEST_TIMEOUT_MS": "15000"]
        try await UpstreamScenario.run(environment: environment) { upstream, gateway in
            #expect(try await gateway.metricValue("gateway_batches_waiting") == 0)
            upstream.upstream.enqueue(.hang)
            async let first = gateway.rpc("[" + UpstreamScenario.request(["premium_monthly"], id: 1) + "]")
            try await UpstreamScenario.waitFor("the first batch's upstream request") { upstream.upstream.requests.count == 1 }

            async let second = gateway.rpc("[" + UpstreamScenario.request(["coins_100", "unknown_x"], id: 2) + "]")
            try await UpstreamScenario.waitFor("the second batch to wait for its turn") {
                (try? await gateway.metricValue("gateway_batches_waiting")) == 1
            }
            let single = try await gateway.fetchProducts(["remove_ads"])
            #expect(single.productIDs == ["remove_ads"])
            #expect(try await gateway.metricValue("gateway_batches_waiting") == 1)
            // The waiting batch has asked the upstream nothing yet.
            #expect(upstream.upstream.requestCount(for: "coins_100") == 0)
            #expect(upstream.upstream.requests.count == 2)

            let firstAnswers = try #require(try parseJSON(try await first.body).arrayValue)
            #expect(firstAnswers.count == 1)
            #expect(firstAnswers.first?["id"] == 1)
            #expect(firstAnswers.first?["error"]?["data"]?["reason"] == "connectionError")

            let secondAnswers = try #require(try parseJSON(try await second.body).arrayValue)
            #expect(secondAnswers.count == 1)
            #expect(secondAnswers.first?["id"] == 2)
            let products = secondAnswers.first?["result"]?["products"]?.arrayValue ?? []
            #expect(products.compactMap { $0["productIdentifier"]?.stringValue } == ["coins_100"])
            #expect(secondAnswers.first?["result"]?["invalidProductIdentifiers"] == ["unknown_x"])
            #expect(upstream.upstream.requestCount(for: "coins_100") == 1)
            #expect(try await gateway.metricValue("gateway_batches_waiting") == 0)
        }
    }

    /// Holds the one turn (`GATEWAY_BATCH_CONCURRENCY=1`) with a batch
    /// whose upstream call hangs; returns that batch's answer to await.
    static func holdTheTurn(_ upstream: RunningUpstream, _ gateway: RunningGateway) async throws -> Task<RawHTTPResponse, any Error> {
        upstream.upstream.enqueue(.hang)
        let first = Task { try await gateway.rpc("[" + UpstreamScenario.request(["premium_monthly"], id: 1) + "]") }
        try await UpstreamScenario.waitFor("the first batch's upstream request") { upstream.upstream.requestCount(for: "premium_monthly") == 1 }
        return first
    }

    /// The element count is checked before the wait: a batch over
    /// `GATEWAY_MAX_BATCH` is refused at once, even with every turn held.
    @Test func aBatchOverTheLimitIsRefusedBeforeItWaits() async throws {
        let environment = ["GATEWAY_BATCH_CONCURRENCY": "1", "GATEWAY_MAX_BATCH": "2", "UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "2000"]
        try await UpstreamScenario.run(environment: environment) { upstream, gateway in
            let first = try await Self.holdTheTurn(upstream, gateway)
            let calls = (1...3).map { UpstreamScenario.request(["coins_100"], id: $0) }.joined(separator: ",")
            let refused = try await gateway.rpc("[" + calls + "]")
            #expect(refused.status == 200)
            let error = try parseJSON(refused.body)
            #expect(error["error"]?["code"] == -32600)
            #expect(error["error"]?["message"] == "Invalid request: batch of 3 requests exceeds the limit of 2")
            #expect(try await gateway.metricValue("gateway_batches_waiting") == 0)
            _ = try await first.value
        }
    }

    /// At most 4 x `GATEWAY_BATCH_CONCURRENCY` batches wait; one more is
    /// answered `503` with `Retry-After: 1` at once.
    @Test func pastFourWaitingBatchesTheNextIsToldToRetry() async throws {
        let environment = ["GATEWAY_BATCH_CONCURRENCY": "1", "UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "8000", "GATEWAY_REQUEST_TIMEOUT_MS": "15000"]
        try await UpstreamScenario.run(environment: environment) { upstream, gateway in
            let first = try await Self.holdTheTurn(upstream, gateway)
            var waiting: [Task<RawHTTPResponse, any Error>] = []
            for index in 0..<4 {
                waiting.append(Task { try await gateway.rpc("[" + UpstreamScenario.request(["coins_100"], id: 10 + index) + "]") })
            }
            try await UpstreamScenario.waitFor("four batches waiting") { (try? await gateway.metricValue("gateway_batches_waiting")) == 4 }
            let busy = try await gateway.rpc("[" + UpstreamScenario.request(["coins_100"], id: 99) + "]")
            #expect(busy.status == 503)
            #expect(busy.header("Retry-After") == "1")
            #expect(try parseJSON(busy.body)["error"]?["status"] == 503)
            #expect(busy.header("X-Request-Id") != nil)
            _ = try await first.value
            for batch in waiting { #expect(try await batch.value.status == 200) }
        }
    }
}
