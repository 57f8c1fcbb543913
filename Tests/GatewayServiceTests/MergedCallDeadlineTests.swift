import EventTransport
@testable import GatewayMetrics
@testable import GatewayService
import JSONRPC
import ManualTime
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
import Synchronization
import Testing

/// The call over the merge buffer, on a real loop: a caller whose deadline
/// passes leaves the merged call to the others. The source below the
/// buffer is answered by the test; each step waits for the event it needs
/// (a request made, an answer given), and the deadline passes on manual
/// time.
@Suite("A merged call's deadlines", .timeLimit(.minutes(1)))
final class MergedCallDeadlineTests {
    typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    /// What the source was asked, with where and how to answer it.
    struct Asked: Sendable {
        let request: SourceRequest
        let loop: EventLoop
        let completion: @Sendable (Outcome) -> Void
    }

    /// A source whose requests arrive on a stream, to be answered by hand.
    final class StreamedSource: ProductSource {
        let asked: AsyncStream<Asked>
        private let sink: AsyncStream<Asked>.Continuation

        init() {
            (asked, sink) = AsyncStream.makeStream(of: Asked.self)
        }

        func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Outcome) -> Void) {
            sink.yield(Asked(request: request, loop: loop, completion: completion))
        }

        /// Ends the stream: what was asked before still comes out of it.
        func finish() { sink.finish() }
    }

    let group: EventLoopGroup

    init() throws {
        group = try EventLoopGroup(count: 1, namePrefix: "merged-deadline")
    }

    deinit {
        group.shutdown()
    }

    /// Two calls started in one turn, one of them about to reach its
    /// deadline: it is answered `cancelled` at its deadline, and the
    /// merged call goes on and answers the other.
    @Test func aCallWhoseDeadlinePassesLeavesTheMergedCallToTheOthers() async throws {
        let base = StreamedSource()
        let loop = group.loops[0]
        let source = MergingSource(base: base, loops: [loop], maxIdentifiers: 50, window: .zero)
        let clock = ManualClock()
        let service = ProductsFetchService(
            settings: .init(
                appID: "demo",
                limits: FetchProductsLimits(maxIdentifiers: 100),
                requestTimeout: .seconds(60),
                upstreamMaxIDs: 50,
                cacheMaxTTLSeconds: 60,
                regionResolver: RegionResolver(configuredDefault: nil, systemLocale: SystemLocale(environment: [:]))
            ),
            source: source,
            metrics: GatewayMetrics(),
            sharedTier: nil,
            clock: clock.gatewayClock
        )
        let (answers, answered) = AsyncStream.makeStream(of: (name: String, outcome: Result<JSONValue, JSONRPCError>).self)
        let names = Mutex<[String]>([])
        let first = try AnswerBytesTests.params(["premium_monthly"])
        let second = try AnswerBytesTests.params(["coins_100"])
        loop.execute {
            // All but 300 ms of the deadline gone for the first, none for the second.
            for (name, params, arrived) in [("leaving", first, clock.now - .milliseconds(59_700)), ("staying", second, clock.now)] {
                let context = RPCCallContext(requestID: name, logger: AnswerBytesTests.logger, loop: loop, arrived: arrived)
                let answer: @Sendable (Result<JSONValue, JSONRPCError>) -> Void = { outcome in
                    names.withLock { $0.append(name) }
                    answered.yield((name, outcome))
                }
                switch service.fetchImmediately(params: params, context: context) {
                case .answer(let outcome): answer(outcome)
                case .later(let later): later(answer)
                }
            }
        }
        var requests = base.asked.makeAsyncIterator()
        let merged = try #require(await requests.next())
        #expect(merged.request.identifiers == ["premium_monthly", "coins_100"])
        await clock.advance(by: .milliseconds(299))
        #expect(names.withLock { $0 }.isEmpty)
        await clock.advance(by: .milliseconds(1))
        #expect(names.withLock { $0 } == ["leaving"])
        // The leaving call is answered first, while the merged call is
        // still out.
        var outcomes = answers.makeAsyncIterator()
        let leaving = try #require(await outcomes.next())
        #expect(leaving.name == "leaving")
        #expect(leaving.outcome.failure?.code == -32005)
        let page = Catalog.sample.page(ids: merged.request.identifiers, country: merged.request.scope.country, language: merged.request.scope.language)
        merged.loop.execute { merged.completion(.success(SourcePage(page: page, maxAgeSeconds: nil))) }
        let staying = try #require(await outcomes.next())
        #expect(staying.name == "staying")
        #expect(try staying.outcome.get().serialized() == AnswerBytesTests.treeResult(["coins_100"]))
        // One request only: the merged call was not asked again.
        base.finish()
        #expect(await requests.next() == nil)
    }
}
