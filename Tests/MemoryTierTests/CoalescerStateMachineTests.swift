@testable import GatewayMetrics
@testable import MemoryTier
import ProductsDomain
import Testing

/// The coalescer's bookkeeping, without sockets: who fetches which
/// identifier of which scope, and when an identifier is free again.
@Suite("CoalescerStateMachine")
struct CoalescerStateMachineTests {
    /// Stands in for a shared fetch: only its identity matters.
    final class Probe {}

    static let de = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)

    @Test func nothingInFlightLeavesEveryIdentifierUnclaimed() {
        let machine = CoalescerStateMachine<Probe>()
        let plan = machine.plan(scope: Self.de, identifiers: ["a", "b", "c"])
        #expect(plan.joined.isEmpty)
        #expect(plan.joinedIdentifierCount == 0)
        #expect(plan.unclaimed.map(\.identifier) == ["a", "b", "c"])
        #expect(machine.fetches.isEmpty)
    }

    @Test func aWaiterJoinsTheFetchInFlightOnceAndClaimsOnlyTheRest() {
        var machine = CoalescerStateMachine<Probe>()
        let first = Probe()
        machine.register(first, identifiers: ["a", "b"], scope: Self.de)

        let plan = machine.plan(scope: Self.de, identifiers: ["a", "x", "b", "y"])
        #expect(plan.joined.count == 1)
        #expect(plan.joined.first === first)
        #expect(plan.joinedIdentifierCount == 2)
        #expect(plan.unclaimed.map(\.identifier) == ["x", "y"])
    }

    @Test func identifiersBeforeTheFirstJoinedOneStayUnclaimedInOrder() {
        var machine = CoalescerStateMachine<Probe>()
        let first = Probe()
        machine.register(first, identifiers: ["c"], scope: Self.de)
        // Something else in flight, nothing of it asked: all unclaimed.
        #expect(machine.plan(scope: Self.de, identifiers: ["x", "y"]).unclaimed.map(\.identifier) == ["x", "y"])

        let plan = machine.plan(scope: Self.de, identifiers: ["x", "y", "c", "z"])
        #expect(plan.joined.count == 1)
        #expect(plan.joined.first === first)
        #expect(plan.joinedIdentifierCount == 1)
        #expect(plan.unclaimed.map(\.identifier) == ["x", "y", "z"])
    }

    @Test func overlappingCallsJoinEveryFetchTheyNeedEachOnce() {
        var machine = CoalescerStateMachine<Probe>()
        let first = Probe()
        let second = Probe()
        machine.register(first, identifiers: ["a", "b"], scope: Self.de)
        machine.register(second, identifiers: ["c"], scope: Self.de)

        let plan = machine.plan(scope: Self.de, identifiers: ["c", "a", "b", "d"])
        #expect(plan.joined.count == 2)
        #expect(plan.joined.first === second)
        #expect(plan.joined.last === first)
        #expect(plan.joinedIdentifierCount == 3)
        #expect(plan.unclaimed.map(\.identifier) == ["d"])
        #expect(machine.fetches.count == 2)
    }

    @Test(arguments: [
        FetchScope(appID: "demo", country: CountryCode("FR")!, language: nil),
        FetchScope(appID: "demo", country: CountryCode("DE")!, language: LanguageTag("de")),
        FetchScope(appID: "other", country: CountryCode("DE")!, language: nil),
    ])
    func anotherScopeNeverJoins(scope: FetchScope) {
        var machine = CoalescerStateMachine<Probe>()
        machine.register(Probe(), identifiers: ["a"], scope: Self.de)
        let plan = machine.plan(scope: scope, identifiers: ["a"])
        #expect(plan.joined.isEmpty)
        #expect(plan.joinedIdentifierCount == 0)
        #expect(plan.unclaimed.map(\.identifier) == ["a"])
    }

    @Test func finishReleasesTheKeysSoTheNextCallFetchesAnew() {
        var machine = CoalescerStateMachine<Probe>()
        let fetch = Probe()
        machine.register(fetch, identifiers: ["a", "b"], scope: Self.de)
        machine.finish(fetch, identifiers: ["a", "b"], scope: Self.de)

        #expect(machine.inFlight.isEmpty)
        #expect(machine.fetches.isEmpty)
        let plan = machine.plan(scope: Self.de, identifiers: ["a", "b"])
        #expect(plan.joined.isEmpty)
        #expect(plan.unclaimed.map(\.identifier) == ["a", "b"])
    }

    @Test func aLateFinishOfAnOldFetchLeavesTheNewOneInPlace() {
        var machine = CoalescerStateMachine<Probe>()
        let old = Probe()
        let new = Probe()
        machine.register(old, identifiers: ["a"], scope: Self.de)
        machine.finish(old, identifiers: ["a"], scope: Self.de)
        machine.register(new, identifiers: ["a"], scope: Self.de)
        machine.finish(old, identifiers: ["a"], scope: Self.de)

        let plan = machine.plan(scope: Self.de, identifiers: ["a"])
        #expect(plan.joined.first === new)
        #expect(plan.unclaimed.isEmpty)
    }

    @Test func finishingOneFetchLeavesTheOthersInFlight() {
        var machine = CoalescerStateMachine<Probe>()
        let first = Probe()
        let second = Probe()
        machine.register(first, identifiers: ["a"], scope: Self.de)
        machine.register(second, identifiers: ["b"], scope: Self.de)
        machine.finish(first, identifiers: ["a"], scope: Self.de)

        let plan = machine.plan(scope: Self.de, identifiers: ["a", "b"])
        #expect(plan.unclaimed.map(\.identifier) == ["a"])
        #expect(plan.joined.count == 1)
        #expect(plan.joined.first === second)
        #expect(machine.fetches.count == 1)
    }
}
