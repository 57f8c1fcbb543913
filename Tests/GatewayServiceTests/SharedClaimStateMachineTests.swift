@testable import GatewayService
import ProductsDomain
import Testing

/// Coalescing across replicas as a table of events and actions: no Redis,
/// no upstream, instants chosen by the test.
@Suite("SharedClaimStateMachine")
struct SharedClaimStateMachineTests {
    typealias Machine = SharedClaimStateMachine<String>
    static let t0 = ContinuousClock.now
    static let lapse = Duration.seconds(6)

    /// The actions as comparable text.
    static func describe(_ actions: [Machine.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .claim(let ids): "claim \(ids.sorted())"
            case .fetch(let ids, let claimed): "fetch \(ids.sorted()) claimed=\(claimed)"
            case .publish(let ids, let outcome): "publish \(ids.sorted()) \(describe(outcome))"
            case .release(let ids): "release \(ids.sorted())"
            case .waitUntil(let instant): "wait +\((instant - t0).components.seconds)s"
            case .finish(let parts): "finish \(parts.map(describe))"
            }
        }
    }

    static func describe(_ outcome: Machine.Outcome) -> String {
        switch outcome {
        case .success(let page): page
        case .failure(let failure): failure.reason
        }
    }

    static func machine(_ ids: [String], deadline: Duration = .seconds(5)) -> Machine {
        Machine(identifiers: ids, deadline: t0 + deadline, lapse: lapse)
    }

    @Test func aReplicaThatWinsEveryClaimFetchesAndPublishes() {
        var machine = Self.machine(["a", "b"])
        #expect(Self.describe(machine.start()) == ["claim [\"a\", \"b\"]"])
        #expect(Self.describe(machine.claimed(["a", "b"], won: ["a", "b"], entries: nil, now: Self.t0)) == ["fetch [\"a\", \"b\"] claimed=true"])
        #expect(Self.describe(machine.fetched(["a", "b"], .success("page-ab"), claimed: true)) == [
            "publish [\"a\", \"b\"] page-ab", "finish [\"page-ab\"]",
        ])
        #expect(machine.isFinished)
    }

    /// The herd: another replica holds the claim; its published outcome
    /// (success or failure) answers this fetch without an upstream call.
    @Test(arguments: [Machine.Outcome.success("their-page"), .failure(.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: nil))])
    func aReplicaThatFindsAClaimWaitsForItsOutcome(outcome: Machine.Outcome) {
        var machine = Self.machine(["a"])
        _ = machine.start()
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0)) == ["wait +5s"])
        #expect(machine.isWaiting)
        // A message about other identifiers changes nothing.
        #expect(Self.describe(machine.received(["z"], .success("other"))).isEmpty)
        #expect(Self.describe(machine.received(["a"], outcome)) == ["finish [\"\(Self.describe(outcome))\"]"])
    }

    @Test func partlyOwnedPartlyWaitedPartlyFound() {
        var machine = Self.machine(["a", "b", "c", "d"], deadline: .seconds(30))
        _ = machine.start()
        let actions = machine.claimed(["a", "b", "c", "d"], won: ["a", "d"], entries: (page: "cached-cd", identifiers: ["c", "d"]), now: Self.t0)
        // d: won, but an entry answered it: released; c: held elsewhere but
        // answered by its entry; a fetched; b waited for (lapse 6 s).
        #expect(Self.describe(actions) == ["release [\"d\"]", "fetch [\"a\"] claimed=true", "wait +6s"])
        #expect(Self.describe(machine.fetched(["a"], .success("mine-a"), claimed: true)) == ["publish [\"a\"] mine-a"])
        #expect(Self.describe(machine.received(["b"], .success("theirs-b"))) == ["finish [\"cached-cd\", \"mine-a\", \"theirs-b\"]"])
    }

    /// The claimer died: its claim lapses, the waiter claims again, wins,
    /// and fetches itself.
    @Test func aLapsedClaimIsTakenOver() {
        var machine = Self.machine(["a"], deadline: .seconds(30))
        _ = machine.start()
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0)) == ["wait +6s"])
        #expect(Self.describe(machine.lapsed(now: Self.t0 + .seconds(6))) == ["claim [\"a\"]"])
        #expect(Self.describe(machine.claimed(["a"], won: ["a"], entries: nil, now: Self.t0 + .seconds(6))) == ["fetch [\"a\"] claimed=true"])
        #expect(Self.describe(machine.fetched(["a"], .success("mine"), claimed: true)) == ["publish [\"a\"] mine", "finish [\"mine\"]"])
    }

    /// Another replica took over first: wait again.
    @Test func aTakeOverLostWaitsAgain() {
        var machine = Self.machine(["a"], deadline: .seconds(30))
        _ = machine.start()
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0)
        _ = machine.lapsed(now: Self.t0 + .seconds(6))
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0 + .seconds(6))) == ["wait +12s"])
    }

    /// Waiting never outlives the fetch's deadline.
    @Test func waitingEndsAtTheDeadline() {
        var machine = Self.machine(["a", "b"], deadline: .seconds(2))
        _ = machine.start()
        #expect(Self.describe(machine.claimed(["a", "b"], won: ["a"], entries: nil, now: Self.t0)) == ["fetch [\"a\"] claimed=true", "wait +2s"])
        // b fails with cancelled; nothing to do until a's own fetch ends.
        #expect(Self.describe(machine.lapsed(now: Self.t0 + .seconds(2))).isEmpty)
        #expect(!machine.isWaiting)
        #expect(!machine.isFinished)
        #expect(Self.describe(machine.fetched(["a"], .success("mine"), claimed: true)) == ["publish [\"a\"] mine", "finish [\"cancelled\", \"mine\"]"])
    }

    /// The claimer gave up (its caller's deadline): waiters claim at once.
    @Test func aReleaseSendsWaitersBackToClaiming() {
        var machine = Self.machine(["a"])
        _ = machine.start()
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0)
        #expect(Self.describe(machine.released(["a"])) == ["claim [\"a\"]"])
        #expect(Self.describe(machine.released(["a"])).isEmpty)
    }

    /// Redis could not be asked: fetch alone, publish nothing.
    @Test func withoutRedisTheReplicaFetchesAlone() {
        var machine = Self.machine(["a", "b"])
        _ = machine.start()
        #expect(Self.describe(machine.claimFailed(["a", "b"])) == ["fetch [\"a\", \"b\"] claimed=false"])
        #expect(Self.describe(machine.fetched(["a", "b"], .failure(.connectionError(detail: "down")), claimed: false)) == ["finish [\"connectionError\"]"])
    }

    /// The tier was lost while waiting (the subscriber dropped, a probe of
    /// a stalled Redis failed): fetch alone at once, and wait no more.
    @Test func losingTheTierEndsEveryWait() {
        var machine = Self.machine(["a", "b", "c"], deadline: .seconds(30))
        _ = machine.start()
        _ = machine.claimed(["a", "b"], won: [], entries: nil, now: Self.t0)
        #expect(Self.describe(machine.sharedTierLost()) == ["fetch [\"a\", \"b\"] claimed=false"])
        #expect(!machine.isWaiting)
        // A claim reply after that: what another replica holds is fetched too.
        #expect(Self.describe(machine.claimed(["c"], won: [], entries: nil, now: Self.t0)) == ["fetch [\"c\"] claimed=false"])
        #expect(Self.describe(machine.fetched(["a", "b"], .success("ab"), claimed: false)).isEmpty)
        #expect(Self.describe(machine.fetched(["c"], .success("c"), claimed: false)) == ["finish [\"ab\", \"c\"]"])
    }

    /// A finished machine never finishes twice; late messages are ignored.
    @Test func lateEventsAfterTheFinishAreIgnored() {
        var machine = Self.machine(["a"])
        _ = machine.start()
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0)
        _ = machine.received(["a"], .success("p"))
        #expect(Self.describe(machine.received(["a"], .success("again"))).isEmpty)
        #expect(Self.describe(machine.lapsed(now: Self.t0 + .seconds(9))).isEmpty)
    }
}
