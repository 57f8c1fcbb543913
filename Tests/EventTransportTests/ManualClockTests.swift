import EventTransport
import ManualTime
import MonotonicTime
import Synchronization
import Testing

/// The tests' manual clock: time moves only when a test advances it, and
/// the timers due by then fire in order, on their loop, the clock reading
/// each one's deadline. The system clock of ``GatewayClock`` arms loop
/// timers as before.
@Suite("Manual clock", .timeLimit(.minutes(1)))
final class ManualClockTests {
    let loop: EventLoop

    init() throws {
        loop = try EventLoop(name: "manual-clock")
        loop.start()
    }

    deinit {
        loop.stop()
        loop.waitUntilStopped()
    }

    /// What the timers saw when they fired: their name and the clock's
    /// time since its start, in milliseconds.
    final class Fired: Sendable {
        let log = Mutex<[String]>([])
        func add(_ name: String, _ clock: ManualClock) {
            let elapsed = clock.elapsed.components
            let ms = elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
            log.withLock { $0.append("\(name)@\(ms)") }
        }
        var all: [String] { log.withLock { $0 } }
    }

    /// Runs `work` on the loop and waits for it.
    func onLoop(_ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                work()
                done.resume()
            }
        }
    }

    @Test func timersFireInDeadlineOrderOnlyWhenTimeIsAdvancedPastThem() async {
        let clock = ManualClock()
        let gateway = clock.gatewayClock
        let fired = Fired()
        let loop = self.loop
        await onLoop {
            let start = clock.now
            _ = gateway.scheduleTimer(on: loop, at: start + .milliseconds(300)) { fired.add("c", clock) }
            _ = gateway.scheduleTimer(on: loop, after: .milliseconds(100)) { fired.add("a", clock) }
            _ = gateway.scheduleTimer(on: loop, at: start + .milliseconds(100)) { fired.add("b", clock) }
        }
        await clock.advance(by: .milliseconds(99))
        #expect(fired.all == [])
        #expect(clock.armedCount == 3)
        await clock.advance(by: .milliseconds(1))
        // Equal deadlines fire in the order they were armed.
        #expect(fired.all == ["a@100", "b@100"])
        await clock.advance(by: .seconds(5))
        #expect(fired.all == ["a@100", "b@100", "c@300"])
        #expect(clock.elapsed == .milliseconds(5100))
        #expect(clock.armedCount == 0)
    }

    @Test func aCancelledTimerNeverFires() async {
        let clock = ManualClock()
        let gateway = clock.gatewayClock
        let fired = Fired()
        let loop = self.loop
        await onLoop {
            let armed = gateway.scheduleTimer(on: loop, after: .seconds(1)) { fired.add("cancelled", clock) }
            _ = gateway.scheduleTimer(on: loop, after: .seconds(2)) { fired.add("kept", clock) }
            #expect(armed.isArmed)
            armed.cancel()
            #expect(!armed.isArmed)
        }
        #expect(clock.armedCount == 1)
        await clock.advance(by: .seconds(3))
        #expect(fired.all == ["kept@2000"])
    }

    /// A callback that arms a timer due within the same advance sees it
    /// fire too (a poll re-armed by the poll), and one armed for a time
    /// already reached fires on the loop's next turn, time standing still.
    @Test func timersArmedByCallbacksAndTimersAlreadyDueFire() async {
        let clock = ManualClock()
        let gateway = clock.gatewayClock
        let fired = Fired()
        let loop = self.loop
        @Sendable func poll(_ count: Int) {
            _ = gateway.scheduleTimer(on: loop, after: .milliseconds(250)) {
                fired.add("poll\(count)", clock)
                if count < 3 { poll(count + 1) }
            }
        }
        await onLoop { poll(1) }
        await clock.advance(by: .seconds(1))
        #expect(fired.all == ["poll1@250", "poll2@500", "poll3@750"])
        await onLoop {
            _ = gateway.scheduleTimer(on: loop, at: clock.now - .seconds(1)) { fired.add("late", clock) }
            _ = gateway.scheduleTimer(on: loop, after: .zero) { fired.add("now", clock) }
            #expect(fired.all.count == 3)
        }
        // A turn later: the loop's own queue goes before this test's job.
        await onLoop {}
        #expect(fired.all == ["poll1@250", "poll2@500", "poll3@750", "late@1000", "now@1000"])
        #expect(clock.armedCount == 0)
    }

    @Test func wallTimeMovesWithTheClock() async {
        let clock = ManualClock()
        #expect(clock.gatewayClock.unixMilliseconds == ManualClock.startUnixMilliseconds)
        await clock.advance(by: .milliseconds(1234))
        #expect(clock.gatewayClock.unixMilliseconds == ManualClock.startUnixMilliseconds + 1234)
        #expect(clock.gatewayClock.now == clock.start + .milliseconds(1234))
        #expect(!clock.gatewayClock.isSystem)
    }

    /// The system clock arms a real loop timer.
    @Test func theSystemClockArmsLoopTimers() async {
        let loop = self.loop
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                let timer = GatewayClock.system.scheduleTimer(on: loop, after: .milliseconds(1)) { done.resume() }
                #expect(timer.isArmed)
            }
        }
        #expect(GatewayClock.system.isSystem)
        let wall = GatewayClock.system.unixMilliseconds
        // After 2026-01-01, and before 2100.
        #expect(wall > ManualClock.startUnixMilliseconds && wall < 4_102_444_800_000)
    }
}
