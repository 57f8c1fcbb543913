@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
import JSONRPC
import Testing

/// A call's deadline (`GATEWAY_REQUEST_TIMEOUT_MS`, 5 s here) counts from
/// its request's arrival, so a batch that waited for its turn has less of
/// it left; a call waiting for a fetch leaves it at its own deadline. No
/// sockets, on manual time: each rule is checked at the last instant it
/// allows and at the first it does not.
@Suite("Deadlines from arrival", .timeLimit(.minutes(1)))
struct CallDeadlineTests {
    static let deadlineMessage = "The call was cancelled: the call's deadline of 5000 ms passed (GATEWAY_REQUEST_TIMEOUT_MS)"

    @Test func aCallWhoseDeadlinePassedBeforeItStartedFetchesNothingAndIsCancelled() async throws {
        let gateway = ManualTimeService(upstreamMaxIDs: 2)
        let outcome = try await gateway.fetch(["premium_monthly", "coins_100"], arrivedAgo: .seconds(5))
        let error = try #require(outcome.failure)
        #expect(error.code == -32005)
        #expect(error.message == Self.deadlineMessage)
        let data = error.data?.objectValue
        #expect(data?["reason"] == .string("cancelled"))
        #expect(data?["retryable"] == .bool(true))
        #expect(data?["requestId"] == .string("r"))
        #expect(gateway.source.asked.isEmpty)
    }

    @Test func aLateCallIsStillAnsweredFromMemoryAndAnInTimeOneFetches() async throws {
        let gateway = ManualTimeService(upstreamMaxIDs: 2)
        let ids = ["premium_monthly", "coins_100"]
        gateway.source.script(.page(maxAge: 30))
        // 1 ms of the 5 s left: still in time, so it fetches.
        let inTime = try await gateway.fetch(ids, arrivedAgo: .milliseconds(4_999))
        #expect(try inTime.get().serialized() == AnswerBytesTests.treeResult(ids))
        #expect(gateway.source.asked == [ids])
        // Past its deadline, but everything it asks is in memory: no wait, an answer.
        let late = try await gateway.fetch(ids, arrivedAgo: .seconds(6))
        #expect(try late.get().serialized() == AnswerBytesTests.treeResult(ids))
        #expect(gateway.source.asked.count == 1)
    }

    /// The fetch hangs: the call is answered `cancelled` at its deadline,
    /// not a moment before; the fetch goes on, and what it brings is kept.
    @Test func aCallWaitingForAFetchIsCancelledAtItsDeadline() async throws {
        let gateway = ManualTimeService()
        let call = try await gateway.start(["coins_100"], arrivedAgo: .seconds(1))
        #expect(gateway.source.heldCount == 1)
        await gateway.clock.advance(by: .milliseconds(3_999))
        #expect(call.answered == nil)
        await gateway.clock.advance(by: .milliseconds(1))
        // Answered by the deadline's timer itself, within the advance.
        let error = try #require(call.answered?.failure)
        #expect(error.code == -32005)
        #expect(error.message == Self.deadlineMessage)

        await gateway.source.answerHeld(.page(maxAge: 30))
        #expect(try await gateway.fetch(["coins_100"]).get().serialized() == AnswerBytesTests.treeResult(["coins_100"]))
        #expect(gateway.source.asked == [["coins_100"]])
        #expect(gateway.counter("gateway_cache_hits_total") == 1)
    }

    /// Calls that join one fetch wait for it until their own deadlines: the
    /// first leaves at its own, the second stays and gets the products.
    @Test func callsJoiningOneFetchLeaveItEachAtTheirOwnDeadline() async throws {
        let gateway = ManualTimeService()
        let first = try await gateway.start(["coins_100"])
        await gateway.clock.advance(by: .seconds(2))
        let second = try await gateway.start(["coins_100"])
        #expect(gateway.source.asked == [["coins_100"]])

        await gateway.clock.advance(by: .milliseconds(2_999))
        #expect(first.answered == nil)
        await gateway.clock.advance(by: .milliseconds(1))
        #expect(first.answered?.failure?.message == Self.deadlineMessage)
        #expect(second.answered == nil)

        await gateway.clock.advance(by: .milliseconds(1_999))
        #expect(second.answered == nil)
        await gateway.source.answerHeld(.page(maxAge: 30))
        #expect(try await second.outcome().get().serialized() == AnswerBytesTests.treeResult(["coins_100"]))
        #expect(gateway.source.asked.count == 1)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
