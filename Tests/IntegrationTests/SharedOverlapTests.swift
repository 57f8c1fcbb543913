import Foundation
import Testing

/// Overlapping calls with the shared tier on, against a real `redis-server`
/// and the real binary: calls that share an identifier wait for the fetch
/// that holds it (in process by joining it, across replicas by its outcome
/// message), never for the 250 ms poll, whether its answer may be kept or
/// not, and around the expiry of a popular entry.
///
/// What tells a wait on the fetch from a wait on the poll is how the wait
/// ended (`gateway_shared_waits_total{ended}`): a look at a poll that finds
/// the lease gone (`takeover`) or the entry stored (`entry`) means the wait
/// outlived the fetch it waited for. No wall clock is read to decide.
@Suite("Overlapping calls with the shared tier", .serialized)
struct SharedOverlapTests {
    /// What every call of these tests asks besides its own identifier.
    static let shared = "premium_monthly"

    /// `clients` concurrent clients per gateway, each making `calls` calls
    /// one after the other, each asking the shared identifier and one of
    /// its own (unknown to the catalog, so never cached either way).
    static func overlap(_ gateways: [RunningGateway], clients: Int, calls: Int, tag: String) async throws -> (answers: [FetchAnswer], slowest: Duration) {
        try await withThrowingTaskGroup(of: ([FetchAnswer], Duration).self) { group in
            for (number, gateway) in gateways.enumerated() {
                for client in 0..<clients {
                    group.addTask {
                        var answers: [FetchAnswer] = []
                        var slowest = Duration.zero
                        for call in 0..<calls {
                            let started = ContinuousClock.now
                            answers.append(try await gateway.fetchProducts([shared, "\(tag)_\(number)_\(client)_\(call)"]))
                            slowest = max(slowest, ContinuousClock.now - started)
                        }
                        return (answers, slowest)
                    }
                }
            }
            var all: [FetchAnswer] = []
            var slowest = Duration.zero
            for try await (answers, slow) in group {
                all += answers
                slowest = max(slowest, slow)
            }
            return (all, slowest)
        }
    }

    /// Each replica's `gateway_shared_waits_total`, by how the waits ended.
    static func waits(_ gateways: [RunningGateway]) async throws -> [String: Int] {
        var total: [String: Int] = [:]
        for gateway in gateways {
            for ended in ["outcome", "entry", "takeover", "released", "alone", "deadline", "timeout"] {
                total[ended, default: 0] += Int(try await gateway.metricValue("gateway_shared_waits_total{ended=\"\(ended)\"}") ?? -1_000)
            }
        }
        return total
    }

    static func expectEveryAnswer(_ answers: [FetchAnswer], count: Int) {
        #expect(answers.count == count)
        let failed = answers.filter { $0.productIDs != [shared] || $0.invalidIDs.count != 1 }
        #expect(failed.isEmpty, "\(failed.count) calls failed, the first: \(failed.first.map { String(decoding: $0.http.body, as: UTF8.self) } ?? "")")
    }

    /// Uncacheable answers (no `max-age`): nothing is ever found at a poll,
    /// so a waiter that waited for one would wait for the poll, each round,
    /// and then fetch (a takeover). Every wait ends by the fetch's outcome.
    @Test(arguments: [1, 2])
    func callsSharingAnUncacheableIdentifierWaitForTheFetch(replicas: Int) async throws {
        try await SharedTierScenario.run(replicas: replicas, environment: ["GATEWAY_WORKERS": "2"]) { upstream, gateways, _ in
            upstream.upstream.setCacheControl(nil)
            // Long enough that calls overlap the fetch in flight.
            upstream.upstream.setStandingFault(.delay(milliseconds: 40))
            let (answers, slowest) = try await Self.overlap(gateways, clients: 6, calls: 12, tag: "uncacheable")
            Self.expectEveryAnswer(answers, count: replicas * 6 * 12)
            let waits = try await Self.waits(gateways)
            #expect(waits["takeover"] == 0, "waits ended \(waits); the slowest call took \(slowest)")
            #expect(waits["entry"] == 0, "waits ended \(waits)")
            #expect(waits["deadline"] == 0, "waits ended \(waits)")
            #expect(waits["alone"] == 0, "waits ended \(waits)")
            #expect(waits["timeout"] == 0, "waits ended \(waits)")
            if replicas > 1 {
                // The scenario did overlap across replicas: waits happened,
                // and the fetch's message ended them.
                #expect((waits["outcome"] ?? 0) > 0, "waits ended \(waits)")
            }
        }
    }

    /// A popular identifier cached for 1 s, expiring (three times) while
    /// calls keep coming on two replicas: whoever refreshes it, the others
    /// wait for that fetch, not for a poll.
    @Test func aPopularIdentifierExpiringUnderLoadIsWaitedForNotPolled() async throws {
        try await SharedTierScenario.run(replicas: 2, environment: ["GATEWAY_WORKERS": "2"]) { upstream, gateways, _ in
            upstream.upstream.setCacheControl("max-age=1")
            upstream.upstream.setStandingFault(.delay(milliseconds: 40))
            // Enough calls to span three expiries: each call costs at least
            // the upstream's 40 ms or a hit, so the clients run ~3.5 s.
            let start = ContinuousClock.now
            var answers: [FetchAnswer] = []
            var slowest = Duration.zero
            var rounds = 0
            while ContinuousClock.now - start < .milliseconds(3500) {
                let round = try await Self.overlap(gateways, clients: 4, calls: 5, tag: "expiring\(rounds)")
                answers += round.answers
                slowest = max(slowest, round.slowest)
                rounds += 1
            }
            Self.expectEveryAnswer(answers, count: rounds * 2 * 4 * 5)
            // The shared identifier was fetched again after each expiry.
            let fetchedShared = upstream.upstream.requests.filter { $0.identifiers.contains(Self.shared) }.count
            #expect(fetchedShared >= 3)
            let waits = try await Self.waits(gateways)
            #expect(waits["takeover"] == 0, "waits ended \(waits); the slowest call took \(slowest)")
            #expect(waits["deadline"] == 0, "waits ended \(waits)")
            #expect(waits["alone"] == 0, "waits ended \(waits)")
        }
    }
}
