import EventTransport
@testable import GatewayService
import MonotonicTime
import Synchronization
import Testing

/// ``BatchTurns`` on real loops, as the front drives it: who gets a turn,
/// in which order and on which thread, when a turn ends, the deadline (a
/// loop timer) and a batch leaving when its client hangs up. Nothing here
/// sleeps: a test waits for the callback that ends a wait.
@Suite("BatchTurns")
struct BatchTurnsTests {
    /// Two loops, so that a turn ended on one is handed to a batch of the
    /// other. Never shut down: they serve every test of the process.
    static let group = try! EventLoopGroup(count: 2, namePrefix: "turns-test")
    static var first: EventLoop { group.loops[0] }
    static var second: EventLoop { group.loops[1] }

    static let never = MonotonicInstant.now + .seconds(3600)

    /// One batch asking for a turn on `loop`: how its wait ended, when, on
    /// which thread, and how many times it was told.
    final class Batch: Sendable {
        let loop: EventLoop
        let deadline: MonotonicInstant
        /// Ends its turn as soon as it gets it (a batch answered at once).
        private let endsAtOnce: Bool
        private let state = Mutex(State())
        private let waiter = Mutex<BatchTurns.Waiter?>(nil)

        private struct State {
            var wait: BatchTurns.Wait?
            var told = 0
            var toldAt: MonotonicInstant?
            var onItsLoop = true
            var waiting: [CheckedContinuation<Void, Never>] = []
        }

        /// Asks on `loop` (and returns once `begin` has returned there).
        init(_ turns: BatchTurns, on loop: EventLoop, until deadline: MonotonicInstant = BatchTurnsTests.never, endsAtOnce: Bool = false) {
            self.loop = loop
            self.deadline = deadline
            self.endsAtOnce = endsAtOnce
            let queued = loop.submitAndWait { [self] in
                let queued = turns.begin(on: loop, until: deadline) { [self] wait in told(wait) }
                let toldInBegin = state.withLock { $0.told > 0 }
                self.toldInBegin.store(toldInBegin, ordering: .relaxed)
                return queued
            }
            waiter.withLock { $0 = queued }
        }

        /// Whether it was told before `begin` returned.
        var wasToldInBegin: Bool { toldInBegin.load(ordering: .relaxed) }
        private let toldInBegin = Atomic<Bool>(false)

        private func told(_ wait: BatchTurns.Wait) {
            let onLoop = loop.inEventLoop
            if endsAtOnce, case .turn(let turn) = wait { turn.end() }
            let waiting = state.withLock { state in
                state.wait = wait
                state.told += 1
                state.toldAt = .now
                state.onItsLoop = state.onItsLoop && onLoop
                defer { state.waiting = [] }
                return state.waiting
            }
            for continuation in waiting { continuation.resume() }
        }

        /// How its wait ended, if it has.
        var now: BatchTurns.Wait? { state.withLock { $0.wait } }
        /// Whether it waits in the queue (asked, and not told yet).
        var isWaiting: Bool { now == nil }
        var toldCount: Int { state.withLock { $0.told } }
        var toldAt: MonotonicInstant? { state.withLock { $0.toldAt } }
        /// Whether every callback came on the batch's own loop.
        var toldOnItsLoop: Bool { state.withLock { $0.onItsLoop } }
        var hasTurn: Bool { if case .turn = now { true } else { false } }

        /// How the wait ended, once it has: waits for the callback (with a
        /// bound of 10 s on the loop's clock, so that a broken wait fails
        /// instead of hanging).
        func outcome() async throws -> BatchTurns.Wait {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let told = state.withLock { state in
                    if state.wait == nil { state.waiting.append(continuation) }
                    return state.wait != nil
                }
                if told {
                    continuation.resume()
                    return
                }
                _ = loop.execute { [self] in
                    _ = loop.scheduleTimer(after: .seconds(10)) { [self] in
                        let stuck = state.withLock { state in
                            defer { state.waiting = [] }
                            return state.waiting
                        }
                        for continuation in stuck { continuation.resume() }
                    }
                }
            }
            return try #require(now, "the wait did not end")
        }

        /// Ends its turn, from the calling thread.
        func endTurn() {
            guard case .turn(let turn) = now else {
                Issue.record("no turn to end")
                return
            }
            turn.end()
        }

        /// Lets its turn go without ending it: it ends with its last
        /// reference (a batch given up).
        func dropTurn() {
            state.withLock { $0.wait = nil }
        }

