import EventTransport
@testable import GatewayMetrics
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
import Synchronization
import Testing

/// The per-loop merge buffer on a real loop, over a source the test
/// answers by hand: what one loop job starts goes out together, each fetch
/// gets its own products, a 422 is asked again apart. No sockets. (A call
/// whose deadline passes leaving the merged call to the others is tested
/// through the call, in GatewayServiceTests' MergedCallDeadlineTests.)
@Suite("Merging source")
final class MergingSourceTests {
    typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    let group: EventLoopGroup
    var loop: EventLoop { group.loops[0] }
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)

    init() throws {
        group = try EventLoopGroup(count: 1, namePrefix: "merging")
    }

    deinit {
        group.shutdown()
    }

    /// A source that keeps every request until the test answers it.
    final class HeldSource: ProductSource {
        struct Asked {
            let request: SourceRequest
            let loop: EventLoop
            /// Dropped once answered: a merged call's completion holds the
            /// source (to ask again apart), which would otherwise hold it.
            var completion: (@Sendable (Outcome) -> Void)?
        }

        private let asked = Mutex<[Asked]>([])

        func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Outcome) -> Void) {
            asked.withLock { $0.append(Asked(request: request, loop: loop, completion: completion)) }
        }

        var requests: [SourceRequest] { asked.withLock { $0.map(\.request) } }

        /// Answers request `index` on its loop, as the upstream client does.
        func answer(_ index: Int, _ outcome: Outcome) {
            let (loop, completion) = asked.withLock { asked in
                defer { asked[index].completion = nil }
                return (asked[index].loop, asked[index].completion)
            }
            guard let completion else { preconditionFailure("request \(index) answered twice") }
            loop.execute { completion(outcome) }
        }

        /// Answers request `index` from the sample catalog, every product.
        func answerFromCatalog(_ index: Int) {
            let request = requests[index]
            let page = Catalog.sample.page(ids: request.identifiers, country: request.scope.country, language: request.scope.language)
            answer(index, .success(SourcePage(page: page, maxAgeSeconds: nil)))
        }

        /// Waits (polling: only the order of events matters) until `count`
        /// requests were made, 20 s at most; the sleep is the poll's interval.
        func waitForRequests(_ count: Int) async throws {
            let deadline = MonotonicInstant.now + .seconds(20)
            while requests.count < count {
                guard MonotonicInstant.now < deadline else { throw CancellationError() }
                // Polls for the event (`count` requests), 20 s at most: the sleep is only the poll's interval.
                try await Task.sleep(for: .milliseconds(2))
            }
        }
    }

    /// What each fetch got: products by identifier, or the failure.
    final class Outcomes: Sendable {
        private let outcomes = Mutex<[String: Result<Set<String>, ProductsFetchFailure>]>([:])

        func record(_ name: String) -> @Sendable (Outcome) -> Void {
            { outcome in self.outcomes.withLock { $0[name] = outcome.map { Set($0.encodedProducts.keys) } } }
        }

        /// Waits for `count` outcomes, 20 s at most (polling: the sleep is
        /// only the interval).
        func waitFor(_ count: Int) async throws -> [String: Result<Set<String>, ProductsFetchFailure>] {
            let deadline = MonotonicInstant.now + .seconds(20)
            while outcomes.withLock({ $0.count }) < count {
                guard MonotonicInstant.now < deadline else { throw CancellationError() }
                // Polls for the event (`count` outcomes), 20 s at most: the sleep is only the poll's interval.
                try await Task.sleep(for: .milliseconds(2))
            }
            return outcomes.withLock { $0 }
        }
    }

    static func request(_ ids: [String], id: String, deadline: MonotonicInstant = .now + .seconds(5)) -> SourceRequest {
        SourceRequest(scope: scope, identifiers: ids, requestID: id, deadline: deadline)
    }

    @Test func fetchesStartedInOneTurnShareOneCallAndEachGetsItsOwnProducts() async throws {
        let base = HeldSource()
        let source = MergingSource(base: base, loops: [loop], maxIdentifiers: 50, window: .zero)
        let loop = self.loop
        let outcomes = Outcomes()
        let early = MonotonicInstant.now + .seconds(1)
        let late = MonotonicInstant.now + .seconds(9)
        loop.execute {
            source.fetch(Self.request(["premium_monthly", "unknown_a"], id: "r1", deadline: early), on: loop, completion: outcomes.record("first"))
            source.fetch(Self.request(["coins_100"], id: "r2", deadline: late), on: loop, completion: outcomes.record("second"))
        }
        try await base.waitForRequests(1)
        let merged = try #require(base.requests.first)
        #expect(merged.identifiers == ["premium_monthly", "unknown_a", "coins_100"])
        #expect(merged.requestID == "r1")
        // Retries may run as long as the latest caller waits.
        #expect(merged.deadline == late)
        base.answerFromCatalog(0)
        let got = try await outcomes.waitFor(2)
        #expect(try got["first"]?.get() == ["premium_monthly"])
        #expect(try got["second"]?.get() == ["coins_100"])
        #expect(base.requests.count == 1)
    }

    @Test func aFetchStartedInALaterTurnGoesInACallOfItsOwn() async throws {
        let base = HeldSource()
        let source = MergingSource(base: base, loops: [loop], maxIdentifiers: 50, window: .zero)
        let loop = self.loop
        let outcomes = Outcomes()
        loop.execute { source.fetch(Self.request(["premium_monthly"], id: "r1"), on: loop, completion: outcomes.record("first")) }
        try await base.waitForRequests(1)
        loop.execute { source.fetch(Self.request(["coins_100"], id: "r2"), on: loop, completion: outcomes.record("second")) }
        try await base.waitForRequests(2)
        #expect(base.requests.map(\.identifiers) == [["premium_monthly"], ["coins_100"]])
        base.answerFromCatalog(0)
        base.answerFromCatalog(1)
        #expect(try await outcomes.waitFor(2).count == 2)
    }

    @Test func a422OfAMergedCallIsAskedAgainApartAndFailsOnlyTheRejectedFetch() async throws {
        let base = HeldSource()
        let source = MergingSource(base: base, loops: [loop], maxIdentifiers: 50, window: .zero)
        let loop = self.loop
        let outcomes = Outcomes()
        loop.execute {
            source.fetch(Self.request(["premium_monthly"], id: "r1"), on: loop, completion: outcomes.record("first"))
            source.fetch(Self.request(["rejected_pack"], id: "r2"), on: loop, completion: outcomes.record("second"))
            source.fetch(Self.request(["coins_100"], id: "r3"), on: loop, completion: outcomes.record("third"))
        }
        try await base.waitForRequests(1)
        let rejected = ProductsFetchFailure.invalidProductIdentifier(upstreamStatus: 422, detail: "rejected_pack")
        base.answer(0, .failure(rejected))
        try await base.waitForRequests(4)
        let apart = base.requests.dropFirst()
        // Each asked again as it was, with its own request id.
        #expect(apart.map(\.identifiers) == [["premium_monthly"], ["rejected_pack"], ["coins_100"]])
        #expect(apart.map(\.requestID) == ["r1", "r2", "r3"])
        base.answerFromCatalog(1)
        base.answer(2, .failure(rejected))
        base.answerFromCatalog(3)
        let got = try await outcomes.waitFor(3)
        #expect(try got["first"]?.get() == ["premium_monthly"])
        #expect(got["second"]?.failure == rejected)
        #expect(try got["third"]?.get() == ["coins_100"])
        #expect(base.requests.count == 4)
    }

    /// Two fetches started in one loop job, so merged: `premium_monthly`
    /// (request `r1`, recorded as "first") and `coins_100` (`r2`, "second").
    func startTwo(on source: MergingSource, outcomes: Outcomes) {
        let loop = self.loop
        loop.execute {
            source.fetch(Self.request(["premium_monthly"], id: "r1"), on: loop, completion: outcomes.record("first"))
            source.fetch(Self.request(["coins_100"], id: "r2"), on: loop, completion: outcomes.record("second"))
        }
    }

    /// A merged call the upstream is slow on is hedged: each fetch in it is
    /// asked again apart, and each takes the first answer, once. One slow
    /// identifier then delays the others by the hedge's wait, not by its
    /// own slowness.
    @Test func aSlowMergedCallIsHedgedAndEachFetchTakesTheFirstAnswer() async throws {
        let base = HeldSource()
        let outcomes = Outcomes()
        startTwo(on: MergingSource(base: base, loops: [loop], maxIdentifiers: 50, window: .zero, hedgeAfter: .milliseconds(20)), outcomes: outcomes)
        // The merged call, then (unanswered) each fetch again, apart.
        try await base.waitForRequests(3)
        #expect(base.requests.map(\.identifiers) == [["premium_monthly", "coins_100"], ["premium_monthly"], ["coins_100"]])
        #expect(base.requests.map(\.requestID) == ["r1", "r1", "r2"])
        // The second's own call answers first; then the merged call, which
        // answers the first; the first's own call comes last and changes
        // nothing.
        base.answerFromCatalog(2)
        #expect(try await outcomes.waitFor(1)["second"].map { try $0.get() } == ["coins_100"])
        base.answerFromCatalog(0)
        let got = try await outcomes.waitFor(2)
        #expect(try got["first"]?.get() == ["premium_monthly"])
        base.answer(1, .failure(.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: nil)))
        #expect(try await outcomes.waitFor(2)["first"].map { try $0.get() } == ["premium_monthly"])
        #expect(base.requests.count == 3)
    }

    /// Once hedged, a fetch is not failed by the merged call's failure: its
    /// own call may still succeed, and does here.
    @Test func aHedgedFetchOutlivesTheMergedCallsFailure() async throws {
        let base = HeldSource()
        let outcomes = Outcomes()
        startTwo(on: MergingSource(base: base, loops: [loop], maxIdentifiers: 50, window: .zero, hedgeAfter: .milliseconds(20)), outcomes: outcomes)
        try await base.waitForRequests(3)
        base.answer(0, .failure(.connectionError(detail: "timed out")))
        base.answerFromCatalog(1)
        base.answerFromCatalog(2)
        let got = try await outcomes.waitFor(2)
        #expect(try got["first"]?.get() == ["premium_monthly"])
        #expect(try got["second"]?.get() == ["coins_100"])
    }

    @Test func anyOtherFailureReachesEveryFetchOnce() async throws {
        let base = HeldSource()
        let outcomes = Outcomes()
        startTwo(on: MergingSource(base: base, loops: [loop], maxIdentifiers: 50, window: .zero), outcomes: outcomes)
        try await base.waitForRequests(1)
        let failure = ProductsFetchFailure.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: 2)
        base.answer(0, .failure(failure))
        let got = try await outcomes.waitFor(2)
        #expect(got["first"]?.failure == failure)
        #expect(got["second"]?.failure == failure)
        #expect(base.requests.count == 1)
    }
}
