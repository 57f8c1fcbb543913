import EventTransport
import ProductsDomain
import Synchronization

/// One upstream call that any number of callers wait for. Callers leave
/// when their own deadline passes; the fetch itself goes on for the others.
final class SharedFetch: Sendable {
    typealias Outcome = Result<SourcePage, ProductsFetchFailure>

    private enum Waiter {
        /// A task suspended in ``outcome(until:onDeadline:)``. `timer` is
        /// the deadline's task, off the loops only; on a loop the deadline
        /// is a loop timer that the waiter itself cancels.
        case task(CheckedContinuation<Outcome, Never>, timer: Task<Void, Never>?)
        /// A callback of ``whenDone(on:until:onDeadline:_:)``.
        case callback(LoopWaiter)

        func resume(with outcome: Outcome) {
            switch self {
            case .task(let continuation, let timer):
                timer?.cancel()
                continuation.resume(returning: outcome)
            case .callback(let waiter):
                waiter.deliver(outcome)
            }
        }
    }

    /// A waiter by callback, confined to its loop with its deadline's
    /// timer: the outcome is delivered there, whichever thread finishes
    /// the fetch.
    private final class LoopWaiter: @unchecked Sendable {
        let loop: EventLoop
        private let callback: @Sendable (Outcome) -> Void
        /// Set and cancelled on `loop` only.
        var timer: LoopTimer?

        init(loop: EventLoop, callback: @escaping @Sendable (Outcome) -> Void) {
            self.loop = loop
            self.callback = callback
        }

        /// Called at most once: the state machine hands a waiter out once.
        func deliver(_ outcome: Outcome) {
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

    let scope: FetchScope
    let identifiers: [String]
    /// The coalescer's keys of `identifiers`, hashed once at the claim.
    let keys: [ScopedIdentifier]
    private let state = Mutex(FetchPromiseStateMachine<Outcome, Waiter>())
    private let nextWaiterID = Atomic<Int>(0)

    init(scope: FetchScope, identifiers: [String]) {
        self.scope = scope
        self.identifiers = identifiers
        self.keys = ScopedIdentifier.keys(scope: scope, identifiers: identifiers)
    }

    /// A fetch of `identifiers` of `scope`, whose coalescer keys (in the
    /// same order) are `keys`.
    init(scope: FetchScope, identifiers: [String], keys: [ScopedIdentifier]) {
        self.scope = scope
        self.identifiers = identifiers
        self.keys = keys
    }

    /// Waits for the outcome, or until `deadline`, whichever comes first.
    func outcome(until deadline: ContinuousClock.Instant, onDeadline failure: ProductsFetchFailure) async -> Outcome {
        let id = nextWaiterID.add(1, ordering: .relaxed).oldValue
        if let loop = EventLoop.current {
            return await outcome(on: loop, waiter: id, until: deadline, onDeadline: failure)
        }
        return await withCheckedContinuation { continuation in
            let timer = Task { [self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                guard !Task.isCancelled else { return }
                if let waiter = state.withLock({ $0.removeWaiter(id) }) {
                    waiter.resume(with: .failure(failure))
                }
            }
            let action = state.withLock { $0.addWaiter(id, .task(continuation, timer: timer)) }
            switch action {
            case .resume(let outcome):
                timer.cancel()
                continuation.resume(returning: outcome)
            case .suspend:
                // The timer may have fired before the waiter was registered
                // (a deadline already past); then nobody else would resume it.
                if ContinuousClock.now >= deadline, let waiter = state.withLock({ $0.removeWaiter(id) }) {
                    waiter.resume(with: .failure(failure))
                }
            }
        }
    }

    /// The wait of a task that runs on `loop`: its deadline is a timer of
    /// that loop, armed and cancelled there, with no task and no thread of
    /// its own. Whoever finishes the fetch (any loop) resumes the
    /// continuation, and the task comes back to `loop`.
    private func outcome(on loop: EventLoop, waiter id: Int, until deadline: ContinuousClock.Instant, onDeadline failure: ProductsFetchFailure) async -> Outcome {
        var timer: LoopTimer?
        let outcome = await withCheckedContinuation { continuation in
            switch state.withLock({ $0.addWaiter(id, .task(continuation, timer: nil)) }) {
            case .resume(let outcome):
                continuation.resume(returning: outcome)
            case .suspend:
                // A deadline already past fires on the loop's next turn.
                timer = loop.scheduleTimer(at: deadline) { [self] in
                    if let waiter = state.withLock({ $0.removeWaiter(id) }) {
                        waiter.resume(with: .failure(failure))
                    }
                }
            }
        }
        timer?.cancel()
        return outcome
    }

    /// ``outcome(until:onDeadline:)`` by callback, for a caller on `loop`
    /// with no task: `callback` runs once, on `loop`, with the outcome or,
    /// at `deadline`, with `failure`; at once (before this returns) when
    /// the fetch has already ended.
    ///
    /// - Precondition: called on `loop`.
    func whenDone(on loop: EventLoop, until deadline: ContinuousClock.Instant, onDeadline failure: ProductsFetchFailure, _ callback: @escaping @Sendable (Outcome) -> Void) {
        loop.preconditionInEventLoop()
        let id = nextWaiterID.add(1, ordering: .relaxed).oldValue
        let waiter = LoopWaiter(loop: loop, callback: callback)
        switch state.withLock({ $0.addWaiter(id, .callback(waiter)) }) {
        case .resume(let outcome):
            callback(outcome)
        case .suspend:
            // Set before any delivery can run: one from another thread
            // hops to this loop, which is busy with this call until it
            // returns. A deadline already past fires on the loop's next turn.
            waiter.timer = loop.scheduleTimer(at: deadline) { [self] in
                if let waiter = state.withLock({ $0.removeWaiter(id) }) {
                    waiter.resume(with: .failure(failure))
                }
            }
        }
    }

    /// The outcome, when the fetch has ended (or its waiters were
    /// released); nil while it runs.
    var settledOutcome: Outcome? {
        state.withLock { $0.settled }
    }

    /// Hands the outcome to everyone still waiting.
    func finish(_ outcome: Outcome) {
        let waiters = state.withLock { $0.finish(outcome) }
        for waiter in waiters {
            waiter.resume(with: outcome)
        }
    }

    /// Releases every waiter with `failure`, and every later one, leaving
    /// the fetch running.
    func releaseWaiters(with failure: ProductsFetchFailure) {
        let waiters = state.withLock { $0.release(with: .failure(failure)) }
        for waiter in waiters {
            waiter.resume(with: .failure(failure))
        }
    }
}
