package import EventTransport
package import ProductsDomain
package import Tracing
import Synchronization

/// One upstream call that any number of callers wait for, each by
/// callback on its own loop. Callers leave when their own deadline passes;
/// the fetch itself goes on for the others.
package final class CoalescedFetch: Sendable {
    package typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    /// A waiter by callback, confined to its loop with its deadline's
    /// timer: the outcome is delivered there, whichever thread finishes
    /// the fetch.
    private final class LoopWaiter: @unchecked Sendable {
        package let loop: EventLoop
        private let callback: @Sendable (Outcome) -> Void
        /// Set and cancelled on `loop` only.
        package var timer: ClockTimer?

        package init(loop: EventLoop, callback: @escaping @Sendable (Outcome) -> Void) {
            self.loop = loop
            self.callback = callback
        }

        /// Called at most once: the state machine hands a waiter out once.
        package func deliver(_ outcome: Outcome) {
            guard loop.inEventLoop else {
                // A loop that stopped runs nothing more: the connection
                // this waiter would answer is gone with it.
                loop.execute { self.deliver(outcome) }
                return
            }
            timer?.cancel()
            timer = nil
            callback(outcome)
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
    /// on `loop`, with the outcome or,
    /// at `deadline` (of the fetch's clock), with `failure`; at once (before this returns) when
    /// the fetch has already ended.
    ///
    /// - Precondition: called on `loop`.
    package func whenDone(on loop: EventLoop, until deadline: ContinuousClock.Instant, onDeadline failure: ProductsFetchFailure, _ callback: @escaping @Sendable (Outcome) -> Void) {
        loop.preconditionInEventLoop()
        let id = nextWaiterID.add(1, ordering: .relaxed).oldValue
        let waiter = LoopWaiter(loop: loop, callback: callback)
        switch state.withLock({ $0.addWaiter(id, waiter) }) {
        case .resume(let outcome):
            callback(outcome)
        case .suspend:
            // Set before any delivery can run: one from another thread
            // hops to this loop, which is busy with this call until it
            // returns. A deadline already past fires on the loop's next turn.
            waiter.timer = clock.scheduleTimer(on: loop, at: deadline) { [self] in
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
