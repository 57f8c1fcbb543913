import EventTransport
import MonotonicTime
import Synchronization

/// Turns for batch requests (`GATEWAY_BATCH_CONCURRENCY`): at most that
/// many batches are being answered at once in the process, each from its
/// start until its answer is handed to its connection; more wait their
/// turn, first come first served.
///
/// A batch's answer can be `GATEWAY_MAX_BATCH` × `GATEWAY_MAX_IDS` products
/// (about 1.7 MB at the defaults, from a 27 KB body), and its calls' results
/// are held while it is made. Without turns, memory grew with the
/// connections sending batches (200 connections of such batches: 339 MB);
/// with them it grows with this setting. Once handed to the connection, an
/// answer no longer needs a turn: the bytes of answers waiting for slow
/// readers are bounded in total by the front (past the bound, the
/// connection holding the most is reset), so a client that never reads
/// holds no turn (16 such clients held every turn for a write deadline each
/// when a turn lasted until the last byte was written). Single calls do not
/// take turns: their answer is bounded by `GATEWAY_MAX_IDS` products.
///
/// Waiting is bounded as well: at most 4 × `GATEWAY_BATCH_CONCURRENCY`
/// batches wait (one more is told the queue is full, `503`), each holding
/// only its request's bytes, a wait ends at the batch's deadline (a timer
/// of its loop; its calls then answer from memory, or `cancelled`, without
/// a turn), and a batch whose client hangs up (its connection tells it,
/// ``Waiter/leave()``) leaves the queue at once, freeing its place.
///
/// Nothing here suspends or starts a task: a wait is a callback, called on
/// the waiting batch's own loop. The queue is the process's, shared by
/// every loop, under one lock; a turn that ends on one loop is handed to
/// the next waiter on that waiter's loop (`execute`).
final class BatchTurns: Sendable {
    /// A batch's turn. It ends at ``end()`` (its answer handed to its
    /// connection) or when its last reference goes (the batch given up),
    /// whichever comes first, so no path can forget to end it, nor end it
    /// twice.
    final class Turn: Sendable {
        private let turns: BatchTurns
        private let ended = Atomic<Bool>(false)

        fileprivate init(_ turns: BatchTurns) {
            self.turns = turns
        }

        /// Ends the turn now; later calls do nothing.
        func end() {
            guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
            turns.end()
        }

        deinit {
            end()
        }
    }

    /// How a wait for a turn ended.
    enum Wait: Sendable {
        case turn(Turn)
        /// As many batches as allowed already wait: answer `503`.
        case queueFull
        /// The deadline passed first.
        case deadlinePassed
        /// The client hung up (or shut its side) while the batch waited:
        /// it left the queue, and gets no turn.
        case left
    }

    /// One batch in the queue, bound to the loop that asked for its turn:
    /// its deadline's timer, its hang-up and the turn handed to it all run
    /// there, and its callback is called there once.
    final class Waiter: Sendable {
        fileprivate let ticket: UInt64
        fileprivate let loop: EventLoop
        private let turns: BatchTurns
        private let deadline: MonotonicInstant
        /// Touched on `loop` only; held under a lock (never contended) so
        /// that the waiter is `Sendable` with no unchecked promise.
        private let state: Mutex<WaiterState>

        fileprivate struct WaiterState {
            /// Called once, with how the wait ended; nil once called.
            var then: (@Sendable (Wait) -> Void)?
            var timer: LoopTimer?
        }

        fileprivate init(ticket: UInt64, loop: EventLoop, turns: BatchTurns, deadline: MonotonicInstant, then: @escaping @Sendable (Wait) -> Void) {
            self.ticket = ticket
            self.loop = loop
            self.turns = turns
            self.deadline = deadline
            self.state = Mutex(WaiterState(then: then))
        }

        /// Arms the deadline's timer; once the waiter is queued, so it always
        /// finds it (or finds it served, and does nothing).
        fileprivate func armDeadline() {
            state.withLock { $0.timer = loop.scheduleTimer(at: deadline) { [self] in deadlineReached() } }
        }

        /// The client hung up (or shut its side) while the batch waited: it
        /// leaves the queue at once and is told ``Wait/left``. A turn handed
        /// to it just before, still on its way to this loop, ends as soon as
        /// it arrives. Nothing happens once the wait has ended. On the
        /// waiter's loop.
        func leave() {
            loop.preconditionInEventLoop()
            guard let then = finish() else { return }
            turns.remove(self)
            then(.left)
        }

        private func deadlineReached() {
            // Not a moment early: the batch's calls must find their
            // deadline passed, and start no fetch.
            let now = MonotonicInstant.now
            guard now >= deadline else {
                state.withLock { $0.timer = loop.scheduleTimer(after: deadline - now) { [self] in deadlineReached() } }
                return
            }
            // Still queued: it leaves. Not queued: a turn was handed to it,
            // and is on its way; it goes on with that turn.
            guard turns.remove(self), let then = finish() else { return }
            then(.deadlinePassed)
        }

