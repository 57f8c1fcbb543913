package import EventTransport
package import MonotonicTime
package import ProductsDomain
import Synchronization
package import Tracing

/// One upstream call that any number of callers wait for, each by
/// callback on its own loop. Callers leave when their own deadline passes;
/// the fetch itself goes on for the others.
package final class CoalescedFetch: Sendable {
    package typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    /// A waiter by callback: its loop, and what only that loop touches
    /// (the callback, its deadline's timer). The outcome is delivered
    /// there, whichever thread finishes the fetch.
    package struct LoopWaiter: Sendable {
        let waiting: LoopBoundBox<Waiting>

        struct Waiting {
            let callback: (Outcome) -> Void
            var timer: ClockTimer?
        }

        /// Called at most once: the state machine hands a waiter out once.
        /// The one hop of a call that joined another loop's fetch: the
        /// outcome goes to the waiter's loop through its queue, unless it
        /// is already there. A loop that stopped runs nothing more: the
        /// connection this waiter would answer is gone with it.
        func deliver(_ outcome: Outcome) {
            let waiting = self.waiting
            guard waiting.loop.inEventLoop else {
                waiting.loop.execute { LoopWaiter(waiting: waiting).deliverHere(outcome) }
                return
            }
            deliverHere(outcome)
        }

        private func deliverHere(_ outcome: Outcome) {
            waiting.value.timer?.cancel()
            waiting.value.timer = nil
            waiting.value.callback(outcome)
        }
    }

    package let scope: FetchScope
    package let identifiers: [String]
    /// The coalescer's keys of `identifiers`, hashed once at the claim.
    package let keys: [ScopedIdentifier]
    /// The span of the call that started the fetch: the calls that join
    /// it link their spans to it. Nil when that call is not recorded.
    package let origin: SpanContext?
    /// What the waiters' deadlines are timed on.
    private let clock: GatewayClock
    private let state = Mutex(FetchPromiseStateMachine<Outcome, LoopWaiter>())
    private let nextWaiterID = Atomic<Int>(0)

    package init(scope: FetchScope, identifiers: [String], origin: SpanContext? = nil, clock: GatewayClock = .system) {
        self.scope = scope
        self.identifiers = identifiers
        self.keys = ScopedIdentifier.keys(scope: scope, identifiers: identifiers)
        self.origin = origin
        self.clock = clock
    }

    /// A fetch of `identifiers` of `scope`, whose coalescer keys (in the
    /// same order) are `keys`.
    package init(scope: FetchScope, identifiers: [String], keys: [ScopedIdentifier], origin: SpanContext? = nil, clock: GatewayClock = .system) {
        self.scope = scope
        self.identifiers = identifiers
        self.keys = keys
        self.origin = origin
        self.clock = clock
    }

    /// Waits for the outcome on `loop`, with no task: `callback` runs once,
    /// on `loop` (the fetch may finish on another: the outcome comes back
    /// here), with the outcome or,
    /// at `deadline` (of the fetch's clock), with `failure`; at once (before this returns) when
    /// the fetch has already ended.
    ///
    /// - Precondition: called on `loop`.
    package func whenDone(on loop: EventLoop, until deadline: MonotonicInstant, onDeadline failure: ProductsFetchFailure, _ callback: @escaping (Outcome) -> Void) {
        let id = nextWaiterID.add(1, ordering: .relaxed).oldValue
        // Checks that this is `loop`'s thread: only it runs the callback.
        let waiter = LoopWaiter(waiting: LoopBoundBox(LoopWaiter.Waiting(callback: callback), loop: loop))
        switch state.withLock({ $0.addWaiter(id, waiter) }) {
        case .resume(let outcome):
            callback(outcome)
        case .suspend:
            // Set before any delivery can run: one from another thread
            // hops to this loop, which is busy with this call until it
            // returns. A deadline already past fires on the loop's next turn.
            waiter.waiting.value.timer = clock.scheduleTimer(on: loop, at: deadline) { [self] in
                if let waiter = state.withLock({ $0.removeWaiter(id) }) {
                    waiter.deliver(.failure(failure))
                }
            }
        }
    }

    /// The outcome, when the fetch has ended (or its waiters were
    /// released); nil while it runs.
    package var settledOutcome: Outcome? {
        state.withLock { $0.settled }
    }

    /// Hands the outcome to everyone still waiting.
    package func finish(_ outcome: Outcome) {
        let waiters = state.withLock { $0.finish(outcome) }
        for waiter in waiters {
            waiter.deliver(outcome)
        }
    }

    /// Releases every waiter with `failure`, and every later one, leaving
    /// the fetch running.
    package func releaseWaiters(with failure: ProductsFetchFailure) {
        let waiters = state.withLock { $0.release(with: .failure(failure)) }
        for waiter in waiters {
            waiter.deliver(.failure(failure))
        }
    }
}
