import Foundation
import JSONRPC
import MockUpstream
import Testing

/// Distinct misses share upstream calls (contract section 1): what calls
/// on one loop miss together goes upstream together, counted at the TLS
/// test upstream. Batch elements start in one loop turn, so they merge at
/// the default (no window); calls on connections of their own are sent at
/// the same moment and given `GATEWAY_MERGE_WINDOW_US`, so that the loop
/// reading them in more than one turn still merges them.
@Suite("Merged misses", .serialized)
struct MergedMissesTests {
    /// Known products of the sample catalog, all priced in DE.
    static let known = CoalescingTests.known

    /// Deadlines far beyond any wait here: these tests count upstream
    /// calls, and a slow attempt's retry (a loaded machine, a sanitizer)
    /// would ask again.
    static let patient = ["UPSTREAM_TIMEOUT_MS": "30000", "GATEWAY_REQUEST_TIMEOUT_MS": "30000"]

    /// One worker, so every connection is read by the same loop; a window
    /// wide enough for a burst of calls sent together.
    static let oneLoop = patient.merging(["GATEWAY_WORKERS": "1", "GATEWAY_MERGE_WINDOW_US": "100000"]) { $1 }

    /// `ids[i]` asked by call `i`, each on a connection of its own, sent at
    /// the same moment; the answers in call order.
    static func concurrentCalls(_ gateway: RunningGateway, _ ids: [[String]], hangingUp: Set<Int> = [], afterSending: () async throws -> Void = {}) async throws -> [FetchAnswer?] {
        let connections = try ids.map { _ in try TestHTTPConnection(port: gateway.port) }
        let requests = ids.enumerated().map { index, ids in TestHTTPConnection.rpcRequest(UpstreamScenario.request(ids, id: index + 1)) }
        try await TestHTTPConnection.sendAll(connections, requests)
        try await afterSending()
        for index in hangingUp { connections[index].hangUp() }
        return try await withThrowingTaskGroup(of: (Int, FetchAnswer?).self) { group in
            for (index, connection) in connections.enumerated() where !hangingUp.contains(index) {
                group.addTask { (index, try FetchAnswer(try await connection.readResponse())) }
            }
            var answers = [FetchAnswer?](repeating: nil, count: ids.count)
            for try await (index, answer) in group { answers[index] = answer }
            return answers
        }
    }

    /// A batch of one `products.fetch` per entry of `ids`, answered in order.
    static func batch(_ gateway: RunningGateway, _ ids: [[String]]) async throws -> [JSONValue] {
        let body = "[" + ids.enumerated().map { UpstreamScenario.request($1, id: $0 + 1) }.joined(separator: ",") + "]"
        let answers = try #require(try parseJSON(try await gateway.rpc(body).body).arrayValue)
        #expect(answers.count == ids.count)
        return answers
    }

    static func productIDs(_ answer: JSONValue) -> [String] {
        answer["result"]?["products"]?.arrayValue?.compactMap { $0["productIdentifier"]?.stringValue } ?? []
    }

    static func invalidIDs(_ answer: JSONValue) -> [String] {
        answer["result"]?["invalidProductIdentifiers"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    // MARK: Sharing

    /// A merged call the upstream hangs on is hedged once it has waited
    /// half of `UPSTREAM_TIMEOUT_MS`: each call's identifiers are asked
    /// again apart, and each call is answered then. (With no retries, the
    /// merged call alone would fail both calls at the attempt's timeout.)
    @Test func aMergedCallTheUpstreamHangsOnIsHedged() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_TIMEOUT_MS": "2000", "UPSTREAM_RETRIES": "0", "GATEWAY_REQUEST_TIMEOUT_MS": "5000"]) { upstream, gateway in
            upstream.upstream.enqueue(.hang)
            let answers = try await Self.batch(gateway, [["premium_monthly"], ["coins_100"]])
            #expect(Self.productIDs(answers[0]) == ["premium_monthly"], "\(answers[0])")
            #expect(Self.productIDs(answers[1]) == ["coins_100"], "\(answers[1])")
            let requests = upstream.upstream.requests.map(\.identifiers)
            #expect(requests.count == 3, "\(requests)")
            #expect(requests.first.map(Set.init) == ["premium_monthly", "coins_100"])
            #expect(Set(requests.dropFirst()) == [["premium_monthly"], ["coins_100"]])
        }
    }

