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
    /// Each loop's buffer, made up front, in the loop's context: read by
    /// index, without a lock, touched only on its own loop.
    private let buffers = LoopSlot<LoopMergeBuffer>()

    /// - Parameters:
    ///   - loops: the loops fetches start on; a fetch started elsewhere
    ///     goes out alone.
    ///   - maxIdentifiers: `UPSTREAM_MAX_IDS`.
    ///   - window: `GATEWAY_MERGE_WINDOW_US`.
    ///   - hedgeAfter: how long a merged call may take before each fetch
    ///     in it is asked again apart (nil: never).
    package init(base: any ProductSource, loops: [EventLoop], maxIdentifiers: Int, window: Duration, hedgeAfter: Duration? = nil) {
        self.base = base
        for loop in loops {
            buffers.fill(loop, with: LoopMergeBuffer(loop: loop, base: base, maxIdentifiers: maxIdentifiers, window: window, hedgeAfter: hedgeAfter))
        }
    }

    package func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
        // Alone: a fetch whose loop has no buffer, or has stopped (no flush
        // would ever run). The shared tier's leases stay with the fetches
        // above this source, which asks only the upstream.
        guard !loop.isStopped, let buffer = loop.context[buffers] else {
            return base.fetch(request, on: loop, completion: completion)
        }
        buffer.add(request, completion: completion)
    }
}

/// One loop's gathered fetches and the flushes armed for them. Confined to
/// its loop (it lives in the loop's context, and what reaches it from a
/// `Sendable` closure goes through a ``LoopBound``): no lock.
final class LoopMergeBuffer {
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
    /// The generations whose end-of-turn flush is due: the loop's one way
    /// of running something once a turn's callbacks are done.
    private let turnEnds: LoopTurnBatch<Int>

    init(loop: EventLoop, base: any ProductSource, maxIdentifiers: Int, window: Duration, hedgeAfter: Duration? = nil) {
        self.loop = loop
        self.base = base
        self.machine = MergeBufferStateMachine(maxIdentifiers: maxIdentifiers, window: window)
        self.hedgeAfter = hedgeAfter
        self.turnEnds = LoopTurnBatch(loop: loop)
    }

    /// The flush of a turn's end, set on the loop at the first fetch (the
    /// buffer is made before its loop holds it). Unowned: the buffer owns
    /// the batch, which would otherwise keep it for ever.
    private func armTurnEnds() {
        let buffer = LoopBound(Unowned(self), loop: loop)
        turnEnds.flush = { generations in
            let buffer = buffer.value.buffer
            for generation in generations { buffer.send(buffer.machine.turnEnded(generation: generation)) }
        }
    }

    private struct Unowned {
        unowned let buffer: LoopMergeBuffer
        init(_ buffer: LoopMergeBuffer) { self.buffer = buffer }
    }

    /// Gathers a fetch; it goes out when the flush armed for it runs. On
    /// `loop`.
    func add(_ request: SourceRequest, completion: @escaping @Sendable (Outcome) -> Void) {
        let arming = machine.add(Member(request: request, completion: completion), scope: request.scope, identifierCount: request.identifiers.count)
        guard !arming.isEmpty else { return }
        let generation = arming.generation
        if arming.endOfTurn {
            // Flushed after the callbacks this turn has already made ready
            // (the other connections' reads among them), so what they
            // start is gathered too, with no wait. A running loop never
            // refuses a job from its own thread.
            if turnEnds.flush == nil { armTurnEnds() }
            _ = turnEnds.add(generation)
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
        // Bound to the loop: every source answers on the loop it was asked
        // on, so its completions find the fetch there.
        let fetch = LoopBound(MergedFetch(members: members), loop: loop)
        if let hedgeAfter {
            fetch.value.hedgeTimer = loop.scheduleTimer(after: hedgeAfter) {
                fetch.value.hedgeTimer = nil
                for index in fetch.value.hedge() {
                    base.fetch(members[index].request, on: loop) { outcome in fetch.value.answer(index, outcome) }
                }
            }
        }
        base.fetch(merged, on: loop) { outcome in
            fetch.value.mergedCallAnswered(outcome, base: base, loop: loop)
        }
    }
}

/// The fetches of one merged call and which of them have their answer:
/// each is answered once, by the merged call or by its hedge, whichever
/// comes first. Confined to the buffer's loop, where every answer comes.
private final class MergedFetch {
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
            let fetch = LoopBound(self, loop: loop)
            for index in members.indices where !answered[index] {
                base.fetch(members[index].request, on: loop) { outcome in fetch.value.answer(index, outcome) }
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
