import Foundation
import JSONRPC
import MockUpstream
import Testing

/// Fan-out and per-identifier coalescing (contract section 1), counted
/// exactly at the TLS test upstream. The mock's `.delay` keeps fetches in
/// flight so calls overlap; sleeps only order events, nothing is timed.
@Suite("Fan-out and coalescing", .serialized)
struct CoalescingTests {
    /// Known products of the sample catalog, all priced in DE.
    static let known = [
        "premium_monthly", "premium_yearly", "premium_weekly", "boost_7days", "family_monthly",
        "cloud_storage_quarterly", "coins_100", "coins_550", "coins_1200", "remove_ads",
    ]

    /// `count` identifiers: the known ones spread over `positions`, unknown ones elsewhere.
    static func identifiers(count: Int, knownAt positions: [Int]) -> [String] {
        var unknown = UpstreamScenario.unknownIDs(count - positions.count).makeIterator()
        var known = Self.known.makeIterator()
        return (0..<count).map { positions.contains($0) ? known.next()! : unknown.next()! }
    }

    // MARK: Fan-out

    @Test(arguments: ["64", "1"])
    func aLargeCallFansOutInChunksAndMergesInRequestOrder(concurrency: String) async throws {
        let ids = Self.identifiers(count: 120, knownAt: [5, 17, 33, 49, 50, 64, 88, 99, 100, 119])
        try await UpstreamScenario.run(environment: [
            "GATEWAY_MAX_IDS": "200", "UPSTREAM_MAX_IDS": "50", "UPSTREAM_CONCURRENCY": concurrency,
        ]) { upstream, gateway in
            let answer = try await gateway.fetchProducts(ids)
            #expect(answer.error == nil)
            #expect(answer.productIDs == ids.filter(Self.known.contains))
            #expect(answer.invalidIDs == ids.filter { !Self.known.contains($0) })

            let requests = upstream.upstream.requests
            #expect(requests.count == 3)
            #expect(requests.map(\.identifiers.count).sorted() == [20, 50, 50])
            #expect(Set(requests.flatMap(\.identifiers)) == Set(ids))
            #expect(requests.allSatisfy { $0.country == "DE" })
            for id in ids { #expect(upstream.upstream.requestCount(for: id) == 1, "\(id)") }
        }
    }

    // MARK: Identical calls

    @Test func fortyConcurrentIdenticalCallsFetchEachIdentifierOnce() async throws {
        let ids = Self.identifiers(count: 60, knownAt: [0, 7, 20, 49, 50, 59])
        try await UpstreamScenario.run(environment: ["UPSTREAM_TIMEOUT_MS": "20000", "GATEWAY_REQUEST_TIMEOUT_MS": "20000"]) { upstream, gateway in
            upstream.upstream.setStandingFault(.delay(milliseconds: 2000))
            let answers = try await withThrowingTaskGroup(of: FetchAnswer.self) { group in
                for _ in 0..<40 {
                    group.addTask { try await gateway.fetchProducts(ids) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.count == 40)
            for answer in answers {
                #expect(answer.error == nil)
                #expect(answer.result == answers[0].result)
            }
            #expect(answers[0].productIDs == ids.filter(Self.known.contains))

            // One round of upstream calls: two chunks of at most 50.
            #expect(upstream.upstream.requests.count == 2)
            for id in ids { #expect(upstream.upstream.requestCount(for: id) == 1, "\(id)") }
            // Every identifier of the 39 calls that joined.
            #expect(try await gateway.metricValue("gateway_coalesced_identifiers_total") == Double(39 * ids.count))
        }
    }

    @Test func batchElementsCoalesceWithEachOther() async throws {
        let ids = ["premium_monthly", "coins_100", "unknown_batch"]
        try await UpstreamScenario.run(environment: ["UPSTREAM_TIMEOUT_MS": "10000"]) { upstream, gateway in
            upstream.upstream.setStandingFault(.delay(milliseconds: 1000))
            let batch = "[" + (1...5).map { UpstreamScenario.request(ids, id: $0) }.joined(separator: ",") + "]"
            let response = try await gateway.rpc(batch)
            let answers = try #require(try parseJSON(response.body).arrayValue)
            #expect(answers.count == 5)
            for answer in answers {
                #expect(answer["result"]?["invalidProductIdentifiers"] == ["unknown_batch"])
                #expect(answer["result"]?["products"]?.arrayValue?.count == 2)
            }
            #expect(upstream.upstream.requests.count == 1)
            #expect(try await gateway.metricValue("gateway_coalesced_identifiers_total") == Double(4 * ids.count))
        }
    }

    // MARK: Overlap

    @Test func overlappingCallsShareTheOverlapAndFetchOnlyTheRest() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_TIMEOUT_MS": "10000"]) { upstream, gateway in
            upstream.upstream.setStandingFault(.delay(milliseconds: 1500))
            async let first = gateway.fetchProducts(["premium_monthly", "coins_100", "unknown_a", "unknown_b"])
            try await UpstreamScenario.waitFor("the first call's upstream request") { upstream.upstream.requests.count == 1 }
            let second = try await gateway.fetchProducts(["coins_100", "unknown_b", "remove_ads", "unknown_c"])
            let firstAnswer = try await first

            #expect(firstAnswer.productIDs == ["premium_monthly", "coins_100"])
            #expect(firstAnswer.invalidIDs == ["unknown_a", "unknown_b"])
            #expect(second.productIDs == ["coins_100", "remove_ads"])
            #expect(second.invalidIDs == ["unknown_b", "unknown_c"])

            let requests = upstream.upstream.requests
            #expect(requests.count == 2)
            #expect(requests.map { Set($0.identifiers) } == [
                ["premium_monthly", "coins_100", "unknown_a", "unknown_b"], ["remove_ads", "unknown_c"],
            ])
            for id in ["premium_monthly", "coins_100", "unknown_a", "unknown_b", "remove_ads", "unknown_c"] {
                #expect(upstream.upstream.requestCount(for: id) == 1, "\(id)")
            }
            #expect(try await gateway.metricValue("gateway_coalesced_identifiers_total") == 2)
        }
    }

