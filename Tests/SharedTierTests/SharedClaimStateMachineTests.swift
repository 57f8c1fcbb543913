@testable import GatewayMetrics
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
@testable import SharedTier
import Testing

/// Coalescing across replicas as a table of events and actions: no Redis,
/// no upstream, instants chosen by the test.
@Suite("SharedClaimStateMachine")
struct SharedClaimStateMachineTests {
    typealias Machine = SharedClaimStateMachine<String>
    static let t0 = MonotonicInstant.now
    static let poll = Duration.milliseconds(250)

    /// The actions as comparable text; a finish shows `machine`'s parts,
    /// as they were once the event returned.
    /// `fetched`: the outcome given to the event, when it was a fetch's end
    /// (the answer of a machine ``Machine/answeredByFetch``).
    static func describe(_ actions: Machine.Actions, _ machine: Machine? = nil, fetched: Machine.Outcome? = nil) -> [String] {
        actions.map { action in
            switch action {
            case .claim(let ids): "claim \(ids.sorted())"
            case .fetch(let ids, let claimed): "fetch \(ids.sorted()) claimed=\(claimed)"
            case .publish(let ids): "publish \(ids.sorted())"
            case .release(let ids): "release \(ids.sorted())"
            case .waitUntil(let instant): "wait +\(Int((instant - t0) / .milliseconds(1)))ms"
            case .finish:
                if machine?.answeredByFetch == true, let fetched { "finish \([describe(fetched)])" } else { "finish \(machine.map { $0.parts.map(describe) } ?? [])" }
            case .waitsEnded(let end, let count): "ended \(end.rawValue) x\(count)"
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
        Machine(identifiers: ids, deadline: t0 + deadline, poll: poll)
    }

    @Test func aReplicaThatWinsEveryClaimFetchesAndPublishes() {
        var machine = Self.machine(["a", "b"])
        #expect(Self.describe(machine.start(now: Self.t0), machine) == ["claim [\"a\", \"b\"]"])
        #expect(Self.describe(machine.claimed(["a", "b"], won: ["a", "b"], entries: nil, now: Self.t0), machine) == ["fetch [\"a\", \"b\"] claimed=true"])
        #expect(Self.describe(machine.fetched(["a", "b"], .success("page-ab"), claimed: true), machine) == [
            "publish [\"a\", \"b\"]", "finish [\"page-ab\"]",
        ])
        #expect(machine.isFinished)
    }

