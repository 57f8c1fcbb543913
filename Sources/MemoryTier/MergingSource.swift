import Tracing
package import EventTransport
package import ProductsDomain

/// A source whose fetches, started on one loop, share upstream calls:
/// distinct misses of concurrent calls gathered in one loop turn (or
/// within `GATEWAY_MERGE_WINDOW_US` of the first) go out together, in calls
/// of at most `UPSTREAM_MAX_IDS` identifiers (``MergeBufferStateMachine``).
///
/// It sits under coalescing and the shared tier: each fetch it is given
/// keeps its identifiers, its completion and so its callers' waits,
/// deadlines and stale answers; merging only decides how fetches are
/// grouped into upstream calls. No caller's fetch can cancel a merged call:
/// nothing here is cancelled.
package struct MergingSource: ProductSource {
    private let base: any ProductSource
    /// One buffer per loop, made up front: read without a lock, each
    /// touched only on its own loop.
    private let buffers: [ObjectIdentifier: LoopMergeBuffer]

    /// - Parameters:
    ///   - loops: the loops fetches start on; a fetch started elsewhere
    ///     goes out alone.
    ///   - maxIdentifiers: `UPSTREAM_MAX_IDS`.
    ///   - window: `GATEWAY_MERGE_WINDOW_US`.
    ///   - hedgeAfter: how long a merged call may take before each fetch
    ///     in it is asked again apart (nil: never).
    package init(base: any ProductSource, loops: [EventLoop], maxIdentifiers: Int, window: Duration, hedgeAfter: Duration? = nil) {
        self.base = base
        var buffers: [ObjectIdentifier: LoopMergeBuffer] = [:]
        for loop in loops {
            buffers[ObjectIdentifier(loop)] = LoopMergeBuffer(loop: loop, base: base, maxIdentifiers: maxIdentifiers, window: window, hedgeAfter: hedgeAfter)
        }
        self.buffers = buffers
    }

    package func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
        // Alone: a fetch whose loop has no buffer, is not its caller's, or
        // has stopped (no flush would ever run). The shared tier's leases
        // stay with the fetches above this source, which asks only the
        // upstream.
        guard !loop.isStopped, loop.inEventLoop, let buffer = buffers[ObjectIdentifier(loop)] else {
            return base.fetch(request, on: loop, completion: completion)
        }
        buffer.add(request, completion: completion)
    }
}

/// One loop's gathered fetches and the flushes armed for them. Confined to
/// its loop: no lock.
final class LoopMergeBuffer: @unchecked Sendable {
    // @unchecked: `machine` is touched on `loop` only (the flushes are a
    // job of its queue and a timer of its own).

    typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    /// One fetch waiting to go out.
    struct Member {
        let request: SourceRequest
        let completion: @Sendable (Outcome) -> Void
    }

    private let loop: EventLoop
    private let base: any ProductSource
    private var machine: MergeBufferStateMachine<Member>
    private let hedgeAfter: Duration?

    init(loop: EventLoop, base: any ProductSource, maxIdentifiers: Int, window: Duration, hedgeAfter: Duration? = nil) {
        self.loop = loop
        self.base = base
        self.machine = MergeBufferStateMachine(maxIdentifiers: maxIdentifiers, window: window)
        self.hedgeAfter = hedgeAfter
    }

    /// Gathers a fetch; it goes out when the flush armed for it runs. On
    /// `loop`.
    func add(_ request: SourceRequest, completion: @escaping @Sendable (Outcome) -> Void) {
        let arming = machine.add(Member(request: request, completion: completion), scope: request.scope, identifierCount: request.identifiers.count)
        guard !arming.isEmpty else { return }
        let generation = arming.generation
        if arming.endOfTurn {
            // A job queued from the loop runs after the callbacks this turn
            // has already made ready (the other connections' reads among
            // them), so what they start is gathered too, with no wait. A
            // running loop never refuses a job from its own thread.
            _ = loop.execute { [self] in send(machine.turnEnded(generation: generation)) }
        }
        if let window = arming.window {
            _ = loop.scheduleTimer(after: window) { [self] in send(machine.windowEnded(generation: generation)) }
        }
    }

    private func send(_ calls: [MergeBufferStateMachine<Member>.Call]) {
        for call in calls {
            if call.members.count == 1 {
                let member = call.members[0]
                base.fetch(member.request, on: loop, completion: member.completion)
            } else {
                sendMerged(call)
            }
        }
    }

