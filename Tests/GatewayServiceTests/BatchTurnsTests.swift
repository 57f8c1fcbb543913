@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import RedisTier
import Synchronization
import Testing

/// ``BatchTurns`` with real tasks and no clock: who gets a turn, in which
/// order, and when a turn ends.
@Suite("BatchTurns")
struct BatchTurnsTests {
    /// Holds turns in stored properties, whose lifetimes the compiler does
    /// not shorten: a turn ends exactly when the test lets it go.
    final class Held: @unchecked Sendable {
        var turns: [String: BatchTurns.Turn] = [:]
    }

    /// The order in which waiting batches got their turn.
    final class Order: Sendable {
        private let names = Mutex<[String]>([])
        func append(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
    }

    /// Until `turns` has `count` batches waiting (each waiter's task has
    /// reached its wait); no clock, but a bound, so a broken gate fails
    /// instead of hanging.
    private func untilWaiting(_ turns: BatchTurns, _ count: Int) async throws {
        for _ in 0..<1_000_000 where turns.waiting != count { await Task.yield() }
        try #require(turns.waiting == count)
    }

    static let never = ContinuousClock.now + .seconds(3600)

    /// A turn, however long it takes.
    static func turn(_ turns: BatchTurns) async -> BatchTurns.Turn {
        guard case .turn(let turn) = await turns.begin(until: never) else { preconditionFailure("no turn") }
        return turn
    }

    @Test func batchesPastTheConcurrencyWaitUntilATurnEndsThenGoInArrivalOrder() async throws {
        let changes = Mutex<[Int]>([])
        let turns = BatchTurns(concurrency: 2) { change in changes.withLock { $0.append(change) } }
        let held = Held()
        held.turns["a"] = await Self.turn(turns)
        held.turns["b"] = await Self.turn(turns)
        #expect(turns.waiting == 0)
        let order = Order()
        let third = Task {
            let turn = await Self.turn(turns)
            order.append("c")
            return turn
        }
        try await untilWaiting(turns, 1)
        let fourth = Task {
            let turn = await Self.turn(turns)
            order.append("d")
            return turn
        }
        try await untilWaiting(turns, 2)
        #expect(order.all.isEmpty)
        #expect(changes.withLock { $0 } == [1, 1])

        held.turns["a"] = nil // the first batch's answer is written
        held.turns["c"] = await third.value
        #expect(order.all == ["c"])
        #expect(turns.waiting == 1)

        held.turns["b"] = nil
        held.turns["d"] = await fourth.value
        #expect(order.all == ["c", "d"])
        #expect(turns.waiting == 0)
        #expect(changes.withLock { $0 } == [1, 1, -1, -1])
    }

    @Test func anEndedTurnWithNoOneWaitingIsFreeForTheNextBatch() async throws {
        let turns = BatchTurns(concurrency: 1)
        let held = Held()
        for _ in 0..<3 {
            held.turns["a"] = await Self.turn(turns)
            #expect(turns.waiting == 0)
            held.turns["a"] = nil
        }
        held.turns["a"] = await Self.turn(turns)
        let next = Task { await Self.turn(turns) }
        try await untilWaiting(turns, 1)
        held.turns["a"] = nil
        held.turns["b"] = await next.value
        #expect(turns.waiting == 0)
    }

    /// At most 4 × the concurrency wait; one more is told at once.
    @Test func theQueueHoldsFourTimesTheConcurrency() async throws {
        let turns = BatchTurns(concurrency: 1)
        #expect(turns.maxWaiting == 4)
        let held = Held()
        held.turns["a"] = await Self.turn(turns)
        // Each waiter ends its turn as soon as it gets it (a task keeps the
        // value it returns, so it returns none).
        var waiters: [Task<Void, Never>] = []
        for count in 1...4 {
            waiters.append(Task { _ = await Self.turn(turns) })
            try await untilWaiting(turns, count)
        }
        guard case .queueFull = await turns.begin(until: Self.never) else {
            Issue.record("a fifth waiter was queued")
            return
        }
        #expect(turns.waiting == 4)
        held.turns["a"] = nil
        for waiter in waiters { await waiter.value }
        #expect(turns.waiting == 0)
    }