    /// The herd: another replica holds the claim; its published outcome
    /// (success or failure) answers this fetch without an upstream call.
    @Test(arguments: [Machine.Outcome.success("their-page"), .failure(.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: nil))])
    func aReplicaThatFindsAClaimWaitsForItsOutcome(outcome: Machine.Outcome) {
        var machine = Self.machine(["a"])
        _ = machine.start(now: Self.t0)
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0), machine) == ["wait +250ms"])
        #expect(machine.isWaiting)
        // A message about other identifiers changes nothing.
        #expect(Self.describe(machine.received(["z"], .success("other")), machine).isEmpty)
        #expect(Self.describe(machine.received(["a"], outcome), machine) == ["ended outcome x1", "finish [\"\(Self.describe(outcome))\"]"])
    }

    @Test func partlyOwnedPartlyWaitedPartlyFound() {
        var machine = Self.machine(["a", "b", "c", "d"], deadline: .seconds(30))
        _ = machine.start(now: Self.t0)
        let actions = machine.claimed(["a", "b", "c", "d"], won: ["a", "d"], entries: (page: "cached-cd", identifiers: ["c", "d"]), now: Self.t0)
        // d: won, but an entry answered it: released; c: held elsewhere but
        // answered by its entry; a fetched; b waited for (a poll, 250 ms).
        #expect(Self.describe(actions) == ["release [\"d\"]", "fetch [\"a\"] claimed=true", "wait +250ms"])
        #expect(machine.leased == ["a"])
        #expect(Self.describe(machine.fetched(["a"], .success("mine-a"), claimed: true), machine) == ["publish [\"a\"]"])
        #expect(Self.describe(machine.received(["b"], .success("theirs-b")), machine) == ["ended outcome x1", "finish [\"cached-cd\", \"mine-a\", \"theirs-b\"]"])
    }

    /// The claimer died: it stops renewing, its lease lapses, and the
    /// waiter's next poll (every 250 ms) takes over and fetches itself.
    @Test func aLapsedClaimIsTakenOverAtAPoll() {
        var machine = Self.machine(["a"], deadline: .seconds(30))
        _ = machine.start(now: Self.t0)
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0), machine) == ["wait +250ms"])
        // Still held at the first poll: wait again.
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .milliseconds(250)), machine) == ["claim [\"a\"]"])
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0 + .milliseconds(250)), machine) == ["wait +500ms"])
        // Lapsed by the fifth: won.
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .milliseconds(1250)), machine) == ["claim [\"a\"]"])
        #expect(Self.describe(machine.claimed(["a"], won: ["a"], entries: nil, now: Self.t0 + .milliseconds(1250)), machine) == ["ended takeover x1", "fetch [\"a\"] claimed=true"])
        #expect(machine.leased == ["a"])
        #expect(Self.describe(machine.fetched(["a"], .success("mine"), claimed: true), machine) == ["publish [\"a\"]", "finish [\"mine\"]"])
        #expect(machine.leased.isEmpty)
    }

    /// A lost message (a dropped connection, a refused PUBLISH) costs one
    /// poll: the entry the other replica stored answers the next look.
    @Test func aLostMessageCostsOnePoll() {
        var machine = Self.machine(["a", "b"], deadline: .seconds(30))
        _ = machine.start(now: Self.t0)
        _ = machine.claimed(["a", "b"], won: [], entries: nil, now: Self.t0)
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .milliseconds(250)), machine) == ["claim [\"a\", \"b\"]"])
        #expect(Self.describe(machine.claimed(["a", "b"], won: [], entries: (page: "stored-ab", identifiers: ["a", "b"]), now: Self.t0 + .milliseconds(250)), machine) == [
            "ended entry x2", "finish [\"stored-ab\"]",
        ])
    }

    /// Waiting never outlives the fetch's deadline.
    @Test func waitingEndsAtTheDeadline() {
        var machine = Self.machine(["a", "b"], deadline: .milliseconds(200))
        _ = machine.start(now: Self.t0)
        #expect(Self.describe(machine.claimed(["a", "b"], won: ["a"], entries: nil, now: Self.t0), machine) == ["fetch [\"a\"] claimed=true", "wait +200ms"])
        // b fails with cancelled; nothing to do until a's own fetch ends.
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .milliseconds(200)), machine) == ["ended deadline x1"])
        #expect(!machine.isWaiting)
        #expect(!machine.isFinished)
        #expect(Self.describe(machine.fetched(["a"], .success("mine"), claimed: true), machine) == ["publish [\"a\"]", "finish [\"cancelled\", \"mine\"]"])
    }

    /// The claimer gave up (its caller's deadline, or a lookup's lease no
    /// fetch needed): waiters look again at once, but not more than once
    /// per 50 ms, however many such messages come (forged ones included):
    /// one that comes sooner moves the next look to 50 ms after the last,
    /// not to the poll.
    @Test func aReleaseSendsWaitersBackToClaimingAtMostOncePerInterval() {
        var machine = Self.machine(["a"])
        _ = machine.start(now: Self.t0)
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0)
        #expect(Self.describe(machine.released(["a"], now: Self.t0 + .milliseconds(10)), machine) == ["wait +50ms"])
        #expect(Self.describe(machine.released(["a"], now: Self.t0 + .milliseconds(60)), machine) == ["claim [\"a\"]"])
        // Claiming already: nothing waits, so nothing to move.
        #expect(Self.describe(machine.released(["a"], now: Self.t0 + .milliseconds(100)), machine).isEmpty)
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0 + .milliseconds(61))
        for millisecond in 62..<110 {
            #expect(Self.describe(machine.released(["a"], now: Self.t0 + .milliseconds(millisecond)), machine) == ["wait +110ms"])
        }
        // A message about identifiers nobody waits for moves nothing.
        #expect(Self.describe(machine.released(["z"], now: Self.t0 + .milliseconds(70)), machine).isEmpty)
    }

    /// An outcome that arrives before this replica's claim reply is kept:
    /// the reply says another replica held the claim, and that outcome is
    /// the answer (no wait for a poll).
    @Test func anOutcomeBeforeTheClaimReplyIsKept() {
        var machine = Self.machine(["a", "b"], deadline: .seconds(30))
        _ = machine.start(now: Self.t0)
        #expect(Self.describe(machine.received(["a"], .success("theirs-a")), machine).isEmpty)
        #expect(Self.describe(machine.claimed(["a", "b"], won: ["b"], entries: nil, now: Self.t0), machine) == ["fetch [\"b\"] claimed=true"])
        #expect(Self.describe(machine.fetched(["b"], .success("mine-b"), claimed: true), machine) == ["publish [\"b\"]", "finish [\"theirs-a\", \"mine-b\"]"])
        // Won anyway (the other fetch released its lease just before this
        // claim came): its outcome still answers, and the claim is given
        // back instead of fetching a second time.
        var won = Self.machine(["a"])
        _ = won.start(now: Self.t0)
        _ = won.received(["a"], .success("theirs"))
        #expect(Self.describe(won.claimed(["a"], won: ["a"], entries: nil, now: Self.t0), won) == ["release [\"a\"]", "finish [\"theirs\"]"])
    }

    /// A waiter whose poll looks again while the fetch it waits for ends:
    /// the outcome message, arriving during that look, answers it even when
    /// the look won the lease the fetch had just given back. No second
    /// fetch, and no further wait.
    @Test func anOutcomeDuringALookAnswersEvenIfTheLookWon() {
        var machine = Self.machine(["a"], deadline: .seconds(30))
        _ = machine.start(now: Self.t0)
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0)
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .milliseconds(250)), machine) == ["claim [\"a\"]"])
        #expect(Self.describe(machine.received(["a"], .success("theirs")), machine).isEmpty)
        #expect(Self.describe(machine.claimed(["a"], won: ["a"], entries: nil, now: Self.t0 + .milliseconds(251)), machine) == [
            "ended outcome x1", "release [\"a\"]", "finish [\"theirs\"]",
        ])
        #expect(machine.leased.isEmpty)
    }

    /// A "released" message sooner than 50 ms after the last look: the look
    /// the timer makes then is one after a release, so a win fetches at
    /// once (no outcome will follow a release), flag or not.
    @Test func aReleaseTooSoonStillMakesTheNextLookOneAfterARelease() {
        var machine = Self.machine(["a"], deadline: .seconds(30))
        _ = machine.start(now: Self.t0)
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0)
        #expect(Self.describe(machine.released(["a"], now: Self.t0 + .milliseconds(1)), machine) == ["wait +50ms"])
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .milliseconds(50)), machine) == ["claim [\"a\"]"])
        #expect(Self.describe(machine.claimed(["a"], won: ["a"], unflagged: ["a"], entries: nil, now: Self.t0 + .milliseconds(51)), machine) == [
            "ended released x1", "fetch [\"a\"] claimed=true",
        ])
    }

    /// A look that finds the lease still held (the fetch is slower than a
    /// poll) waits again, and the message then ends the wait.
    @Test func aLookThatFindsTheLeaseHeldWaitsForTheMessage() {
        var machine = Self.machine(["a"], deadline: .seconds(30))
        _ = machine.start(now: Self.t0)
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0)
        _ = machine.pollDue(now: Self.t0 + .milliseconds(250))
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0 + .milliseconds(251)), machine) == ["wait +501ms"])
        #expect(Self.describe(machine.received(["a"], .failure(.connectionError(detail: "x"))), machine) == ["ended outcome x1", "finish [\"connectionError\"]"])
    }

    /// No lease can make a call fail: a lease still held after `patience`
    /// (`UPSTREAM_TIMEOUT_MS`) of waiting is not waited on any more: this
    /// replica fetches on its own, without a claim.
    @Test func aLeaseHeldLongerThanThePatienceIsFetchedOnOwn() {
        var machine = Machine(identifiers: ["a"], deadline: Self.t0 + .seconds(5), poll: Self.poll, patience: .milliseconds(400))
        _ = machine.start(now: Self.t0)
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0), machine) == ["wait +250ms"])
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .milliseconds(250)), machine) == ["claim [\"a\"]"])
        // Still held: the next look comes when the patience runs out.
        #expect(Self.describe(machine.claimed(["a"], won: [], entries: nil, now: Self.t0 + .milliseconds(251)), machine) == ["wait +400ms"])
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .milliseconds(400)), machine) == ["ended timeout x1", "fetch [\"a\"] claimed=false"])
        #expect(Self.describe(machine.fetched(["a"], .success("mine"), claimed: false), machine) == ["finish [\"mine\"]"])
    }

    /// With less time left than the patience, nothing is waited for: the
    /// wait could only end in `cancelled`.
    @Test func withLessTimeLeftThanThePatienceNothingIsWaitedFor() {
        var machine = Machine(identifiers: ["a", "b"], deadline: Self.t0 + .milliseconds(300), poll: Self.poll, patience: .milliseconds(400))
        _ = machine.start(now: Self.t0)
        #expect(Self.describe(machine.claimed(["a", "b"], won: ["b"], entries: nil, now: Self.t0), machine) == [
            "fetch [\"b\"] claimed=true", "ended timeout x1", "fetch [\"a\"] claimed=false",
        ])
        // And held at the start (the lookup found it): the same.
        var held = Machine(identifiers: ["a"], deadline: Self.t0 + .seconds(5), poll: Self.poll, patience: .milliseconds(400), held: ["a"])
        #expect(Self.describe(held.start(now: Self.t0), held) == ["wait +250ms"])
        #expect(Self.describe(held.pollDue(now: Self.t0 + .milliseconds(4700)), held) == ["ended timeout x1", "fetch [\"a\"] claimed=false"])
    }

    /// The call's lookup already took some leases and found others held:
    /// the fetch starts with no claim round trip of its own for them.
    @Test func leasesTheLookupTookAreFetchedAtOnce() {
        var machine = Machine(identifiers: ["a", "b", "c"], deadline: Self.t0 + .seconds(5), poll: Self.poll, won: ["a"], held: ["b"])
        #expect(Self.describe(machine.start(now: Self.t0), machine) == ["fetch [\"a\"] claimed=true", "claim [\"c\"]", "wait +250ms"])
        #expect(machine.leased == ["a"])
        var all = Machine(identifiers: ["a"], deadline: Self.t0 + .seconds(5), poll: Self.poll, won: ["a"])
        #expect(Self.describe(all.start(now: Self.t0), all) == ["fetch [\"a\"] claimed=true"])
        #expect(Self.describe(all.fetched(["a"], .success("mine"), claimed: true), all) == ["publish [\"a\"]", "finish [\"mine\"]"])
    }

    /// Redis could not be asked: fetch alone, publish nothing.
    @Test func withoutRedisTheReplicaFetchesAlone() {
        var machine = Self.machine(["a", "b"])
        _ = machine.start(now: Self.t0)
        #expect(Self.describe(machine.claimFailed(["a", "b"]), machine) == ["fetch [\"a\", \"b\"] claimed=false"])
        #expect(Self.describe(machine.fetched(["a", "b"], .failure(.connectionError(detail: "down")), claimed: false), machine) == ["finish [\"connectionError\"]"])
    }

    /// The tier was lost while waiting (the subscriber dropped, a probe of
    /// a stalled Redis failed): fetch alone at once, and wait no more.
    @Test func losingTheTierEndsEveryWait() {
        var machine = Self.machine(["a", "b", "c"], deadline: .seconds(30))
        _ = machine.start(now: Self.t0)
        _ = machine.claimed(["a", "b"], won: [], entries: nil, now: Self.t0)
        #expect(Self.describe(machine.sharedTierLost(), machine) == ["ended alone x2", "fetch [\"a\", \"b\"] claimed=false"])
        #expect(!machine.isWaiting)
        // A claim reply after that: what another replica holds is fetched too.
        #expect(Self.describe(machine.claimed(["c"], won: [], entries: nil, now: Self.t0), machine) == ["fetch [\"c\"] claimed=false"])
        #expect(Self.describe(machine.fetched(["a", "b"], .success("ab"), claimed: false), machine).isEmpty)
        #expect(Self.describe(machine.fetched(["c"], .success("c"), claimed: false), machine) == ["finish [\"ab\", \"c\"]"])
    }

    /// A finished machine never finishes twice; late messages are ignored.
    @Test func lateEventsAfterTheFinishAreIgnored() {
        var machine = Self.machine(["a"])
        _ = machine.start(now: Self.t0)
        _ = machine.claimed(["a"], won: [], entries: nil, now: Self.t0)
        _ = machine.received(["a"], .success("p"))
        #expect(Self.describe(machine.received(["a"], .success("again")), machine).isEmpty)
        #expect(Self.describe(machine.pollDue(now: Self.t0 + .seconds(9)), machine).isEmpty)
    }

    // MARK: Starting at `.fetch` (the usual miss: the lookup won every lease)

    static func fetching(_ ids: [String], deadline: Duration = .seconds(5)) -> Machine {
        Machine(fetching: ids, deadline: t0 + deadline, poll: poll, patience: .milliseconds(400))
    }

    /// The first action fetches every identifier, as the lookup listed them
    /// (its own array), under the leases; the fetch's end publishes and
    /// finishes, whatever the outcome.
    @Test(arguments: [Machine.Outcome.success("mine"), .failure(.connectionError(detail: "down")), .failure(.cancelled(detail: "deadline"))])
    func startingAtFetchFetchesEveryIdentifierThenPublishes(outcome: Machine.Outcome) throws {
        var machine = Self.fetching(["b", "a"])
        #expect(!machine.hearsOthers)
        #expect(machine.leased == ["a", "b"])
        let start = Array(machine.start(now: Self.t0))
        try #require(start.count == 1)
        guard case .fetch(let ids, claimed: true) = start[0] else { Issue.record("not a claimed fetch"); return }
        #expect(ids == ["b", "a"])
        #expect(!machine.isFinished)
        let text = Self.describe(outcome)
        #expect(Self.describe(machine.fetched(["b", "a"], outcome, claimed: true), machine, fetched: outcome) == ["publish [\"a\", \"b\"]", "finish [\"\(text)\"]"])
        #expect(machine.isFinished)
        #expect(machine.leased.isEmpty)
        #expect(Self.describe(machine.fetched(["b", "a"], outcome, claimed: true), machine).isEmpty)
    }

    /// Every event but the fetch's end, before it: what each makes a
    /// machine started at `.fetch` do.
    enum Event: String, CaseIterable, Sendable {
        case claimReply, claimFailed, outcomeMessage, releasedMessage, pollDue, pollPastDeadline, tierLost
    }

    static func apply(_ event: Event, to machine: inout Machine) -> [String] {
        switch event {
        case .claimReply: describe(machine.claimed(["a", "b"], won: ["a", "b"], entries: (page: "cached", identifiers: ["a"]), now: t0))
        case .claimFailed: describe(machine.claimFailed(["a", "b"]))
        case .outcomeMessage: describe(machine.received(["a", "b"], .success("theirs")))
        case .releasedMessage: describe(machine.released(["a", "b"], now: t0 + .seconds(1)))
        case .pollDue: describe(machine.pollDue(now: t0 + poll))
        case .pollPastDeadline: describe(machine.pollDue(now: t0 + .seconds(9)))
        case .tierLost: describe(machine.sharedTierLost())
        }
    }

    /// The table: started at `.fetch`, no event but the fetch's end asks
    /// for anything (nothing is claimed, waited for or released: the leases
    /// are its fetch's until it publishes), exactly as for a machine that
    /// claimed and won every lease; and the fetch still ends it.
    @Test(arguments: Event.allCases)
    func startingAtFetchOnlyItsFetchEndsIt(event: Event) {
        var started = Self.fetching(["a", "b"])
        _ = started.start(now: Self.t0)
        var claimed = Machine(identifiers: ["a", "b"], deadline: Self.t0 + .seconds(5), poll: Self.poll, patience: .milliseconds(400), won: ["a", "b"])
        _ = claimed.start(now: Self.t0)
        #expect(Self.apply(event, to: &started).isEmpty)
        #expect(Self.apply(event, to: &claimed).isEmpty)
        #expect(started.leased == ["a", "b"])
        #expect(!started.isWaiting)
        #expect(!started.isFinished)
        let end = ["publish [\"a\", \"b\"]", "finish [\"mine\"]"]
        #expect(Self.describe(started.fetched(["a", "b"], .success("mine"), claimed: true), started, fetched: .success("mine")) == end)
        #expect(started.answeredByFetch)
        #expect(Self.describe(claimed.fetched(["a", "b"], .success("mine"), claimed: true), claimed, fetched: .success("mine")) == end)
        #expect(!claimed.answeredByFetch)
    }

    /// A fetch of part of its identifiers (not one the driver makes) turns
    /// the machine into its table of statuses: each part publishes, the
    /// last finishes, as a machine that won every lease.
    @Test func startingAtFetchTakesPartsAsTheTableDoes() {
        var machine = Self.fetching(["a", "b", "c"])
        _ = machine.start(now: Self.t0)
        #expect(Self.describe(machine.fetched(["a"], .success("pa"), claimed: true), machine) == ["publish [\"a\"]"])
        #expect(machine.leased == ["b", "c"])
        #expect(Self.describe(machine.fetched(["a", "z"], .success("again"), claimed: false), machine).isEmpty)
        #expect(Self.describe(machine.fetched(["c", "b"], .failure(.connectionError(detail: "down")), claimed: true), machine) == [
            "publish [\"b\", \"c\"]", "finish [\"pa\", \"connectionError\"]",
        ])
    }

    /// Nothing to fetch: finished at once.
    @Test func startingAtFetchWithNothingFinishesAtOnce() {
        var machine = Self.fetching([])
        #expect(Self.describe(machine.start(now: Self.t0), machine) == ["finish []"])
        #expect(machine.isFinished)
    }

    /// A machine that claims or waits hears other replicas; one that only
    /// fetches under the lookup's leases does not.
    @Test func whoHearsOtherReplicas() {
        #expect(Self.machine(["a"]).hearsOthers)
        #expect(Machine(identifiers: ["a", "b"], deadline: Self.t0 + .seconds(5), poll: Self.poll, won: ["a"]).hearsOthers)
        #expect(Machine(identifiers: ["a"], deadline: Self.t0 + .seconds(5), poll: Self.poll, held: ["a"]).hearsOthers)
        #expect(!Machine(identifiers: ["a", "b"], deadline: Self.t0 + .seconds(5), poll: Self.poll, won: ["a", "b"]).hearsOthers)
        #expect(!Self.fetching(["a", "b"]).hearsOthers)
    }

    /// The inline list keeps order past its two inline places.
    @Test func theInlineListKeepsOrder() {
        var list = SharedInlineList<Int>()
        #expect(list.isEmpty)
        #expect(Array(list).isEmpty)
        list.append(1)
        #expect(Array(list) == [1])
        list.append(2)
        list.append(3)
        var more = SharedInlineList(4)
        more.append(5)
        list += more
        #expect(list.count == 5)
        #expect(Array(list) == [1, 2, 3, 4, 5])
    }
}
