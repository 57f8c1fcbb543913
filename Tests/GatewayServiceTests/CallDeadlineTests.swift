@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import RedisTier
import JSONRPC
import Testing

/// A call's deadline (`GATEWAY_REQUEST_TIMEOUT_MS`, 5 s here) counts from
/// its request's arrival, so a batch that waited for its turn has less of
/// it left. No sockets: the sample catalog as the source, counting calls.
@Suite("Deadlines from arrival")
struct CallDeadlineTests {
    @Test func aCallWhoseDeadlinePassedBeforeItStartedFetchesNothingAndIsCancelled() async throws {
        let source = AnswerBytesTests.CountingSource(maxAgeSeconds: 30)
        let service = AnswerBytesTests.service(source: source)
        let outcome = await service.fetch(
            params: try AnswerBytesTests.params(["premium_monthly", "coins_100"]),
            requestID: "r-late",
            arrived: .now - .seconds(6),
            logger: AnswerBytesTests.logger
        )
        let error = try #require(outcome.failure)
        #expect(error.code == -32005)
        #expect(error.message == "The call was cancelled: the call's deadline of 5000 ms passed (GATEWAY_REQUEST_TIMEOUT_MS)")
        let data = error.data?.objectValue
        #expect(data?["reason"] == .string("cancelled"))
        #expect(data?["retryable"] == .bool(true))
        #expect(data?["requestId"] == .string("r-late"))
        #expect(source.calls.withLock { $0.isEmpty })
    }

    @Test func aLateCallIsStillAnsweredFromMemoryAndAnInTimeOneFetches() async throws {
        let source = AnswerBytesTests.CountingSource(maxAgeSeconds: 30)
        let service = AnswerBytesTests.service(source: source)
        let ids = ["premium_monthly", "coins_100"]
        // 4 s of the 5 gone: still in time, so it fetches.
        let inTime = await service.fetch(params: try AnswerBytesTests.params(ids), requestID: "r", arrived: .now - .seconds(4), logger: AnswerBytesTests.logger)
        #expect(try inTime.get().serialized() == AnswerBytesTests.treeResult(ids))
        #expect(source.calls.withLock { $0 } == [ids])
        // Past its deadline, but everything it asks is in memory: no wait, an answer.
        let late = await service.fetch(params: try AnswerBytesTests.params(ids), requestID: "r", arrived: .now - .seconds(6), logger: AnswerBytesTests.logger)
        #expect(try late.get().serialized() == AnswerBytesTests.treeResult(ids))
        #expect(source.calls.withLock { $0.count } == 1)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
