@testable import GatewayMetrics
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
import Testing

/// Shutdown's waits with real tasks and no clock: for the calls in flight
/// (``InFlightCounter``) and for the shared fetches (``Coalescer``).
@Suite("InFlightCounter and fetch ownership")
struct InFlightCounterTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)
    static let page = SourcePage(page: UpstreamProductsPage(items: [], notFound: ["a"]), maxAgeSeconds: nil)
    static let released = ProductsFetchFailure.cancelled(detail: "the gateway is shutting down")

    @Test func theLastLeaveEndsTheWait() async {
        let counter = InFlightCounter()
        counter.enter()
        counter.enter()
        let waiting = Task { await counter.waitUntilIdle() }
        counter.leave()
        #expect(counter.count == 1)
        counter.leave()
        #expect(await waiting.value == true)
        #expect(counter.count == 0)
    }

    @Test func cancellingTheWaitEndsItWithoutIdle() async {
        let counter = InFlightCounter()
        counter.enter()
        let waiting = Task { await counter.waitUntilIdle() }
        waiting.cancel()
        #expect(await waiting.value == false)
        #expect(counter.count == 1)
        counter.leave()
    }

    /// After the grace the front still waits for the cancelled calls'
    /// answers: that wait must not end on cancellation.
    @Test func anUncancellableWaitEndsOnlyWhenIdle() async {
        let counter = InFlightCounter()
        counter.enter()
        let waiting = Task { await counter.waitUntilIdle(cancellable: false) }
        waiting.cancel()
        counter.leave()
        #expect(await waiting.value == true)
    }

    @Test func shutdownWaitsForTheLastSharedFetch() async {
        let coalescer = Coalescer()
        let claim = coalescer.claim(scope: Self.scope, identifiers: ["a", "b"], chunkSize: 1)
        #expect(claim.started.count == 2)
        #expect(coalescer.runningCount == 2)
        let waiting = Task { await coalescer.waitUntilIdle() }
        coalescer.finish(claim.started[0], with: .success(Self.page))
        #expect(coalescer.runningCount == 1)
        coalescer.finish(claim.started[1], with: .failure(.connectionError(detail: "reset")))
        #expect(await waiting.value == true)
        #expect(coalescer.runningCount == 0)
        // Finished fetches are forgotten: the next call claims anew.
        #expect(coalescer.claim(scope: Self.scope, identifiers: ["a"], chunkSize: 1).started.count == 1)
    }

    /// Once the grace is over every wait on a fetch ends at once with
    /// `cancelled`: the waits already there, a call joining a fetch in
    /// flight, and a call whose fetch starts only now.
    @Test func afterTheReleaseEveryWaitOnAFetchEndsAtOnce() async {
        let coalescer = Coalescer()
        let first = coalescer.claim(scope: Self.scope, identifiers: ["a"], chunkSize: 10)
        let far = MonotonicInstant.now + .seconds(3600)
        let deadline = ProductsFetchFailure.cancelled(detail: "deadline")
        let waiting = Task { await first.fetches[0].outcome(until: far, onDeadline: deadline) }

        coalescer.releaseWaiters(with: Self.released)
        #expect(failure(of: await waiting.value) == Self.released)

        let later = coalescer.claim(scope: Self.scope, identifiers: ["a", "b"], chunkSize: 10)
        #expect(later.fetches.count == 2)
        #expect(later.started.count == 1)
        for fetch in later.fetches {
            #expect(failure(of: await fetch.outcome(until: far, onDeadline: deadline)) == Self.released)
        }
        // The fetches themselves still end, and shutdown sees them end.
        coalescer.finish(first.started[0], with: .success(Self.page))
        coalescer.finish(later.started[0], with: .success(Self.page))
        #expect(coalescer.runningCount == 0)
        #expect(await coalescer.waitUntilIdle() == true)
    }

    private func failure(of outcome: CoalescedFetch.Outcome) -> ProductsFetchFailure? {
        if case .failure(let failure) = outcome { return failure }
        return nil
    }
}
