import EventTransport
import ProductsDomain

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
    package init(base: any ProductSource, loops: [EventLoop], maxIdentifiers: Int, window: Duration) {
        self.base = base
        var buffers: [ObjectIdentifier: LoopMergeBuffer] = [:]
        for loop in loops {
            buffers[ObjectIdentifier(loop)] = LoopMergeBuffer(loop: loop, base: base, maxIdentifiers: maxIdentifiers, window: window)
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

    init(loop: EventLoop, base: any ProductSource, maxIdentifiers: Int, window: Duration) {
        self.loop = loop
        self.base = base
        self.machine = MergeBufferStateMachine(maxIdentifiers: maxIdentifiers, window: window)
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
    private func sendMerged(_ call: MergeBufferStateMachine<Member>.Call) {
        let members = call.members
        var identifiers: [String] = []
        identifiers.reserveCapacity(call.identifierCount)
        var deadline = members[0].request.deadline
        for member in members {
            // Distinct: the coalescer gives an identifier of a scope to one
            // fetch at a time.
            identifiers.append(contentsOf: member.request.identifiers)
            deadline = max(deadline, member.request.deadline)
        }
        let merged = SourceRequest(scope: call.scope, identifiers: identifiers, requestID: members[0].request.requestID, deadline: deadline)
        let base = self.base
        let loop = self.loop
        base.fetch(merged, on: loop) { outcome in
            switch MergeBufferStateMachine<Member>.fate(of: outcome, members: members.count) {
            case .shared:
                for member in members {
                    member.completion(outcome.map { $0.restricted(to: member.request.identifiers) })
                }
            case .askApart:
                let askApart: @Sendable () -> Void = {
                    for member in members { base.fetch(member.request, on: loop, completion: member.completion) }
                }
                if loop.inEventLoop {
                    askApart()
                } else if !loop.execute(askApart) {
                    for member in members { member.completion(outcome) }
                }
            }
        }
    }
}