    // MARK: Leaving and failing

    /// Go's singleflight fails every waiter when the first caller gives up.
    /// Here the caller who started the fetch reaches its own deadline while
    /// the fetch goes on, and the callers who joined later get its answer.
    @Test(.timeLimit(.minutes(1))) func aCallerWhoseDeadlinePassesIsCancelledWhileTheOthersSucceed() async throws {
        try await UpstreamScenario.run(environment: ["GATEWAY_REQUEST_TIMEOUT_MS": "3000", "UPSTREAM_TIMEOUT_MS": "40000"]) { upstream, gateway in
            // The upstream holds the fetch until the test answers it.
            upstream.upstream.enqueue(.held)
            let ids = ["premium_monthly", "unknown_deadline"]
            let starter = try await gateway.fetchProducts(ids)
            // The starter's deadline passed while the fetch went on.
            #expect(starter.code == -32005)
            #expect(starter.reason == "cancelled")
            #expect(starter.data?["retryable"] == true)
            #expect(upstream.upstream.heldCount == 1)
            // Two callers join the fetch still in flight (both identifiers
            // each, counted as coalesced), and get its answer.
            async let second = gateway.fetchProducts(ids)
            async let third = gateway.fetchProducts(ids)
            try await UpstreamScenario.waitFor("two callers joined the fetch") {
                (try? await gateway.metricValue("gateway_coalesced_identifiers_total")) == 4
            }
            #expect(upstream.upstream.answerHeld() == 1)
            for answer in [try await second, try await third] {
                #expect(answer.error == nil)
                #expect(answer.productIDs == ["premium_monthly"])
                #expect(answer.invalidIDs == ["unknown_deadline"])
            }
            #expect(upstream.upstream.requests.count == 1)
            #expect(try await gateway.metricValue(#"gateway_rpc_requests_total{method="products.fetch",outcome="cancelled"}"#) == 1)
            #expect(try await gateway.metricValue(#"gateway_rpc_requests_total{method="products.fetch",outcome="ok"}"#) == 2)
        }
    }

    @Test func aFailedFetchFailsItsWaitersAndIsForgotten() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "1"]) { upstream, gateway in
            // The first attempt's Retry-After keeps the fetch in flight while
            // the second caller joins; the retry then fails for good.
            upstream.upstream.enqueue(.status(503, retryAfterSeconds: 1), .status(500))
            async let first = gateway.fetchProducts(["premium_monthly"])
            try await UpstreamScenario.waitFor("the first attempt") { upstream.upstream.requests.count == 1 }
            let joined = try await gateway.fetchProducts(["premium_monthly"])
            let firstAnswer = try await first
            for answer in [firstAnswer, joined] {
                #expect(answer.code == -32002)
                #expect(answer.data?["upstreamStatus"] == 500)
            }
            #expect(upstream.upstream.requests.count == 2)
            #expect(try await gateway.metricValue("gateway_coalesced_identifiers_total") == 1)

            // Nothing of the failure is kept: the next call asks again.
            let next = try await gateway.fetchProducts(["premium_monthly"])
            #expect(next.productIDs == ["premium_monthly"])
            #expect(upstream.upstream.requests.count == 3)
        }
    }

    @Test func aFirstCall500IsForgottenByTheNext() async throws {
        try await UpstreamScenario.run { upstream, gateway in
            upstream.upstream.enqueue(.status(500))
            let failed = try await gateway.fetchProducts(["premium_monthly"])
            #expect(failed.code == -32002)
            let next = try await gateway.fetchProducts(["premium_monthly"])
            #expect(next.productIDs == ["premium_monthly"])
            #expect(upstream.upstream.requests.count == 2)
        }
    }

    /// Coalescing is keyed by (app, country, language, identifier): a fetch
    /// of the same identifier for another country or language is its own,
    /// and its failure reaches nobody else.
    @Test func anotherCountryOrLanguageNeitherJoinsNorSharesAFailure() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "1500"]) { upstream, gateway in
            upstream.upstream.enqueue(.hang)
            async let hanging = gateway.fetchProducts(["premium_monthly"], country: "DE")
            try await UpstreamScenario.waitFor("the hanging request") { upstream.upstream.requests.count == 1 }
            let france = try await gateway.fetchProducts(["premium_monthly"], country: "FR")
            let german = try await gateway.fetchProducts(["premium_monthly"], country: "DE", language: "de")
            #expect(france.productIDs == ["premium_monthly"])
            #expect(german.productIDs == ["premium_monthly"])
            #expect(german.result?["products"]?[0]?["localizedDescription"] == "Alle Funktionen, monatlich abgerechnet")

            let hangingAnswer = try await hanging
            #expect(hangingAnswer.reason == "connectionError")
            let again = try await gateway.fetchProducts(["premium_monthly"], country: "DE")
            #expect(again.productIDs == ["premium_monthly"], "\(again.body)")

            #expect(upstream.upstream.requestCount(for: "premium_monthly") == 4)
            #expect(upstream.upstream.requests.map { $0.country ?? "" } == ["DE", "FR", "DE", "DE"])
            #expect(try await gateway.metricValue("gateway_coalesced_identifiers_total") == 0)
        }
    }
}
