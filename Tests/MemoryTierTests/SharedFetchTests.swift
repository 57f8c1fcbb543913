@testable import GatewayMetrics
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
import Synchronization
import Testing

/// The shared fetch with real tasks: waiters, each waiter's own deadline,
/// and release at shutdown. No sockets.
@Suite("CoalescedFetch")
struct SharedFetchTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)
    static let page = SourcePage(encodedProducts: [:], maxAgeSeconds: 17)
    static let deadlineFailure = ProductsFetchFailure.cancelled(detail: "deadline")

    /// Both waiters are registered (on the loop, before the fetch ends)
    /// when it finishes: the outcome reaches them as waiters, not as
    /// latecomers answered at once.
    @Test(.timeLimit(.minutes(1))) func everyWaiterGetsTheOutcome() async {
        let fetch = CoalescedFetch(scope: Self.scope, identifiers: ["a"])
        let far = MonotonicInstant.now + .seconds(60)
        let loop = TestLoop.shared
        let got: [ProductsFetchFailure?] = await withCheckedContinuation { continuation in
            loop.execute {
                let collected = LoopCollected(count: 2, continuation: continuation)
                for _ in 0..<2 {
                    fetch.whenDone(on: loop, until: far, onDeadline: Self.deadlineFailure) { collected.add(failure(of: $0)) }
                }
                // Nothing delivered yet: both wait.
                #expect(fetch.settledOutcome == nil)
                fetch.finish(.failure(.appNotRegistered(upstreamStatus: 404)))
            }
        }
        #expect(got == [.appNotRegistered(upstreamStatus: 404), .appNotRegistered(upstreamStatus: 404)])
        // A waiter after the end gets the outcome at once.
        #expect(failure(of: await fetch.outcome(until: far, onDeadline: Self.deadlineFailure)) == .appNotRegistered(upstreamStatus: 404))
    }

    @Test func aWaiterWhoseDeadlinePassesLeavesAndTheOthersStillGetTheResult() async {
        let fetch = CoalescedFetch(scope: Self.scope, identifiers: ["a"])
        async let short = fetch.outcome(until: .now + .milliseconds(50), onDeadline: Self.deadlineFailure)
        async let long = fetch.outcome(until: .now + .seconds(60), onDeadline: Self.deadlineFailure)
        #expect(failure(of: await short) == Self.deadlineFailure)
        fetch.finish(.success(Self.page))
        guard case .success(let page) = await long else {
            Issue.record("the long waiter must get the fetch's result")
            return
        }
        #expect(page.maxAgeSeconds == 17)
    }

    /// A call that waits for its chunks one after another reaches the later
    /// ones with its deadline already behind it: it must leave with its own
    /// failure, not wait for a fetch that may take much longer.
    ///
    /// The waits are made on the loop itself, as a call's driver makes
    /// them, not from tasks: a task of the cooperative pool could start
    /// late on a machine busy with other tests (it did, under both
    /// sanitizers), and be taken for a waiter that missed its deadline.
    ///
    /// The fetches are never finished: a waiter that waited for its fetch
    /// instead of leaving would hold the test until its time limit.
    @Test(.timeLimit(.minutes(1))) func aWaiterArrivingAfterItsDeadlineLeavesAtOnce() async throws {
        let fetches = (0..<200).map { _ in CoalescedFetch(scope: Self.scope, identifiers: ["a"]) }
        let loop = TestLoop.shared
        let deadline = MonotonicInstant.now - .seconds(1)
        let got: [ProductsFetchFailure?] = await withCheckedContinuation { continuation in
            loop.execute {
                // Loop-confined: every callback runs on `loop`.
                let collected = LoopCollected(count: fetches.count, continuation: continuation)
                for fetch in fetches {
                    fetch.whenDone(on: loop, until: deadline, onDeadline: Self.deadlineFailure) { outcome in
                        collected.add(failure(of: outcome))
                    }
                }
            }
        }
        #expect(got.count == fetches.count)
        #expect(got.allSatisfy { $0 == Self.deadlineFailure })
    }

    /// Outcomes gathered on one loop until `count` came, then handed over.
    private final class LoopCollected: @unchecked Sendable {
        // @unchecked: touched on the test loop only.
        private var outcomes: [ProductsFetchFailure?] = []
        private let count: Int
        private let continuation: CheckedContinuation<[ProductsFetchFailure?], Never>

        init(count: Int, continuation: CheckedContinuation<[ProductsFetchFailure?], Never>) {
            self.count = count
            self.continuation = continuation
        }

        func add(_ outcome: ProductsFetchFailure?) {
            outcomes.append(outcome)
            if outcomes.count == count { continuation.resume(returning: outcomes) }
        }
    }

    @Test(.timeLimit(.minutes(1))) func releasingWaitersLeavesTheFetchToFinishOnItsOwn() async throws {
        let fetch = CoalescedFetch(scope: Self.scope, identifiers: ["a"])
        let loop = TestLoop.shared
        let released = ProductsFetchFailure.cancelled(detail: "the gateway is shutting down")
        // Registered on the loop, then released there: the waiter waits
        // when the release comes.
        let got: [ProductsFetchFailure?] = await withCheckedContinuation { continuation in
            loop.execute {
                let collected = LoopCollected(count: 1, continuation: continuation)
                fetch.whenDone(on: loop, until: .now + .seconds(60), onDeadline: Self.deadlineFailure) { collected.add(failure(of: $0)) }
                #expect(fetch.settledOutcome == nil)
                fetch.releaseWaiters(with: released)
            }
        }
        #expect(got == [released])
        // The fetch still finishes (no crash, nobody to resume); a later
        // waiter gets the release value.
        fetch.finish(.success(Self.page))
        #expect(failure(of: await fetch.outcome(until: .now + .seconds(60), onDeadline: Self.deadlineFailure)) == released)
    }

    private func failure(of outcome: CoalescedFetch.Outcome) -> ProductsFetchFailure? {
        if case .failure(let failure) = outcome { return failure }
        return nil
    }
}

/// Counts from any task.
final class Counter: Sendable {
    private let count = Mutex(0)

    var value: Int { count.withLock { $0 } }

    func increment() { count.withLock { $0 += 1 } }
}
