@testable import GatewayMetrics
@testable import GatewayService
import JSONRPC
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
@testable import SharedTier
import Testing

/// A call's control flow as a table: events in, the next action out. No
/// loop, no socket, no clock: instants are made up.
@Suite("Products call state machine")
struct ProductsCallStateMachineTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)
    static let region = ResolvedRegion(countryCode: CountryCode("DE")!, source: .explicit)
    static let now = MonotonicInstant.now
    static let product = EncodedJSON(.object(["productIdentifier": .string("a")]))

    static func machine(_ identifiers: [String], deadline: MonotonicInstant = now + .seconds(5)) -> ProductsCallStateMachine {
        ProductsCallStateMachine(call: CallInProgress(identifiers: identifiers, scope: scope, region: region, requestID: "r", deadline: deadline))
    }

    static func page(_ identifiers: [String]) -> SourcePage {
        SourcePage(encodedProducts: Dictionary(uniqueKeysWithValues: identifiers.map { ($0, product) }), maxAgeSeconds: 30)
    }

    /// The name of an action, and what it carries that a table can compare.
    static func describe(_ action: ProductsCallStateMachine.Action) -> String {
        switch action {
        case .lookUpSharedTier(let ids): "lookUpSharedTier \(ids)"
        case .fetch(let ids): "fetch \(ids)"
        case .waitFor(let fetch): "waitFor \(fetch.identifiers)"
        case .coverWithStale(let fetch): "coverWithStale \(fetch.identifiers)"
        case .deadlinePassed: "deadlinePassed"
        case .answer(.success): "answer success"
        case .answer(.failure(let failure)): "answer \(failure.reason)"
        }
    }

    @Test func everyProductInMemoryAnswersAtOnce() {
        var machine = Self.machine(["a"])
        machine.call.answers[0] = .product(Self.product)
        #expect(Self.describe(machine.memoryLookedUp(sharedTier: true, now: Self.now)) == "answer success")
        #expect(machine.isAnswered)
    }

    @Test func aMissAsksTheSharedTierFirstAndFetchesWhatItLacks() {
        var machine = Self.machine(["a", "b", "c"])
        machine.call.answers[1] = .unknown
        #expect(Self.describe(machine.memoryLookedUp(sharedTier: true, now: Self.now)) == #"lookUpSharedTier ["a", "c"]"#)
        machine.call.answers[0] = .product(Self.product) // the shared tier held "a"
        #expect(Self.describe(machine.sharedTierAnswered(now: Self.now)) == #"fetch ["c"]"#)
        let fetch = CoalescedFetch(scope: Self.scope, identifiers: ["c"])
        #expect(Self.describe(machine.fetchesClaimed([fetch])) == #"waitFor ["c"]"#)
        #expect(Self.describe(machine.fetchEnded(.success(Self.page(["c"])))) == "answer success")
        #expect(machine.call.missing.isEmpty)
    }

    @Test func theSharedTierHoldingEverythingAnswersWithoutAFetch() {
        var machine = Self.machine(["a"])
        #expect(Self.describe(machine.memoryLookedUp(sharedTier: true, now: Self.now)) == #"lookUpSharedTier ["a"]"#)
        machine.call.answers[0] = .product(Self.product)
        #expect(Self.describe(machine.sharedTierAnswered(now: Self.now)) == "answer success")
    }

    @Test func withoutTheSharedTierAMissFetchesAtOnce() {
        var machine = Self.machine(["a", "b"])
        #expect(Self.describe(machine.memoryLookedUp(sharedTier: false, now: Self.now)) == #"fetch ["a", "b"]"#)
    }

    @Test func aCallPastItsDeadlineStartsNoFetch() {
        var machine = Self.machine(["a"], deadline: Self.now)
        #expect(Self.describe(machine.memoryLookedUp(sharedTier: false, now: Self.now)) == "deadlinePassed")
        #expect(machine.isAnswered)
        var shared = Self.machine(["a"], deadline: Self.now + .milliseconds(1))
        _ = shared.memoryLookedUp(sharedTier: true, now: Self.now)
        #expect(Self.describe(shared.sharedTierAnswered(now: Self.now + .milliseconds(1))) == "deadlinePassed")
    }

    @Test func fetchesAreWaitedForInTurnAndTheMostSevereFailureAnswers() {
        var machine = Self.machine(["a", "b", "c"])
        _ = machine.memoryLookedUp(sharedTier: false, now: Self.now)
        let fetches = [["a"], ["b"], ["c"]].map { CoalescedFetch(scope: Self.scope, identifiers: $0) }
        #expect(Self.describe(machine.fetchesClaimed(fetches)) == #"waitFor ["a"]"#)
        #expect(Self.describe(machine.fetchEnded(.failure(.invalidProductIdentifier(upstreamStatus: 422, detail: nil)))) == #"waitFor ["b"]"#)
        #expect(Self.describe(machine.fetchEnded(.success(Self.page(["b"])))) == #"waitFor ["c"]"#)
        #expect(Self.describe(machine.fetchEnded(.failure(.appNotRegistered(upstreamStatus: 404)))) == "answer appNotRegistered")
    }

    @Test func aFailureStaleEntriesMayCoverIsTriedFirst() {
        var machine = Self.machine(["a", "b"])
        _ = machine.memoryLookedUp(sharedTier: false, now: Self.now)
        let fetches = [["a"], ["b"]].map { CoalescedFetch(scope: Self.scope, identifiers: $0) }
        _ = machine.fetchesClaimed(fetches)
        let down = ProductsFetchFailure.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: nil)
        #expect(Self.describe(machine.fetchEnded(.failure(down))) == #"coverWithStale ["a"]"#)
        // Covered: the failure is not the call's, and the next fetch is waited for.
        #expect(Self.describe(machine.staleCovered(complete: true)) == #"waitFor ["b"]"#)
        #expect(Self.describe(machine.fetchEnded(.failure(down))) == #"coverWithStale ["b"]"#)
        // Not covered: the call fails with it.
        #expect(Self.describe(machine.staleCovered(complete: false)) == "answer serviceUnavailable")
    }

    @Test func theFirstAnswerForASlotWins() {
        var machine = Self.machine(["a"])
        _ = machine.memoryLookedUp(sharedTier: false, now: Self.now)
        let fetches = [CoalescedFetch(scope: Self.scope, identifiers: ["a"]), CoalescedFetch(scope: Self.scope, identifiers: ["a"])]
        _ = machine.fetchesClaimed(fetches)
        let first = EncodedJSON(.object(["first": .bool(true)]))
        _ = machine.fetchEnded(.success(SourcePage(encodedProducts: ["a": first], maxAgeSeconds: nil)))
        _ = machine.fetchEnded(.success(Self.page(["a"])))
        #expect(machine.call.answers[0] == .product(first))
    }

    @Test func aPageNamingNothingAskedLeavesTheSlotToTheInvalidList() throws {
        var machine = Self.machine(["a"])
        _ = machine.memoryLookedUp(sharedTier: false, now: Self.now)
        _ = machine.fetchesClaimed([CoalescedFetch(scope: Self.scope, identifiers: ["a"])])
        guard case .answer(.success(let result)) = machine.fetchEnded(.success(Self.page(["other"]))) else {
            Issue.record("the call must answer")
            return
        }
        #expect(String(decoding: result.bytes, as: UTF8.self).contains(#""invalidProductIdentifiers":["a"]"#))
    }
}