    /// Many batches arriving at once on many threads: the queue's cap still
    /// holds (a place is taken when the check passes, not later when the
    /// waiter is queued), so exactly the cap waits and the rest are told
    /// the queue is full.
    @Test func theCapHoldsWhenBatchesArriveAtOnce() async throws {
        let turns = BatchTurns(concurrency: 4)
        let held = Held()
        for name in ["a", "b", "c", "d"] { held.turns[name] = await Self.turn(turns) }
        let outcomes = Order()
        let arrivals = 400
        var waiters: [Task<Void, Never>] = []
        for _ in 0..<arrivals {
            waiters.append(Task.detached {
                switch await turns.begin(until: ContinuousClock.now + .seconds(3600)) {
                case .queueFull: outcomes.append("full")
                case .turn: outcomes.append("turn")
                default: outcomes.append("other")
                }
            })
        }
        for _ in 0..<1_000_000 where outcomes.all.count < arrivals - turns.maxWaiting { await Task.yield() }
        try await untilWaiting(turns, turns.maxWaiting)
        #expect(outcomes.all.filter { $0 == "full" }.count == arrivals - turns.maxWaiting)
        #expect(turns.waiting == turns.maxWaiting)
        held.turns = [:]
        for waiter in waiters { await waiter.value }
        #expect(turns.waiting == 0)
    }

    /// A wait ends at its deadline with no turn; the gauge hears it leave,
    /// and a later turn goes to whoever still waits.
    @Test func aWaitEndsAtItsDeadline() async throws {
        let changes = Mutex<[Int]>([])
        let turns = BatchTurns(concurrency: 1) { change in changes.withLock { $0.append(change) } }
        let held = Held()
        held.turns["a"] = await Self.turn(turns)
        guard case .deadlinePassed = await turns.begin(until: .now + .milliseconds(50)) else {
            Issue.record("a wait past its deadline got a turn")
            return
        }
        #expect(turns.waiting == 0)
        #expect(changes.withLock { $0 }.reduce(0, +) == 0)
        let next = Task { await Self.turn(turns) }
        try await untilWaiting(turns, 1)
        held.turns["a"] = nil
        held.turns["b"] = await next.value
        #expect(turns.waiting == 0)
    }

    /// A waiting batch whose task is cancelled (its client hung up) leaves
    /// the queue at once: the gauge hears it leave, its place is free for
    /// another, and the next turn goes to whoever still waits.
    @Test func aCancelledWaitLeavesTheQueueAtOnce() async throws {
        let changes = Mutex<[Int]>([])
        let turns = BatchTurns(concurrency: 1) { change in changes.withLock { $0.append(change) } }
        let held = Held()
        held.turns["a"] = await Self.turn(turns)
        var gone: [Task<BatchTurns.Wait, Never>] = []
        for count in 1...4 {
            gone.append(Task { await turns.begin(until: Self.never) })
            try await untilWaiting(turns, count)
        }
        for task in gone { task.cancel() }
        for task in gone {
            guard case .cancelled = await task.value else {
                Issue.record("a cancelled wait did not end as cancelled")
                return
            }
        }
        #expect(turns.waiting == 0)
        #expect(changes.withLock { $0 } == [1, 1, 1, 1, -1, -1, -1, -1])
        // Their places are free again, and the turn goes to a batch still waiting.
        let next = Task { await Self.turn(turns) }
        try await untilWaiting(turns, 1)
        held.turns["a"] = nil
        held.turns["b"] = await next.value
        #expect(turns.waiting == 0)
    }

    /// A task cancelled before it would wait takes no place in the queue;
    /// one cancelled with a turn free takes it (its client may only have
    /// shut its sending side, and it holds no place).
    @Test func aCancelledTaskNeverJoinsTheQueueButTakesAFreeTurn() async throws {
        let changes = Mutex<[Int]>([])
        let turns = BatchTurns(concurrency: 1) { change in changes.withLock { $0.append(change) } }
        let free = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await turns.begin(until: Self.never)
        }.value
        guard case .turn = free else {
            Issue.record("a cancelled task did not take the free turn")
            return
        }
        // `free` holds the one turn now.
        let late = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await turns.begin(until: Self.never)
        }.value
        guard case .cancelled = late else {
            Issue.record("a cancelled task waited")
            return
        }
        #expect(turns.waiting == 0)
        #expect(changes.withLock { $0 }.isEmpty)
        withExtendedLifetime(free) {}
    }
}
