import Foundation
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

    /// Many batches arriving together (in one loop turn, from many
    /// connections) still meet the cap: exactly four wait, the rest are
    /// told to retry.
    @Test func batchesArrivingTogetherStillMeetTheCap() async throws {
        let environment = ["GATEWAY_BATCH_CONCURRENCY": "1", "UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "8000", "GATEWAY_REQUEST_TIMEOUT_MS": "15000"]
        try await UpstreamScenario.run(environment: environment) { upstream, gateway in
            let first = try await Self.holdTheTurn(upstream, gateway)
            let answers = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<20 {
                    group.addTask { try await gateway.rpc("[" + UpstreamScenario.request(["coins_100"], id: 10 + index) + "]").status }
                }
                var statuses: [Int] = []
                // The sixteen refusals come at once; the four that wait end
                // when the held turn does.
                for try await status in group {
                    statuses.append(status)
                    if statuses.count == 16 {
                        #expect(try await gateway.metricValue("gateway_batches_waiting") == 4)
                    }
                }
                return statuses
            }
            #expect(answers.filter { $0 == 503 }.count == 16)
            #expect(answers.filter { $0 == 200 }.count == 4)
            _ = try await first.value
        }
    }

    /// The raw bytes of `POST /rpc` with `body`.
    static func post(_ body: String) -> [UInt8] {
        Array("POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
    }

    /// A waiting batch whose client hangs up leaves the queue at once: the
    /// gauge drops, its place under the cap is free for another batch, and
    /// it never takes a turn (the upstream is never asked for it).
    @Test func aWaitingBatchWhoseConnectionClosesLeavesTheQueueAtOnce() async throws {
        let environment = ["GATEWAY_BATCH_CONCURRENCY": "1", "UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "10000", "GATEWAY_REQUEST_TIMEOUT_MS": "20000"]
        try await UpstreamScenario.run(environment: environment) { upstream, gateway in
            let first = try await Self.holdTheTurn(upstream, gateway)
            var leaving: [TestHTTPConnection] = []
            for index in 0..<4 {
                let connection = try TestHTTPConnection(port: gateway.port)
                try await connection.sendRaw(Self.post("[" + UpstreamScenario.request(["coins_100"], id: 10 + index) + "]"))
                leaving.append(connection)
            }
            try await UpstreamScenario.waitFor("four batches waiting") { (try? await gateway.metricValue("gateway_batches_waiting")) == 4 }
            leaving.removeAll() // the clients hang up
            try await UpstreamScenario.waitFor("the batches of closed connections to leave the queue") {
                (try? await gateway.metricValue("gateway_batches_waiting")) == 0
            }
            // They left while the turn was still held: none of them took it.
            #expect(upstream.upstream.requestCount(for: "coins_100") == 0)
            #expect(upstream.upstream.requestCount(for: "premium_monthly") == 1)

            // Their places are free: four more batches wait, and only a
            // fifth is told to retry.
            var waiting: [Task<RawHTTPResponse, any Error>] = []
            for index in 0..<4 {
                waiting.append(Task { try await gateway.rpc("[" + UpstreamScenario.request(["remove_ads"], id: 20 + index) + "]") })
            }
            try await UpstreamScenario.waitFor("four new batches waiting") { (try? await gateway.metricValue("gateway_batches_waiting")) == 4 }
            let busy = try await gateway.rpc("[" + UpstreamScenario.request(["remove_ads"], id: 99) + "]")
            #expect(busy.status == 503)
            #expect(busy.header("Retry-After") == "1")

            _ = try await first.value
            for (index, batch) in waiting.enumerated() {
                let response = try await batch.value
                #expect(response.status == 200)
                let answers = try #require(try parseJSON(response.body).arrayValue)
                #expect(answers.count == 1)
                #expect(answers.first?["id"] == .integer(20 + index))
                let products = answers.first?["result"]?["products"]?.arrayValue ?? []
                #expect(products.compactMap { $0["productIdentifier"]?.stringValue } == ["remove_ads"])
            }
            // The batches that left never took a turn.
            #expect(upstream.upstream.requestCount(for: "coins_100") == 0)
            #expect(try await gateway.metricValue("gateway_batches_waiting") == 0)
        }
    }

    /// A catalog of two products: `huge_pack`, whose description is 1 MiB,
    /// and `small_pack`; both sold in DE.
    static func catalogWithAHugeProduct() throws -> String {
        func product(_ id: String, description: String) -> String {
            #"{"id":"\#(id)","localizations":{"en":{"title":"\#(id)","description":"\#(description)"}},"prices":{"DE":{"amount":"1.99","currency":"EUR"}}}"#
        }
        let json = #"{"defaultLanguage":"en","products":["# + product("huge_pack", description: String(repeating: "x", count: 1 << 20)) + "," + product("small_pack", description: "small") + "]}"
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("huge-catalog-\(UUID().uuidString).json").path
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A client that sends a batch with a big answer and reads none of it
    /// holds no turn once its answer is handed to its connection: with one
    /// turn and a write deadline far beyond the next batch's own deadline,
    /// the next batch is answered in full. (Held until written, the turn
    /// would come after that batch's deadline: -32005. What waits for the
    /// slow reader is bounded by the front's total of unwritten answers.)
    @Test func aClientThatDoesNotReadItsBatchAnswerHoldsNoTurn() async throws {
        let catalog = try Self.catalogWithAHugeProduct()
        defer { try? FileManager.default.removeItem(atPath: catalog) }
        let gateway = try RunningGateway.start([
            "GATEWAY_CATALOG": catalog, "GATEWAY_BATCH_CONCURRENCY": "1",
            "GATEWAY_READ_TIMEOUT_MS": "60000", "GATEWAY_IDLE_TIMEOUT_MS": "60000", "GATEWAY_REQUEST_TIMEOUT_MS": "5000",
            // Room for the answer below.
            "GATEWAY_MAX_ANSWER_BYTES": "33554432",
        ])
        do {
            // 16 MiB of answer: far more than the socket buffers hold.
            let calls = (1...16).map { UpstreamScenario.request(["huge_pack"], id: $0) }.joined(separator: ",")
            let slow = try TestHTTPConnection(port: gateway.port)
            try await slow.sendRaw(Self.post("[" + calls + "]"))
            #expect(String(decoding: try await slow.readBytes(17), as: UTF8.self) == "HTTP/1.1 200 OK\r\n")

            for id in 90..<93 {
                let response = try await gateway.rpc("[" + UpstreamScenario.request(["small_pack"], id: id) + "]")
                #expect(response.status == 200)
                let answers = try #require(try parseJSON(response.body).arrayValue)
                #expect(answers.count == 1)
                #expect(answers.first?["id"] == .integer(id))
                let products = answers.first?["result"]?["products"]?.arrayValue ?? []
                #expect(products.compactMap { $0["productIdentifier"]?.stringValue } == ["small_pack"], "\(answers)")
            }
            #expect(try await gateway.metricValue("gateway_batches_waiting") == 0)
            slow.hangUp()
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()
    }
}
