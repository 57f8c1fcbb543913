import EventTransport
@testable import MemoryTier
import MonotonicTime
import ProductsDomain

/// The continuation adapter of these tests: a fetch's waiters work by
/// callback on a loop, and a test awaits them from a task, on one real
/// loop.
enum TestLoop {
    private static let group = try! EventLoopGroup(count: 1, namePrefix: "test-loop")
    static let shared: EventLoop = group.next()
}

extension CoalescedFetch {
    /// Waits for the outcome on ``TestLoop``, until `deadline`.
    func outcome(until deadline: MonotonicInstant, onDeadline failure: ProductsFetchFailure) async -> Outcome {
        await withCheckedContinuation { continuation in
            let loop = TestLoop.shared
            _ = loop.execute {
                self.whenDone(on: loop, until: deadline, onDeadline: failure) { continuation.resume(returning: $0) }
            }
        }
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