        /// Its client hangs up: the connection's callback, on its loop.
        func leave() {
            loop.submitAndWait { [self] in waiter.withLock { $0 }?.leave() }
        }
    }

    /// A gauge fed by `waitingChanged`.
    final class Gauge: Sendable {
        private let changes = Mutex<[Int]>([])
        var all: [Int] { changes.withLock { $0 } }
        func add(_ change: Int) { changes.withLock { $0.append(change) } }
    }

    @Test func batchesPastTheConcurrencyWaitUntilATurnEndsThenGoInArrivalOrderOnTheirOwnLoops() async throws {
        let gauge = Gauge()
        let turns = BatchTurns(concurrency: 2) { gauge.add($0) }
        // A free turn is given before `begin` returns.
        let a = Batch(turns, on: Self.first)
        let b = Batch(turns, on: Self.second)
        #expect(a.hasTurn && b.hasTurn)
        #expect(turns.waiting == 0)
        let c = Batch(turns, on: Self.second)
        let d = Batch(turns, on: Self.first)
        #expect(c.isWaiting && d.isWaiting)
        #expect(turns.waiting == 2)
        #expect(gauge.all == [1, 1])

        // The first batch's answer is handed over, on the first loop: the
        // turn goes to `c`, on the second.
        Self.first.submitAndWait { a.endTurn() }
        guard case .turn = try await c.outcome() else {
            Issue.record("the first waiter did not get the turn")
            return
        }
        #expect(c.toldOnItsLoop)
        #expect(d.isWaiting)
        #expect(turns.waiting == 1)

        b.endTurn()
        guard case .turn = try await d.outcome() else {
            Issue.record("the second waiter did not get the turn")
            return
        }
        #expect(d.toldOnItsLoop)
        #expect(turns.waiting == 0)
        #expect(gauge.all == [1, 1, -1, -1])
        #expect([a, b, c, d].allSatisfy { $0.toldCount == 1 })
        c.endTurn()
        d.endTurn()
    }

    @Test func anEndedTurnWithNoOneWaitingIsFreeForTheNextBatch() async throws {
        let turns = BatchTurns(concurrency: 1)
        for _ in 0..<3 {
            let batch = Batch(turns, on: Self.first)
            #expect(batch.hasTurn)
            batch.endTurn()
            batch.endTurn() // a second end changes nothing
        }
        let holder = Batch(turns, on: Self.first)
        let next = Batch(turns, on: Self.second)
        #expect(next.isWaiting)
        // A turn let go without its end (the batch given up) ends too.
        holder.dropTurn()
        guard case .turn = try await next.outcome() else {
            Issue.record("the waiter did not get the turn given up")
            return
        }
        #expect(turns.waiting == 0)
        next.endTurn()
    }

    /// At most 4 × the concurrency wait; one more is told at once.
    @Test func theQueueHoldsFourTimesTheConcurrency() async throws {
        let turns = BatchTurns(concurrency: 1)
        #expect(turns.maxWaiting == 4)
        let holder = Batch(turns, on: Self.first)
        let waiters = (0..<4).map { Batch(turns, on: $0 % 2 == 0 ? Self.first : Self.second, endsAtOnce: true) }
        #expect(turns.waiting == 4)
        let fifth = Batch(turns, on: Self.second)
        guard case .queueFull = fifth.now else {
            Issue.record("a fifth waiter was queued, or not told at once")
            return
        }
        #expect(turns.waiting == 4)
        holder.endTurn()
        for waiter in waiters {
            guard case .turn = try await waiter.outcome() else {
                Issue.record("a waiter got no turn")
                return
            }
        }
        #expect(turns.waiting == 0)
        #expect(Batch(turns, on: Self.first, endsAtOnce: true).hasTurn)
    }

    /// Many batches arriving at once on two loops: the queue's cap still
    /// holds, so exactly the cap waits and the rest are told the queue is
    /// full.
    @Test func theCapHoldsWhenBatchesArriveAtOnce() async throws {
        let turns = BatchTurns(concurrency: 4)
        let holders = (0..<4).map { _ in Batch(turns, on: Self.first) }
        let arrivals = 400
        let batches = Mutex<[Batch]>([])
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let left = Atomic<Int>(arrivals)
            for index in 0..<arrivals {
                let loop = index % 2 == 0 ? Self.first : Self.second
                _ = loop.execute {
                    let batch = Batch(turns, on: loop, endsAtOnce: true)
                    batches.withLock { $0.append(batch) }
                    if left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { continuation.resume() }
                }
            }
        }
        let all = batches.withLock { $0 }
        #expect(all.count == arrivals)
        #expect(all.filter { if case .queueFull = $0.now { true } else { false } }.count == arrivals - turns.maxWaiting)
        #expect(all.filter(\.isWaiting).count == turns.maxWaiting)
        #expect(turns.waiting == turns.maxWaiting)
        for holder in holders { holder.endTurn() }
        for batch in all where batch.isWaiting || batch.hasTurn {
            guard case .turn = try await batch.outcome() else {
                Issue.record("a waiter got no turn")
                return
            }
        }
        #expect(turns.waiting == 0)
    }

    /// A wait ends at its deadline, by its loop's timer, not a moment early,
    /// with no turn; the gauge hears it leave, and a later turn goes to
    /// whoever still waits.
    @Test func aWaitEndsAtItsDeadlineByItsLoopsTimer() async throws {
        let gauge = Gauge()
        let turns = BatchTurns(concurrency: 1) { gauge.add($0) }
        let holder = Batch(turns, on: Self.first)
        let late = Batch(turns, on: Self.second, until: .now + .milliseconds(30))
        let patient = Batch(turns, on: Self.first)
        #expect(late.isWaiting && patient.isWaiting)
        guard case .deadlinePassed = try await late.outcome() else {
            Issue.record("a wait past its deadline got a turn")
            return
        }
        #expect(late.toldOnItsLoop)
        #expect(try #require(late.toldAt) >= late.deadline)
        #expect(turns.waiting == 1)
        #expect(gauge.all == [1, 1, -1])
        holder.endTurn()
        guard case .turn = try await patient.outcome() else {
            Issue.record("the batch still waiting did not get the turn")
            return
        }
        #expect(late.toldCount == 1)
        #expect(turns.waiting == 0)
        patient.endTurn()
    }

    /// A deadline that has passed already when the batch queues ends its
    /// wait on the loop's next turn, not in `begin`.
    @Test func aDeadlinePassedAlreadyEndsTheWaitOnTheNextTurn() async throws {
        let turns = BatchTurns(concurrency: 1)
        let holder = Batch(turns, on: Self.first)
        let late = Batch(turns, on: Self.first, until: .now - .seconds(1))
        #expect(!late.wasToldInBegin)
        guard case .deadlinePassed = try await late.outcome() else {
            Issue.record("a wait past its deadline got a turn")
            return
        }
        #expect(turns.waiting == 0)
        holder.endTurn()
        #expect(Batch(turns, on: Self.first, endsAtOnce: true).hasTurn)
    }

    /// A waiting batch whose client hangs up (its connection's callback)
    /// leaves the queue at once: it is told so on its loop, the gauge
    /// hears it leave, its place is free for another, and the next turn
    /// goes to whoever still waits, never to it.
    @Test func aBatchWhoseClientHangsUpLeavesTheQueueAtOnce() async throws {
        let gauge = Gauge()
        let turns = BatchTurns(concurrency: 1) { gauge.add($0) }
        let holder = Batch(turns, on: Self.first)
        let gone = (0..<4).map { Batch(turns, on: $0 % 2 == 0 ? Self.first : Self.second) }
        #expect(turns.waiting == 4)
        for batch in gone {
            batch.leave()
            // Told before the callback returns.
            guard case .left = batch.now else {
                Issue.record("a batch that left was not told so at once")
                return
            }
        }
        #expect(turns.waiting == 0)
        #expect(gauge.all == [1, 1, 1, 1, -1, -1, -1, -1])
        #expect(gone.allSatisfy { $0.toldOnItsLoop })
        // Their places are free again, and the turn goes to a batch still waiting.
        let next = (0..<4).map { _ in Batch(turns, on: Self.second) }
        #expect(next.allSatisfy { $0.isWaiting })
        holder.endTurn()
        guard case .turn = try await next[0].outcome() else {
            Issue.record("the batch still waiting did not get the turn")
            return
        }
        #expect(gone.allSatisfy { $0.toldCount == 1 })
        for batch in next[1...] { batch.leave() }
        next[0].endTurn()
        #expect(turns.waiting == 0)
    }

    /// A batch that leaves just as a turn is handed to it (the turn still
    /// on its way to its loop) is told it left, once, and the turn goes on
    /// at once: to the next waiter, or free.
    @Test func aBatchThatLeavesAsItsTurnIsHandedOverPassesItOn() async throws {
        let turns = BatchTurns(concurrency: 1)
        let holder = Batch(turns, on: Self.first)
        let leaving = Batch(turns, on: Self.first)
        let next = Batch(turns, on: Self.second)
        // In one callback of the leaving batch's loop: the turn is handed
        // to it (through the loop's queue, after this callback), then its
        // client hangs up.
        Self.first.submitAndWait {
            holder.endTurn()
            leaving.leave()
        }
        guard case .turn = try await next.outcome() else {
            Issue.record("the turn did not go on to the next waiter")
            return
        }
        guard case .left = leaving.now else {
            Issue.record("the batch that left was told otherwise")
            return
        }
        #expect(leaving.toldCount == 1)
        #expect(turns.waiting == 0)
        next.endTurn()
        #expect(Batch(turns, on: Self.first, endsAtOnce: true).hasTurn)
    }

    /// A free turn is taken at once, before any hang-up could be heard: a
    /// client that only shut its side still gets its answer, and a batch
    /// that does not wait holds no place. Leaving once told changes
    /// nothing.
    @Test func aFreeTurnIsTakenAtOnceAndLeavingAfterwardsChangesNothing() async throws {
        let gauge = Gauge()
        let turns = BatchTurns(concurrency: 1) { gauge.add($0) }
        let batch = Batch(turns, on: Self.first)
        #expect(batch.hasTurn)
        batch.leave()
        #expect(batch.hasTurn)
        #expect(batch.toldCount == 1)
        #expect(gauge.all.isEmpty)
        let waiter = Batch(turns, on: Self.second)
        batch.endTurn()
        guard case .turn = try await waiter.outcome() else {
            Issue.record("the waiter did not get the turn")
            return
        }
        waiter.leave()
        #expect(waiter.toldCount == 1)
        #expect(waiter.hasTurn)
        waiter.endTurn()
        #expect(gauge.all == [1, -1])
    }
}
