import EventTransport
import MonotonicTime
import Synchronization
import Testing

/// The loop as a queue, a timer source and a Swift executor, on real
/// threads and a real libevent base.
@Suite("EventLoop")
final class EventLoopTests {
    let loop: EventLoop

    init() throws {
        loop = try EventLoop(name: "test-loop")
        loop.start()
    }

    deinit {
        loop.stop()
        loop.waitUntilStopped()
    }

    @Test func workSubmittedFromAnotherThreadRunsOnTheLoopInOrder() async {
        let seen = Mutex<[Int]>([])
        let onLoop = Mutex<Bool>(true)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            for index in 0..<100 {
                loop.execute { [loop] in
                    if !loop.inEventLoop || EventLoop.current !== loop { onLoop.withLock { $0 = false } }
                    seen.withLock { $0.append(index) }
                    if index == 99 { done.resume() }
                }
            }
        }
        #expect(seen.withLock { $0 } == Array(0..<100))
        #expect(onLoop.withLock { $0 })
        #expect(EventLoop.current == nil)
    }

    /// Queued work does not hold the loop: a drain runs for its budget,
    /// then the loop polls again (timers and sockets) before the rest, in
    /// the same order.
    @Test func longQueuedWorkLetsTheLoopPollBetweenDrains() async {
        let loop = self.loop
        let order = Mutex<[String]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                // Twenty pieces of 3 ms each, queued from the loop itself,
                // and a timer due at once.
                for index in 0..<20 {
                    loop.execute {
                        let end = MonotonicInstant.now + .milliseconds(3)
                        while MonotonicInstant.now < end {}
                        order.withLock { $0.append("work \(index)") }
                        if index == 19 { done.resume() }
                    }
                }
                _ = loop.scheduleTimer(after: .zero) { order.withLock { $0.append("timer") } }
            }
        }
        let seen = order.withLock { $0 }
        #expect(seen.filter { $0.hasPrefix("work") } == (0..<20).map { "work \($0)" })
        // Without a budget all 60 ms of work ran first.
        let timerAt = seen.firstIndex(of: "timer") ?? seen.count
        #expect(timerAt < 5, "\(seen)")
    }

    @Test func aTimerFiresOnceAndACancelledTimerNever() async {
        let loop = self.loop
        let fired = await withCheckedContinuation { (done: CheckedContinuation<[String], Never>) in
            loop.execute {
                var log: [String] = []
                let cancelled = loop.scheduleTimer(after: .milliseconds(1)) { log.append("cancelled") }
                cancelled.cancel()
                #expect(!cancelled.isArmed)
                let timer = loop.scheduleTimer(after: .milliseconds(2)) { log.append("fired") }
                #expect(timer.isArmed)
                // A later turn, nothing else fires. Not a race: timers fire
                // in deadline order, so a repeat of the 2 ms timer (at 4 ms)
                // or the cancelled one would come before this one.
                _ = loop.scheduleTimer(after: .milliseconds(7)) { done.resume(returning: log) }
            }
        }
        #expect(fired == ["fired"])
    }

    @Test func aDeadlineAlreadyPastFiresOnTheNextTurn() async {
        let loop = self.loop
        let onLoop = await withCheckedContinuation { (fired: CheckedContinuation<Bool, Never>) in
            loop.execute {
                _ = loop.scheduleTimer(at: .now - .seconds(1)) { fired.resume(returning: loop.inEventLoop) }
            }
        }
        #expect(onLoop)
    }

    @Test func aStoppedLoopRefusesNewWork() throws {
        let other = try EventLoop(name: "stopping")
        other.start()
        other.stop()
        other.waitUntilStopped()
        #expect(other.execute {} == false)
    }
}
