import EventTransport
@testable import GatewayMetrics
@testable import GatewayService
import JSONRPC
import Logging
@testable import MemoryTier
import MonotonicTime
import ProductsDomain

/// The continuation adapter of these tests: the service and its fetches
/// work by callback on a loop, and a test awaits them from a task. Each
/// step is handed to one real loop, as the HTTP front hands a request to
/// the loop that read it.
enum TestLoop {
    private static let group = try! EventLoopGroup(count: 1, namePrefix: "test-loop")
    static let shared: EventLoop = group.next()
}

extension ProductsFetchService {
    /// One call on ``TestLoop``, as the engine runs it.
    func fetch(params: JSONRPCParams?, requestID: String, arrived: MonotonicInstant = .now, logger: Logger) async -> Result<JSONValue, JSONRPCError> {
        await withCheckedContinuation { continuation in
            let loop = TestLoop.shared
            let context = RPCCallContext(requestID: requestID, logger: logger, loop: loop, arrived: arrived)
            _ = loop.execute {
                switch self.fetchImmediately(params: params, context: context) {
                case .answer(let outcome): continuation.resume(returning: outcome)
                case .later(let later): later { continuation.resume(returning: $0) }
                }
            }
        }
    }
}