        /// A turn handed over by a batch that ended its own; on this loop.
        fileprivate func granted() {
            let turn = Turn(turns)
            // Left already: the turn goes on to the next waiter at once.
            guard let then = finish() else { return }
            then(.turn(turn))
        }

        /// Ends the wait: its callback, to be called once, and its timer
        /// stopped; nil when it has ended already.
        private func finish() -> (@Sendable (Wait) -> Void)? {
            state.withLock { state in
                state.timer?.cancel()
                state.timer = nil
                defer { state.then = nil }
                return state.then
            }
        }
    }

    private struct State {
        var free: Int
        /// First come, first served: `waiting[head...]` are still waiting.
        var waiting: [Waiter] = []
        var head = 0
        var nextTicket: UInt64 = 0

        var waitingCount: Int { waiting.count - head }
    }

    private let state: Mutex<State>
    private let waitingChanged: @Sendable (Int) -> Void
    /// 4 × the concurrency.
    let maxWaiting: Int

    /// - Parameters:
    ///   - concurrency: Batches answered at once (at least 1).
    ///   - waitingChanged: Told +1 when a batch starts to wait, -1 when it
    ///     gets its turn or leaves (the `gateway_batches_waiting` gauge);
    ///     called under the lock, so the two never arrive out of order. It
    ///     must be quick.
    init(concurrency: Int, waitingChanged: @escaping @Sendable (Int) -> Void = { _ in }) {
        precondition(concurrency >= 1, "a batch concurrency below 1 would never answer a batch")
        state = Mutex(State(free: concurrency))
        self.waitingChanged = waitingChanged
        self.maxWaiting = 4 * concurrency
    }

    /// Batches waiting for their turn now.
    var waiting: Int { state.withLock { $0.waitingCount } }

    /// Asks for a turn, on `loop`'s thread. `then` is told once how the
    /// wait ended, on `loop`: with a turn at once (before this returns)
    /// when one is free; ``Wait/queueFull`` at once when ``maxWaiting``
    /// batches wait already; else the batch queues, and is told of its
    /// turn when the batches ahead have ended theirs, or
    /// ``Wait/deadlinePassed`` at `deadline` (a timer of `loop`), or
    /// ``Wait/left`` when it leaves first (``Waiter/leave()``, its client
    /// hung up).
    ///
    /// - Returns: The queued batch, to leave the queue with; nil when
    ///   `then` has been told already.
    func begin(on loop: EventLoop, until deadline: MonotonicInstant, _ then: @escaping @Sendable (Wait) -> Void) -> Waiter? {
        loop.preconditionInEventLoop()
        enum Start { case now, full, queued(Waiter) }
        let start = state.withLock { state -> Start in
            if state.free > 0 {
                state.free -= 1
                return .now
            }
            guard state.waitingCount < maxWaiting else { return .full }
            state.nextTicket += 1
            let waiter = Waiter(ticket: state.nextTicket, loop: loop, turns: self, deadline: deadline, then: then)
            state.waiting.append(waiter)
            waitingChanged(1)
            return .queued(waiter)
        }
        switch start {
        case .now:
            then(.turn(Turn(self)))
            return nil
        case .full:
            then(.queueFull)
            return nil
        case .queued(let waiter):
            // A turn handed over meanwhile from another loop reaches this
            // one through its queue, after this callback: the timer is
            // armed before it can be stopped.
            waiter.armDeadline()
            return waiter
        }
    }

    /// Takes `waiter` out of the queue; false when it was not in it (a
    /// turn was handed to it).
    @discardableResult
    fileprivate func remove(_ waiter: Waiter) -> Bool {
        state.withLock { state in
            guard let index = state.waiting[state.head...].firstIndex(where: { $0.ticket == waiter.ticket }) else { return false }
            state.waiting.remove(at: index)
            waitingChanged(-1)
            if state.head == state.waiting.count {
                state.waiting.removeAll()
                state.head = 0
            }
            return true
        }
    }

    /// A turn ended: handed straight to the first waiting batch, if any,
    /// on that batch's loop.
    fileprivate func end() {
        let next = state.withLock { state -> Waiter? in
            guard state.head < state.waiting.count else {
                state.free += 1
                return nil
            }
            let next = state.waiting[state.head]
            state.head += 1
            waitingChanged(-1)
            // Forget the served prefix once it is most of the array, so the
            // queue's memory follows the batches waiting, not all that ever did.
            if state.head == state.waiting.count {
                state.waiting.removeAll()
                state.head = 0
            } else if state.head > 32, state.head * 2 > state.waiting.count {
                state.waiting.removeFirst(state.head)
                state.head = 0
            }
            return next
        }
        guard let next else { return }
        // Always through the loop's queue, even from the loop itself: the
        // batch that ended its turn is still in its own callback.
        if !next.loop.execute({ next.granted() }) {
            // Its loop has stopped for good: nobody can answer that batch,
            // and the turn goes on.
            end()
        }
    }
}