    /// 20 calls for 20 different identifiers on one loop: one upstream call
    /// per `UPSTREAM_MAX_IDS` identifiers, where each call alone made one.
    @Test(arguments: [(maxIDs: 50, calls: 1), (maxIDs: 8, calls: 3)])
    func concurrentCallsForDistinctIdentifiersShareUpstreamCalls(maxIDs: Int, calls: Int) async throws {
        let ids = Self.known + UpstreamScenario.unknownIDs(10, prefix: "merged")
        try await UpstreamScenario.run(environment: Self.oneLoop.merging(["UPSTREAM_MAX_IDS": "\(maxIDs)"]) { $1 }) { upstream, gateway in
            let answers = try await Self.concurrentCalls(gateway, ids.map { [$0] })
            for (index, id) in ids.enumerated() {
                let answer = try #require(answers[index])
                #expect(answer.error == nil, "\(answer.body)")
                // Each call gets its own identifier's answer, nothing else.
                #expect(answer.productIDs == (Self.known.contains(id) ? [id] : []), "\(id)")
                #expect(answer.invalidIDs == (Self.known.contains(id) ? [] : [id]), "\(id)")
            }
            let requests = upstream.upstream.requests
            #expect(requests.count == calls, "\(requests.map(\.identifiers))")
            #expect(requests.allSatisfy { $0.identifiers.count <= maxIDs })
            for id in ids { #expect(upstream.upstream.requestCount(for: id) == 1, "\(id)") }
            #expect(try await gateway.metricValue("gateway_upstream_identifiers_per_call_count") == Double(calls))
            #expect(try await gateway.metricValue("gateway_upstream_identifiers_per_call_sum") == Double(ids.count))
            #expect(try await gateway.metricValue(#"gateway_upstream_identifiers_per_call_bucket{le="1.0"}"#) == 0)
        }
    }

    /// At the default (no window), what one loop turn starts is merged: a
    /// batch's elements. Coalescing still holds within it: an identifier
    /// two elements ask is fetched once.
    @Test func batchElementsForDistinctIdentifiersShareOneUpstreamCall() async throws {
        let ids = Self.known + UpstreamScenario.unknownIDs(10, prefix: "batch")
        try await UpstreamScenario.run(environment: Self.patient) { upstream, gateway in
            // Each identifier alone, then five calls repeating the first five.
            let calls = ids.map { [$0] } + ids.prefix(5).map { [$0] }
            let answers = try await Self.batch(gateway, calls)
            for (index, call) in calls.enumerated() {
                let id = call[0]
                #expect(Self.productIDs(answers[index]) == (Self.known.contains(id) ? [id] : []), "\(answers[index])")
                #expect(Self.invalidIDs(answers[index]) == (Self.known.contains(id) ? [] : [id]), "\(answers[index])")
            }
            #expect(upstream.upstream.requests.count == 1, "\(upstream.upstream.requests.map(\.identifiers))")
            #expect(Set(upstream.upstream.requests.flatMap(\.identifiers)) == Set(ids))
            #expect(try await gateway.metricValue("gateway_coalesced_identifiers_total") == 5)
        }
    }

    /// Each merged call keeps its scope: calls for other countries or
    /// languages go in calls of their own.
    @Test func callsOfOtherScopesAreNotMerged() async throws {
        try await UpstreamScenario.run(environment: Self.patient) { upstream, gateway in
            let body = "[" + [
                UpstreamScenario.request(["premium_monthly"], id: 1),
                UpstreamScenario.request(["coins_100"], country: "FR", id: 2),
                UpstreamScenario.request(["coins_550"], id: 3),
                UpstreamScenario.request(["remove_ads"], language: "de", id: 4),
            ].joined(separator: ",") + "]"
            let answers = try #require(try parseJSON(try await gateway.rpc(body).body).arrayValue)
            #expect(answers.map(Self.productIDs) == [["premium_monthly"], ["coins_100"], ["coins_550"], ["remove_ads"]])
            let requests = upstream.upstream.requests
            #expect(requests.count == 3)
            #expect(Set(requests.map { "\($0.country ?? "")/\($0.headers["Accept-Language"] ?? "-")/\($0.identifiers.sorted())" }) == [
                "DE/-/[\"coins_550\", \"premium_monthly\"]", "FR/-/[\"coins_100\"]", "DE/de/[\"remove_ads\"]",
            ])
        }
    }

    // MARK: Each caller's own fate

    /// A 422 on a merged call is asked again, each call's identifiers
    /// apart: the call whose identifier the upstream rejects fails
    /// (-32004), the others get their products.
    @Test func aRejectedIdentifierFailsOnlyTheCallThatAskedForIt() async throws {
        try await UpstreamScenario.run(environment: Self.patient) { upstream, gateway in
            upstream.upstream.setRejectedIdentifiers(["rejected_pack"])
            let answers = try await Self.batch(gateway, [["premium_monthly"], ["coins_100", "unknown_merged"], ["rejected_pack", "remove_ads"]])
            #expect(Self.productIDs(answers[0]) == ["premium_monthly"])
            #expect(Self.productIDs(answers[1]) == ["coins_100"])
            #expect(Self.invalidIDs(answers[1]) == ["unknown_merged"])
            #expect(answers[2]["error"]?["code"] == -32004)
            #expect(answers[2]["error"]?["data"]?["reason"] == "invalidProductIdentifier")
            #expect(answers[2]["error"]?["data"]?["upstreamStatus"] == 422)
            // The merged call, then each call's identifiers apart.
            let requests = upstream.upstream.requests.map { Set($0.identifiers) }
            #expect(requests.count == 4, "\(requests)")
            #expect(requests.first == ["premium_monthly", "coins_100", "unknown_merged", "rejected_pack", "remove_ads"])
            #expect(Set(requests.dropFirst()) == [["premium_monthly"], ["coins_100", "unknown_merged"], ["rejected_pack", "remove_ads"]])
            #expect(try await gateway.metricValue(#"gateway_rpc_requests_total{method="products.fetch",outcome="ok"}"#) == 2)
            #expect(try await gateway.metricValue(#"gateway_rpc_requests_total{method="products.fetch",outcome="invalidProductIdentifier"}"#) == 1)
        }
    }

    /// The same over connections of their own; and every other failure of
    /// a merged call reaches each call as it is, with no second asking.
    @Test func aMergedCallsFailureOtherThan422ReachesEveryCallOnce() async throws {
        try await UpstreamScenario.run(environment: Self.oneLoop) { upstream, gateway in
            upstream.upstream.setRejectedIdentifiers(["rejected_pack"])
            let rejected = try await Self.concurrentCalls(gateway, [["premium_monthly"], ["rejected_pack"], ["coins_100"]])
            #expect(rejected.map { $0?.reason } == [nil, "invalidProductIdentifier", nil])
            #expect(rejected[0]?.productIDs == ["premium_monthly"])
            #expect(rejected[2]?.productIDs == ["coins_100"])
            #expect(upstream.upstream.requests.count == 4)

            upstream.upstream.setRejectedIdentifiers([])
            upstream.upstream.setStandingFault(.status(404))
            let failed = try await Self.concurrentCalls(gateway, [["premium_yearly"], ["coins_550"], ["remove_ads"]])
            #expect(failed.map { $0?.reason } == ["appNotRegistered", "appNotRegistered", "appNotRegistered"])
            #expect(upstream.upstream.requests.count == 5)
        }
    }

    /// One caller hanging up while the merged call is in flight takes
    /// nothing from the others.
    @Test func aCallerHangingUpMidMergeLeavesTheOthersTheirAnswers() async throws {
        try await UpstreamScenario.run(environment: Self.oneLoop) { upstream, gateway in
            upstream.upstream.setStandingFault(.delay(milliseconds: 1000))
            let ids = [["premium_monthly"], ["coins_100"], ["remove_ads", "unknown_left"]]
            let answers = try await Self.concurrentCalls(gateway, ids, hangingUp: [0]) {
                try await UpstreamScenario.waitFor("the merged call") { upstream.upstream.requests.count == 1 }
            }
            #expect(answers[1]?.productIDs == ["coins_100"])
            #expect(answers[2]?.productIDs == ["remove_ads"])
            #expect(answers[2]?.invalidIDs == ["unknown_left"])
            #expect(upstream.upstream.requests.count == 1)
            #expect(Set(upstream.upstream.requests[0].identifiers) == ["premium_monthly", "coins_100", "remove_ads", "unknown_left"])
        }
    }

    // MARK: The shared tier

    /// With Redis, the misses a replica claims still go out together, and
    /// the replicas still coalesce: two replicas answering the same batch
    /// of distinct identifiers ask the upstream for each identifier once,
    /// in a few calls rather than one per element.
    @Test func underTheSharedTierClaimedMissesShareUpstreamCalls() async throws {
        let ids = Self.known + UpstreamScenario.unknownIDs(10, prefix: "shared")
        try await SharedTierScenario.run(replicas: 2, environment: Self.patient) { upstream, gateways, _ in
            upstream.upstream.setCacheControl("max-age=30")
            upstream.upstream.setStandingFault(.delay(milliseconds: 300))
            let calls = ids.map { [$0] }
            async let first = Self.batch(gateways[0], calls)
            async let second = Self.batch(gateways[1], calls)
            for answers in [try await first, try await second] {
                for (index, id) in ids.enumerated() {
                    #expect(Self.productIDs(answers[index]) == (Self.known.contains(id) ? [id] : []), "\(answers[index])")
                }
            }
            for id in ids { #expect(upstream.upstream.requestCount(for: id) == 1, "\(id)") }
            // One per replica that claimed anything, give or take a lookup
            // answered in a later turn; 20 without merging.
            #expect(upstream.upstream.requests.count <= 4, "\(upstream.upstream.requests.map(\.identifiers))")
        }
    }
}
