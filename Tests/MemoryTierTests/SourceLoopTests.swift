import EventTransport
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
import Synchronization
import Testing

/// A source completes on the loop of the call that asked, always: the
/// coalescer's waiters each on their own loop, whichever loop ran the
/// fetch; the catalog and the merging source on the asking loop, after
/// `fetch` returned. On real loops.
@Suite("Sources complete on the caller's loop", .timeLimit(.minutes(1)))
final class SourceLoopTests {
    let group: EventLoopGroup
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)

    init() throws {
        group = try EventLoopGroup(count: 2, namePrefix: "source-loop")
    }

    deinit {
        group.shutdown()
    }

    /// Where a completion ran, and what it brought.
    struct Arrival: Sendable, Equatable {
        let onItsLoop: Bool
        let onTheOtherLoop: Bool
        let products: [String]
    }

    static func arrival(_ outcome: Result<SourcePage, ProductsFetchFailure>, on loop: EventLoop, other: EventLoop) -> Arrival {
        Arrival(
            onItsLoop: loop.inEventLoop, onTheOtherLoop: other.inEventLoop,
            products: ((try? outcome.get())?.encodedProducts.keys).map { $0.sorted() } ?? []
        )
    }

    static func request(_ identifiers: [String]) -> SourceRequest {
        SourceRequest(scope: scope, identifiers: identifiers, requestID: "r", deadline: .now + .seconds(30))
    }

    /// The fetch the first loop claimed, for the test to finish.
    final class Claimed: Sendable {
        let fetch = Mutex<CoalescedFetch?>(nil)
    }

    @Test func theCoalescerJoinedFromTwoLoopsAnswersEachOnItsOwn() async throws {
        let (first, second) = (group.loops[0], group.loops[1])
        let coalescer = Coalescer()
        let far = MonotonicInstant.now + .seconds(30)
        let failure = ProductsFetchFailure.cancelled(detail: "deadline")
        let registered = Registrations()
        let claimed = Claimed()
        // The first loop claims and runs the fetch; the second joins it.
        async let onFirst = withCheckedContinuation { (done: CheckedContinuation<Arrival, Never>) in
            first.execute {
                let claim = coalescer.claim(scope: Self.scope, identifiers: ["premium_monthly"], chunkSize: 50)
                #expect(claim.started.count == 1)
                claimed.fetch.withLock { $0 = claim.started[0] }
                claim.started[0].whenDone(on: first, until: far, onDeadline: failure) { outcome in
                    done.resume(returning: Self.arrival(outcome, on: first, other: second))
                }
                registered.increment()
            }
        }
        await registered.reached(1)
        async let onSecond = withCheckedContinuation { (done: CheckedContinuation<Arrival, Never>) in
            second.execute {
                let claim = coalescer.claim(scope: Self.scope, identifiers: ["premium_monthly"], chunkSize: 50)
                #expect(claim.started.isEmpty && claim.joinedIdentifierCount == 1)
                claim.fetches[0].whenDone(on: second, until: far, onDeadline: failure) { outcome in
                    done.resume(returning: Self.arrival(outcome, on: second, other: first))
                }
                registered.increment()
            }
        }
        await registered.reached(2)
        let fetch = try #require(claimed.fetch.withLock { $0 })
        let source = CatalogProductSource(catalog: .sample)
        first.execute {
            source.fetch(Self.request(fetch.identifiers), on: first) { outcome in
                coalescer.finish(fetch, with: outcome)
            }
        }
        let expected = Arrival(onItsLoop: true, onTheOtherLoop: false, products: ["premium_monthly"])
        #expect(await onFirst == expected)
        #expect(await onSecond == expected)
    }

    @Test func theCatalogAnswersOnTheAskingLoopAfterFetchReturns() async {
        let (loop, other) = (group.loops[1], group.loops[0])
        let source = CatalogProductSource(catalog: .sample)
        let (arrival, returnedFirst) = await withCheckedContinuation { (done: CheckedContinuation<(Arrival, Bool), Never>) in
            loop.execute {
                let returned = LoopBoundBox(false, loop: loop)
                source.fetch(Self.request(["coins_100"]), on: loop) { outcome in
                    done.resume(returning: (Self.arrival(outcome, on: loop, other: other), returned.value))
                }
                returned.value = true
            }
        }
        #expect(arrival == Arrival(onItsLoop: true, onTheOtherLoop: false, products: ["coins_100"]))
        #expect(returnedFirst)
    }

    @Test func theMergingSourceAnswersEachFetchOnItsLoop() async {
        let (loop, other) = (group.loops[1], group.loops[0])
        let source = MergingSource(base: CatalogProductSource(catalog: .sample), loops: group.loops, maxIdentifiers: 50, window: .zero)
        let arrivals = await withCheckedContinuation { (done: CheckedContinuation<[Arrival], Never>) in
            loop.execute {
                let arrivals = LoopBoundBox([Arrival](), loop: loop)
                // One turn: the two go out merged, and come back apart.
                for identifier in ["premium_monthly", "coins_100"] {
                    source.fetch(Self.request([identifier]), on: loop) { outcome in
                        arrivals.value.append(Self.arrival(outcome, on: loop, other: other))
                        if arrivals.value.count == 2 { done.resume(returning: arrivals.value) }
                    }
                }
            }
        }
        #expect(arrivals == [
            Arrival(onItsLoop: true, onTheOtherLoop: false, products: ["premium_monthly"]),
            Arrival(onItsLoop: true, onTheOtherLoop: false, products: ["coins_100"]),
        ])
    }
}