    /// One upstream call for several fetches: sent with the first one's
    /// request id, its retries bounded by the latest of their deadlines
    /// (each caller still leaves at its own).
    ///
    /// Hedged: when it has not answered after ``hedgeAfter``, each fetch in
    /// it is asked again apart, and each gets whichever answer comes first
    /// (its own, or the merged call's). So an identifier the upstream is
    /// slow on, or hangs on, delays the others by ``hedgeAfter`` at most,
    /// not by its own slowness or their deadline: merging costs a caller
    /// at most one upstream call more than asking alone.
    private func sendMerged(_ call: MergeBufferStateMachine<Member>.Call) {
        let members = call.members
        var identifiers: [String] = []
        identifiers.reserveCapacity(call.identifierCount)
        var deadline = members[0].request.deadline
        // By index, not `for member in`: a member copied is a reference
        // count per field of its request, per member.
        for index in members.indices {
            // Distinct: the coalescer gives an identifier of a scope to one
            // fetch at a time.
            identifiers.append(contentsOf: members[index].request.identifiers)
            deadline = max(deadline, members[index].request.deadline)
        }
        // The first fetch's trace too: the upstream request carries one
        // traceparent, and the spans of the other fetches' calls link to it.
        let carrier = members[0].request.trace
        let merged = SourceRequest(scope: call.scope, identifiers: identifiers, requestID: members[0].request.requestID, deadline: deadline, trace: carrier)
        if let carrier {
            for index in members.indices.dropFirst() {
                guard let links = members[index].request.trace?.links, members[index].request.trace?.span != carrier.span else { continue }
                links.add(carrier.span)
            }
        }
        let base = self.base
        let loop = self.loop
        let fetch = MergedFetch(members: members)
        if let hedgeAfter {
            fetch.hedgeTimer = loop.scheduleTimer(after: hedgeAfter) {
                fetch.hedgeTimer = nil
                for index in fetch.hedge() {
                    base.fetch(members[index].request, on: loop) { outcome in
                        Self.onLoop(loop, { fetch.answer(index, outcome) }, else: { fetch.answer(index, outcome) })
                    }
                }
            }
        }
        base.fetch(merged, on: loop) { outcome in
            // A method on the loop, not a closure (the usual case): nothing
            // allocated per merged call for its answer.
            if loop.inEventLoop {
                fetch.mergedCallAnswered(outcome, base: base, loop: loop)
            } else if !loop.execute({ fetch.mergedCallAnswered(outcome, base: base, loop: loop) }) {
                for index in fetch.members.indices { fetch.answer(index, outcome) }
            }
        }
    }

    /// Runs `work` on `loop` (at once when already there), or `orElse`
    /// when the loop has stopped.
    private static func onLoop(_ loop: EventLoop, _ work: @escaping @Sendable () -> Void, else orElse: @Sendable () -> Void) {
        if loop.inEventLoop {
            work()
        } else if !loop.execute(work) {
            orElse()
        }
    }
}

/// The fetches of one merged call and which of them have their answer:
/// each is answered once, by the merged call or by its hedge, whichever
/// comes first. Confined to the buffer's loop (answers that come from
/// another thread hop there first), except when the loop has stopped, when
/// nothing else touches it.
private final class MergedFetch: @unchecked Sendable {
    // @unchecked: touched on the buffer's loop only.
    let members: [LoopMergeBuffer.Member]
    private var answered: [Bool]
    var hedgeTimer: LoopTimer?
    /// Whether the fetches were asked again apart.
    private(set) var isHedged = false

    init(members: [LoopMergeBuffer.Member]) {
        self.members = members
        self.answered = Array(repeating: false, count: members.count)
    }

    /// The fetches still waiting for their outcome.
    var unanswered: [Int] {
        answered.indices.filter { !answered[$0] }
    }

    /// The merged call answered: each fetch still waiting takes its part,
    /// or (a `422`) is asked again apart, unless hedged already.
    func mergedCallAnswered(_ outcome: Result<SourcePage, ProductsFetchFailure>, base: any ProductSource, loop: EventLoop) {
        hedgeTimer?.cancel()
        hedgeTimer = nil
        switch MergeBufferStateMachine<LoopMergeBuffer.Member>.fate(of: outcome, members: members.count) {
        case .shared:
            // A failure after the hedge is left to each fetch's own call,
            // which may still succeed; a success answers.
            if isHedged, case .failure = outcome { return }
            for index in members.indices where !answered[index] {
                answer(index, outcome.map { $0.restricted(to: members[index].request.identifiers) })
            }
        case .askApart:
            // Hedged fetches wait for their own call already.
            guard !isHedged else { return }
            for index in members.indices where !answered[index] {
                base.fetch(members[index].request, on: loop) { outcome in
                    if loop.inEventLoop {
                        self.answer(index, outcome)
                    } else if !loop.execute({ self.answer(index, outcome) }) {
                        self.answer(index, outcome)
                    }
                }
            }
        }
    }

    /// The fetches to ask again apart, now: those still waiting.
    func hedge() -> [Int] {
        isHedged = true
        return unanswered
    }

    /// Gives fetch `index` its outcome, unless it has one already.
    func answer(_ index: Int, _ outcome: Result<SourcePage, ProductsFetchFailure>) {
        guard !answered[index] else { return }
        answered[index] = true
        members[index].completion(outcome)
    }
}
