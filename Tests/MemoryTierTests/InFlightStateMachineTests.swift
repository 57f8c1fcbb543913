@testable import GatewayMetrics
@testable import MemoryTier
import Testing

/// The count of calls or fetches in flight and the shutdown's wait for the
/// last one, without tasks or clocks.
@Suite("InFlightStateMachine")
struct InFlightStateMachineTests {
    typealias Machine = InFlightStateMachine<String>

    @Test func aWaiterWithNothingInFlightIsResumedAtOnce() {
        var machine = Machine()
        #expect(isResume(machine.addWaiter(0, "shutdown")))
        #expect(machine.waiterCount == 0)
    }

    @Test func theLastLeaveHandsBackEveryWaiterOnce() {
        var machine = Machine()
        machine.enter()
        machine.enter()
        #expect(!isResume(machine.addWaiter(1, "second")))
        #expect(!isResume(machine.addWaiter(0, "first")))
        #expect(machine.leave().isEmpty)
        #expect(machine.count == 1)
        #expect(machine.leave() == ["first", "second"])
        #expect(machine.count == 0)
        #expect(machine.waiterCount == 0)
        // Work that starts and ends later has nobody left to resume.
        machine.enter()
        #expect(machine.leave().isEmpty)
    }

    @Test func workStartingWhileAWaiterWaitsKeepsItWaiting() {
        var machine = Machine()
        machine.enter()
        #expect(!isResume(machine.addWaiter(0, "shutdown")))
        machine.enter()
        #expect(machine.leave().isEmpty)
        #expect(machine.leave() == ["shutdown"])
    }

    @Test func aWaiterThatGivesUpIsHandedBackOnceAndNeverAgain() {
        var machine = Machine()
        machine.enter()
        #expect(!isResume(machine.addWaiter(3, "cancelled")))
        #expect(machine.removeWaiter(3) == "cancelled")
        #expect(machine.removeWaiter(3) == nil)
        #expect(machine.leave().isEmpty)
    }

    private func isResume(_ action: Machine.WaitAction) -> Bool {
        if case .resume = action { return true }
        return false
    }
}
