import EventTransport
@testable import GatewayMetrics
@testable import GatewayService
import JSONRPC
import ManualTime
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
import Synchronization

/// A source the test answers: each fetch takes the next scripted reply, or
/// is held for the test to answer (``answerHeld(_:)``) when none is left.
final class ScriptedSource: ProductSource {
    typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    /// How a fetch is answered.
    enum Reply: Sendable {
        /// The sample catalog's products, with these directives.
        case page(maxAge: Int?, staleIfError: Int? = nil, revalidate: Int? = nil)
        case failure(ProductsFetchFailure)
    }

    struct Held: Sendable {
        let request: SourceRequest
        let loop: EventLoop
        let completion: @Sendable (Outcome) -> Void
    }

    private let state = Mutex<(script: [Reply], held: [Held], asked: [[String]])>(([], [], []))

    /// The identifiers of every fetch, in order.
    var asked: [[String]] { state.withLock { $0.asked } }
    /// How many fetches are held, unanswered.
    var heldCount: Int { state.withLock { $0.held.count } }

    /// The next fetches are answered with `replies`, in order.
    func script(_ replies: Reply...) {
        state.withLock { $0.script.append(contentsOf: replies) }
    }

    func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Outcome) -> Void) {
        let reply: Reply? = state.withLock { state in
            state.asked.append(request.identifiers)
            guard !state.script.isEmpty else {
                state.held.append(Held(request: request, loop: loop, completion: completion))
                return nil
            }
            return state.script.removeFirst()
        }
        // On the loop's next turn, as a real source answers.
        if let reply { loop.execute { completion(Self.outcome(reply, for: request)) } }
    }

    static func outcome(_ reply: Reply, for request: SourceRequest) -> Outcome {
        switch reply {
        case .page(let maxAge, let staleIfError, let revalidate):
            let page = Catalog.sample.page(ids: request.identifiers, country: request.scope.country, language: request.scope.language)
            return .success(SourcePage(page: page, maxAgeSeconds: maxAge, staleIfErrorSeconds: staleIfError, staleWhileRevalidateSeconds: revalidate))
        case .failure(let failure):
            return .failure(failure)
        }
    }

    /// Answers the oldest held fetch with `reply`, on its loop, and returns
    /// once that answer has been taken (stored, handed to the waiters).
    func answerHeld(_ reply: Reply) async {
        let held = state.withLock { $0.held.isEmpty ? nil : $0.held.removeFirst() }
        guard let held else { preconditionFailure("no fetch is held") }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            held.loop.execute {
                held.completion(Self.outcome(reply, for: held.request))
                done.resume()
            }
        }
    }
}

/// One call started on the loop, answered later: its outcome once it came.
final class PendingCall: Sendable {
    typealias Outcome = Result<JSONValue, JSONRPCError>
    private let state = Mutex<(outcome: Outcome?, waiting: CheckedContinuation<Outcome, Never>?)>((nil, nil))

    /// The outcome, if the call has been answered.
    var answered: Outcome? { state.withLock { $0.outcome } }

    /// The first outcome stays.
    fileprivate func resolve(_ outcome: Outcome) {
        let waiting: CheckedContinuation<Outcome, Never>? = state.withLock { state in
            if state.outcome != nil { return nil }
            state.outcome = outcome
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume(returning: outcome)
    }

    /// Waits for the outcome. A call never answered ends at the suite's
    /// time limit, which cancels the wait: the test then fails on an
    /// outcome it does not expect, and does not hang.
    func outcome() async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready: Outcome? = state.withLock { state in
                    if let outcome = state.outcome { return outcome }
                    state.waiting = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            resolve(.failure(JSONRPCError(code: 0, message: "the test was cancelled before the call was answered")))
        }
    }
}

/// The service on ``TestLoop`` with a manual clock: the memory cache ages,
/// and the calls' deadlines pass, only when the test advances the clock.
struct ManualTimeService {
    let clock = ManualClock()
    let source = ScriptedSource()
    let metrics = GatewayMetrics()
    let service: ProductsFetchService

    init(requestTimeout: Duration = .seconds(5), cacheMaxTTLSeconds: Int = 60, cacheMaxStaleSeconds: Int = 300, upstreamMaxIDs: Int = 50) {
        service = ProductsFetchService(
            settings: .init(
                appID: "demo",
                limits: FetchProductsLimits(maxIdentifiers: 100),
                requestTimeout: requestTimeout,
                upstreamMaxIDs: upstreamMaxIDs,
                cacheMaxTTLSeconds: cacheMaxTTLSeconds,
                regionResolver: RegionResolver(configuredDefault: nil, systemLocale: SystemLocale(environment: [:])),
                cacheMaxStaleSeconds: cacheMaxStaleSeconds
            ),
            source: source,
            metrics: metrics,
            sharedTier: nil,
            clock: clock.gatewayClock
        )
    }

    /// Starts a call of `ids` that arrived `ago` before the clock's now,
    /// and returns once it has started (its fetches asked, its deadline's
    /// timer armed).
    func start(_ ids: [String], arrivedAgo ago: Duration = .zero) async throws -> PendingCall {
        let params = try AnswerBytesTests.params(ids)
        let pending = PendingCall()
        let loop = TestLoop.shared
        let context = RPCCallContext(requestID: "r", logger: AnswerBytesTests.logger, loop: loop, arrived: clock.now - ago)
        let service = self.service
        await withCheckedContinuation { (started: CheckedContinuation<Void, Never>) in
            loop.execute {
                switch service.fetchImmediately(params: params, context: context) {
                case .answer(let outcome): pending.resolve(outcome)
                case .later(let later): later { pending.resolve($0) }
                }
                started.resume()
            }
        }
        return pending
    }

    /// One call of `ids`, answered.
    func fetch(_ ids: [String], arrivedAgo ago: Duration = .zero) async throws -> Result<JSONValue, JSONRPCError> {
        try await start(ids, arrivedAgo: ago).outcome()
    }

    /// A counter's value as `/metrics` shows it (0 when it has no sample).
    func counter(_ name: String) -> Int {
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("\(name) ") {
            return Int(Double(line.split(separator: " ").last ?? "") ?? -1)
        }
        return 0
    }
}
