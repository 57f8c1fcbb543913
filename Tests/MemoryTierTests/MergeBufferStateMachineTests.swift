@testable import GatewayMetrics
@testable import MemoryTier
import ProductsDomain
import Testing

/// How one loop's fetches are grouped into upstream calls, without a loop:
/// packing, scopes, the end of a turn, the window, stale flushes, and what
/// becomes of a merged call's outcome.
@Suite("MergeBufferStateMachine")
struct MergeBufferStateMachineTests {
    typealias Machine = MergeBufferStateMachine<String>

    static let de = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)
    static let fr = FetchScope(appID: "demo", country: CountryCode("FR")!, language: nil)
    static let deGerman = FetchScope(appID: "demo", country: CountryCode("DE")!, language: LanguageTag("de"))

    /// The members of each call, in order.
    static func members(_ calls: [Machine.Call]) -> [[String]] { calls.map(\.members) }

    // MARK: One turn (no window)

    @Test func theFirstFetchOfATurnArmsItsEndAndTheOthersJoinIt() {
        var machine = Machine(maxIdentifiers: 50, window: .zero)
        let first = machine.add("a", scope: Self.de, identifierCount: 5)
        #expect(first == Machine.Arming(generation: 0, endOfTurn: true))
        #expect(machine.add("b", scope: Self.de, identifierCount: 5).isEmpty)
        #expect(machine.add("c", scope: Self.de, identifierCount: 1).isEmpty)

        let calls = machine.turnEnded(generation: first.generation)
        #expect(Self.members(calls) == [["a", "b", "c"]])
        #expect(calls.map(\.identifierCount) == [11])
        #expect(calls.first?.scope == Self.de)
        #expect(machine.isEmpty)

        // The next turn starts over, under a generation of its own.
        let next = machine.add("d", scope: Self.de, identifierCount: 1)
        #expect(next == Machine.Arming(generation: 1, endOfTurn: true))
        #expect(Self.members(machine.turnEnded(generation: next.generation)) == [["d"]])
    }

    @Test func callsHoldAtMostTheCapAndFetchesStayWhole() {
        var machine = Machine(maxIdentifiers: 10, window: .zero)
        let arming = machine.add("a6", scope: Self.de, identifierCount: 6)
        _ = machine.add("b5", scope: Self.de, identifierCount: 5)
        _ = machine.add("c4", scope: Self.de, identifierCount: 4)
        _ = machine.add("d10", scope: Self.de, identifierCount: 10)
        _ = machine.add("e5", scope: Self.de, identifierCount: 5)
        let calls = machine.turnEnded(generation: arming.generation)
        // First fit in arrival order: c4 fills a6's call, e5 b5's.
        #expect(Self.members(calls) == [["a6", "c4"], ["b5", "e5"], ["d10"]])
        #expect(calls.map(\.identifierCount) == [10, 10, 10])
    }

    @Test func aFetchLargerThanTheCapGoesAlone() {
        var machine = Machine(maxIdentifiers: 10, window: .zero)
        let arming = machine.add("big", scope: Self.de, identifierCount: 12)
        _ = machine.add("small", scope: Self.de, identifierCount: 1)
        #expect(Self.members(machine.turnEnded(generation: arming.generation)) == [["big"], ["small"]])
    }

    @Test func scopesAreNeverMixed() {
        var machine = Machine(maxIdentifiers: 50, window: .zero)
        let arming = machine.add("de1", scope: Self.de, identifierCount: 1)
        _ = machine.add("fr1", scope: Self.fr, identifierCount: 1)
        _ = machine.add("deGerman1", scope: Self.deGerman, identifierCount: 1)
        _ = machine.add("de2", scope: Self.de, identifierCount: 1)
        _ = machine.add("fr2", scope: Self.fr, identifierCount: 1)
        let calls = machine.turnEnded(generation: arming.generation)
        #expect(Self.members(calls) == [["de1", "de2"], ["fr1", "fr2"], ["deGerman1"]])
        #expect(calls.map(\.scope) == [Self.de, Self.fr, Self.deGerman])
    }

    @Test func aFlushOfAnotherGenerationFindsNothing() {
        var machine = Machine(maxIdentifiers: 50, window: .zero)
        let first = machine.add("a", scope: Self.de, identifierCount: 1)
        #expect(Self.members(machine.turnEnded(generation: first.generation)) == [["a"]])
        let second = machine.add("b", scope: Self.de, identifierCount: 1)
        #expect(machine.turnEnded(generation: first.generation).isEmpty)
        #expect(!machine.isEmpty)
        #expect(Self.members(machine.turnEnded(generation: second.generation)) == [["b"]])
    }

    // MARK: A window

    @Test func withAWindowTheFirstFetchArmsItAndNothingGoesAtTheTurnsEnd() {
        var machine = Machine(maxIdentifiers: 50, window: .microseconds(2000))
        let first = machine.add("a", scope: Self.de, identifierCount: 5)
        #expect(first == Machine.Arming(generation: 0, endOfTurn: false, window: .microseconds(2000)))
        #expect(machine.add("b", scope: Self.de, identifierCount: 5).isEmpty)
        // A later turn, still within the window.
        #expect(machine.add("c", scope: Self.fr, identifierCount: 5).isEmpty)
        #expect(Self.members(machine.windowEnded(generation: first.generation)) == [["a", "b"], ["c"]])
        #expect(machine.isEmpty)
        #expect(machine.add("d", scope: Self.de, identifierCount: 1) == Machine.Arming(generation: 1, window: .microseconds(2000)))
    }

    @Test func withAWindowAFullCallGoesAtTheTurnsEndAndTheRestWaits() {
        var machine = Machine(maxIdentifiers: 10, window: .microseconds(50000))
        let first = machine.add("a4", scope: Self.de, identifierCount: 4)
        _ = machine.add("fr3", scope: Self.fr, identifierCount: 3)
        let filling = machine.add("b6", scope: Self.de, identifierCount: 6)
        #expect(filling == Machine.Arming(generation: 0, endOfTurn: true))
        // Once armed, another full call needs no second end of turn.
        #expect(machine.add("c10", scope: Self.de, identifierCount: 10).isEmpty)
        #expect(Self.members(machine.turnEnded(generation: filling.generation)) == [["a4", "b6"], ["c10"]])
        // The next full call arms an end of turn again.
        #expect(machine.add("d10", scope: Self.de, identifierCount: 10) == Machine.Arming(generation: 0, endOfTurn: true))
        #expect(Self.members(machine.turnEnded(generation: 0)) == [["d10"]])
        #expect(Self.members(machine.windowEnded(generation: first.generation)) == [["fr3"]])
    }

    @Test func aTurnsEndQueuedBeforeTheWindowEndedSendsNothingOfTheNextWindow() {
        var machine = Machine(maxIdentifiers: 2, window: .microseconds(100))
        let first = machine.add("full", scope: Self.de, identifierCount: 2)
        #expect(first == Machine.Arming(generation: 0, endOfTurn: true, window: .microseconds(100)))
        // The window's timer runs first.
        #expect(Self.members(machine.windowEnded(generation: 0)) == [["full"]])
        let next = machine.add("late", scope: Self.de, identifierCount: 1)
        #expect(next == Machine.Arming(generation: 1, window: .microseconds(100)))
        // The end of turn queued for the first window finds nothing to send.
        #expect(machine.turnEnded(generation: 0).isEmpty)
        #expect(machine.windowEnded(generation: 0).isEmpty)
        #expect(Self.members(machine.windowEnded(generation: next.generation)) == [["late"]])
    }

    // MARK: Outcomes

    @Test func a422OfAMergedCallIsAskedApartAndEverythingElseIsShared() {
        let rejected: Result<SourcePage, ProductsFetchFailure> = .failure(.invalidProductIdentifier(upstreamStatus: 422, detail: nil))
        #expect(Machine.fate(of: rejected, members: 3) == .askApart)
        #expect(Machine.fate(of: rejected, members: 1) == .shared)
        let others: [Result<SourcePage, ProductsFetchFailure>] = [
            .success(SourcePage(encodedProducts: [:], maxAgeSeconds: nil)),
            .failure(.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: nil)),
            .failure(.appNotRegistered(upstreamStatus: 404)),
            .failure(.connectionError(detail: "reset")),
            .failure(.internalError(upstreamStatus: 200, detail: "bad JSON")),
            .failure(.cancelled(detail: "shutting down")),
        ]
        for outcome in others { #expect(Machine.fate(of: outcome, members: 3) == .shared) }
    }
}

/// `gateway_upstream_identifiers_per_call`'s buckets follow
/// `UPSTREAM_MAX_IDS`: from 1 to the cap, the cap itself a bucket.
@Suite("Identifiers per upstream call")
struct UpstreamIdentifierBucketsTests {
    @Test func bucketsRunFromOneToTheCap() {
        #expect(GatewayMetrics.identifierBuckets(upTo: 50) == [1, 2, 3, 5, 10, 15, 20, 30, 40, 50])
        #expect(GatewayMetrics.identifierBuckets(upTo: 8) == [1, 2, 3, 5, 8])
        #expect(GatewayMetrics.identifierBuckets(upTo: 1) == [1])
        let widest = GatewayMetrics.identifierBuckets(upTo: 1000)
        #expect(widest.first == 1 && widest.last == 1000)
        #expect(widest == widest.sorted() && Set(widest).count == widest.count)
    }
}
