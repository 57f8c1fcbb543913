import EventTransport
import MonotonicTime
import Testing

/// The pool's bookkeeping, table by table, on made-up instants: no sockets,
/// no sleeping.
@Suite("ConnectionPoolStateMachine")
struct ConnectionPoolStateMachineTests {
    typealias Machine = ConnectionPoolStateMachine<String, MonotonicClock>
    let t0 = MonotonicInstant.now

    func machine(loops: Int = 2, maxLeased: Int = 2, maxIdle: Int = 2, idleTimeout: Duration = .seconds(30)) -> Machine {
        Machine(loopCount: loops, maxLeased: maxLeased, maxIdlePerLoop: maxIdle, idleTimeout: idleTimeout)
    }

    func proceed(_ action: Machine.LeaseAction) -> (Machine.Lease, [Int])? {
        if case .proceed(let lease, let closing) = action { return (lease, closing) }
        return nil
    }

    @Test func aFirstLeaseCreatesAConnectionAndItsReleaseKeepsItIdleForTheSameLoop() {
        var pool = machine()
        guard let (lease, closing) = proceed(pool.lease(1, loop: 0, waiter: "a", now: t0)) else { Issue.record("must proceed"); return }
        #expect(lease == .create(0))
        #expect(closing.isEmpty)
        #expect(pool.leasedCount == 1)
        let release = pool.release(0, reusable: true, now: t0)
        #expect(release.close.isEmpty)
        #expect(release.grant == nil)
        #expect(pool.idleCount(loop: 0) == 1)
        #expect(pool.leasedCount == 0)
        // The same loop reuses it; another loop opens its own.
        #expect(proceed(pool.lease(2, loop: 0, waiter: "b", now: t0))?.0 == .idle(0))
        #expect(proceed(pool.lease(3, loop: 1, waiter: "c", now: t0))?.0 == .create(1))
        #expect(pool.connectionCount == 2)
    }

    @Test func pastTheCapCallersWaitInOrderAndEachReleaseHandsOneLeaseOn() {
        var pool = machine(maxLeased: 2)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.lease(2, loop: 0, waiter: "b", now: t0)
        guard case .wait = pool.lease(3, loop: 1, waiter: "c", now: t0) else { Issue.record("c must wait"); return }
        guard case .wait = pool.lease(4, loop: 0, waiter: "d", now: t0) else { Issue.record("d must wait"); return }
        #expect(pool.waiterCount == 2)
        #expect(pool.leasedCount == 2)

        // c waits on loop 1, which has no idle connection: it gets a new one
        // there, and the released connection stays idle on loop 0.
        let first = pool.release(0, reusable: true, now: t0)
        #expect(first.grant?.waiter == "c")
        #expect(first.grant?.loop == 1)
        #expect(first.grant?.lease == .create(2))
        #expect(pool.idleCount(loop: 0) == 1)
        #expect(pool.leasedCount == 2)

        // d waits on loop 0, where connection 0 is idle now.
        let second = pool.release(1, reusable: true, now: t0)
        #expect(second.grant?.waiter == "d")
        #expect(second.grant?.lease == .idle(1))
        #expect(pool.waiterCount == 0)
        #expect(pool.leasedCount == 2)
    }

    @Test func aWaiterWhoseDeadlinePassedLeavesTheQueueAndIsNotGrantedLater() {
        var pool = machine(maxLeased: 1)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.lease(2, loop: 0, waiter: "b", now: t0)
        #expect(pool.cancelWaiter(2) == "b")
        #expect(pool.cancelWaiter(2) == nil)
        let release = pool.release(0, reusable: true, now: t0)
        #expect(release.grant == nil)
        #expect(pool.leasedCount == 0)
    }

    @Test func aGrantedWaiterCannotAlsoBeCancelled() {
        var pool = machine(maxLeased: 1)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.lease(2, loop: 1, waiter: "b", now: t0)
        #expect(pool.release(0, reusable: false, now: t0).grant?.waiter == "b")
        // Its deadline timer fires just after: it must not fail a call that runs.
        #expect(pool.cancelWaiter(2) == nil)
    }

    @Test func aConnectionThatIsNotReusableClosesAndTheIdleStackIsCapped() {
        var pool = machine(maxLeased: 3, maxIdle: 1)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.lease(2, loop: 0, waiter: "b", now: t0)
        _ = pool.lease(3, loop: 0, waiter: "c", now: t0)
        #expect(pool.release(0, reusable: false, now: t0).close == [0])
        #expect(pool.release(1, reusable: true, now: t0).close.isEmpty)
        // The idle stack of loop 0 is full.
        #expect(pool.release(2, reusable: true, now: t0).close == [2])
        #expect(pool.connectionCount == 1)
    }

