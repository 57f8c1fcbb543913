@testable import GatewayMetrics
@testable import MemoryTier
import Testing

/// The waiters of one shared fetch, without sockets or tasks.
@Suite("FetchPromiseStateMachine")
struct FetchPromiseStateMachineTests {
    struct Failure: Error, Equatable {
        let reason: String
    }

    typealias Machine = FetchPromiseStateMachine<Result<Int, Failure>, String>

    @Test func waitersSuspendUntilTheFetchCompletesThenAllGetTheValue() {
        var machine = Machine()
        #expect(isSuspend(machine.addWaiter(2, "second")))
        #expect(isSuspend(machine.addWaiter(1, "first")))
        #expect(machine.waiterCount == 2)

        // Handed back in the order they were numbered, each exactly once.
        #expect(machine.finish(.success(42)) == ["first", "second"])
        #expect(machine.waiterCount == 0)
        guard case .finished(.success(42)) = machine.state else {
            Issue.record("expected finished with 42, got \(machine.state)")
            return
        }
    }

    @Test func aFailureReachesTheWaitersOfThisFetch() {
        var machine = Machine()
        _ = machine.addWaiter(0, "a")
        _ = machine.addWaiter(1, "b")
        #expect(machine.finish(.failure(Failure(reason: "serviceUnavailable"))) == ["a", "b"])
    }

    @Test func aWaiterArrivingAfterCompletionIsResumedAtOnce() {
        var machine = Machine()
        _ = machine.finish(.failure(Failure(reason: "appNotRegistered")))
        guard case .resume(.failure(let failure)) = machine.addWaiter(7, "late") else {
            Issue.record("a late waiter must be resumed at once")
            return
        }
        #expect(failure.reason == "appNotRegistered")
        #expect(machine.waiterCount == 0)
    }

    @Test func aWaiterLeavingIsHandedBackOnceAndTheOthersStillGetTheValue() {
        var machine = Machine()
        _ = machine.addWaiter(0, "stays")
        _ = machine.addWaiter(1, "leaves")

        #expect(machine.removeWaiter(1) == "leaves")
        #expect(machine.removeWaiter(1) == nil)
        #expect(machine.waiterCount == 1)
        guard case .pending = machine.state else {
            Issue.record("a waiter leaving must not end the fetch")
            return
        }
        #expect(machine.finish(.success(1)) == ["stays"])
    }

    @Test func aWaiterLeavingAfterCompletionGetsNothingBack() {
        var machine = Machine()
        _ = machine.addWaiter(0, "a")
        _ = machine.finish(.success(1))
        #expect(machine.removeWaiter(0) == nil)
        #expect(machine.removeWaiter(99) == nil)
    }

    @Test func releasingHandsBackEveryWaiterAndLeavesTheFetchRunning() {
        var machine = Machine()
        _ = machine.addWaiter(1, "b")
        _ = machine.addWaiter(0, "a")
        #expect(machine.release(with: .failure(Failure(reason: "cancelled"))) == ["a", "b"])
        #expect(machine.release(with: .failure(Failure(reason: "cancelled"))).isEmpty)
        #expect(machine.waiterCount == 0)
        #expect(machine.removeWaiter(0) == nil)

        // The fetch still ends; nobody is left to resume, and a later waiter
        // still gets the release value, not the outcome (which at shutdown
        // may be the refused lease).
        #expect(machine.finish(.failure(Failure(reason: "connectionError"))).isEmpty)
        guard case .resume(.failure(let failure)) = machine.addWaiter(2, "c") else {
            Issue.record("a waiter after the release must be resumed at once")
            return
        }
        #expect(failure.reason == "cancelled")
    }

    @Test func releasingAFinishedFetchChangesNothing() {
        var machine = Machine()
        _ = machine.finish(.success(5))
        #expect(machine.release(with: .failure(Failure(reason: "cancelled"))).isEmpty)
        guard case .resume(.success(5)) = machine.addWaiter(0, "late") else {
            Issue.record("a waiter after completion must be resumed with the value")
            return
        }
    }

    /// After the shutdown grace no call may start waiting on a fetch that
    /// could still run for minutes.
    @Test func aWaiterArrivingAfterTheReleaseGetsTheReleaseValueAtOnce() {
        var machine = Machine()
        #expect(machine.release(with: .failure(Failure(reason: "cancelled"))).isEmpty)
        guard case .resume(.failure(let failure)) = machine.addWaiter(0, "late") else {
            Issue.record("a waiter after the release must be resumed at once")
            return
        }
        #expect(failure.reason == "cancelled")
        #expect(machine.waiterCount == 0)
        guard case .released(.failure(let kept)) = machine.state else {
            Issue.record("expected released, got \(machine.state)")
            return
        }
        #expect(kept.reason == "cancelled")
    }

    @Test func theFirstWaiterLeavingBesideOthersKeepsTheirOrder() {
        var machine = Machine()
        _ = machine.addWaiter(0, "first")
        _ = machine.addWaiter(1, "second")
        #expect(machine.removeWaiter(0) == "first")
        #expect(isSuspend(machine.addWaiter(2, "third")))
        #expect(machine.waiterCount == 2)
        #expect(machine.finish(.success(4)) == ["second", "third"])
    }

    @Test func aNewWaiterCanJoinAfterAnotherLeft() {
        var machine = Machine()
        _ = machine.addWaiter(0, "a")
        _ = machine.removeWaiter(0)
        #expect(isSuspend(machine.addWaiter(1, "b")))
        #expect(machine.finish(.success(3)) == ["b"])
    }

    private func isSuspend(_ action: Machine.WaitAction) -> Bool {
        if case .suspend = action { return true }
        return false
    }
}