    @Test func anIdleConnectionPastTheIdleTimeoutIsClosedInsteadOfReused() {
        var pool = machine(idleTimeout: .seconds(30))
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.release(0, reusable: true, now: t0)
        guard let (lease, closing) = proceed(pool.lease(2, loop: 0, waiter: "b", now: t0 + .seconds(31))) else {
            Issue.record("must proceed")
            return
        }
        #expect(closing == [0])
        #expect(lease == .create(1))
    }

    @Test func theFreshestIdleConnectionIsReusedFirst() {
        var pool = machine(maxLeased: 2)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.lease(2, loop: 0, waiter: "b", now: t0)
        _ = pool.release(0, reusable: true, now: t0)
        _ = pool.release(1, reusable: true, now: t0 + .seconds(10))
        #expect(proceed(pool.lease(3, loop: 0, waiter: "c", now: t0 + .seconds(35)))?.0 == .idle(1))
        #expect(pool.expireIdle(loop: 0, now: t0 + .seconds(35)) == [0])
        #expect(pool.connectionCount == 1)
    }

    /// An idle connection the upstream closed leaves the table at once;
    /// a leased one is left to its exchange.
    @Test func anIdleConnectionThatEndedByItselfLeavesTheTable() {
        var pool = machine(maxLeased: 2)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.lease(2, loop: 0, waiter: "b", now: t0)
        _ = pool.release(0, reusable: true, now: t0)
        let leased = pool.removeIdle(1)
        let idle = pool.removeIdle(0)
        let again = pool.removeIdle(0)
        #expect(!leased)
        #expect(idle)
        #expect(!again)
        #expect(pool.idleCount(loop: 0) == 0)
        #expect(pool.connectionCount == 1)
        // The next lease opens a new connection rather than the dead one.
        _ = pool.release(1, reusable: false, now: t0)
        #expect(proceed(pool.lease(3, loop: 0, waiter: "c", now: t0))?.0 == .create(2))
    }

    @Test func aStaleConnectionIsReplacedUnderTheSameLease() {
        var pool = machine(maxLeased: 1)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.release(0, reusable: true, now: t0)
        _ = pool.lease(2, loop: 0, waiter: "b", now: t0)
        let replacement = pool.replace(0)
        #expect(replacement == 1)
        #expect(pool.leasedCount == 1)
        #expect(pool.connectionCount == 1)
        #expect(pool.release(replacement, reusable: true, now: t0).close.isEmpty)
        #expect(pool.leasedCount == 0)
    }

    @Test func shutdownClosesIdleFailsWaitersAndRefusesLaterLeases() {
        var pool = machine(maxLeased: 2)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.lease(2, loop: 1, waiter: "b", now: t0)
        _ = pool.release(1, reusable: true, now: t0)
        _ = pool.lease(3, loop: 0, waiter: "c", now: t0)
        _ = pool.lease(4, loop: 0, waiter: "d", now: t0)
        // c found no idle connection on loop 0 and opened connection 2.
        let action = pool.shutDown()
        #expect(action.close.map(\.loop) == [1])
        #expect(action.close.map(\.id) == [1])
        #expect(action.waiters == ["d"])
        guard case .refuse = pool.lease(5, loop: 0, waiter: "e", now: t0) else { Issue.record("must refuse"); return }
        // Leased connections close when they come back, and hand nothing on.
        let first = pool.release(0, reusable: true, now: t0)
        #expect(first.close == [0])
        #expect(first.grant == nil)
        #expect(pool.release(2, reusable: true, now: t0).close == [2])
        #expect(pool.connectionCount == 0)
        #expect(pool.leasedCount == 0)
    }

    @Test func shutdownClosesEachLoopsIdleConnections() {
        var pool = machine(maxLeased: 2)
        _ = pool.lease(1, loop: 0, waiter: "a", now: t0)
        _ = pool.lease(2, loop: 1, waiter: "b", now: t0)
        _ = pool.release(0, reusable: true, now: t0)
        _ = pool.release(1, reusable: true, now: t0)
        let action = pool.shutDown()
        #expect(action.close.map(\.loop) == [0, 1])
        #expect(action.close.map(\.id) == [0, 1])
        #expect(pool.connectionCount == 0)
    }
}
