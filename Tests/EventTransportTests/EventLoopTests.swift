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

    @Test func aTaskPreferringTheLoopRunsOnItAndComesBackAfterASuspension() async {
        let loop = self.loop
        let threads = await Task(executorPreference: loop) { () -> [Bool] in
            let before = loop.inEventLoop
            // Resumed from another thread: the task must come back to the loop.
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Task.detached { continuation.resume() }
            }
            let after = loop.inEventLoop
            // The loop's own timer, the thing under test: resuming from it keeps the task on the loop.
            await loop.timerFired(after: .milliseconds(1))
            return [before, after, loop.inEventLoop, EventLoop.current === loop]
        }.value
        #expect(threads == [true, true, true, true])
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
        let fired = await Task(executorPreference: loop) { () -> [String] in
            var log: [String] = []
            let cancelled = loop.scheduleTimer(after: .milliseconds(1)) { log.append("cancelled") }
            cancelled.cancel()
            #expect(!cancelled.isArmed)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let timer = loop.scheduleTimer(after: .milliseconds(2)) {
                    log.append("fired")
                    continuation.resume()
                }
                #expect(timer.isArmed)
            }
            // A later turn, nothing else fires. Not a race: timers fire in deadline order, so a repeat (4 ms) or the cancelled timer would come first.
            await loop.timerFired(after: .milliseconds(5))
            return log
        }.value
        #expect(fired == ["fired"])
    }

    @Test func aDeadlineAlreadyPastFiresOnTheNextTurn() async {
        let loop = self.loop
        let fired = await Task(executorPreference: loop) { () -> Bool in
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                _ = loop.scheduleTimer(at: .now - .seconds(1)) { continuation.resume(returning: true) }
            }
        }.value
        #expect(fired)
    }

    @Test func aStoppedLoopRefusesNewWork() throws {
        let other = try EventLoop(name: "stopping")
        other.start()
        other.stop()
        other.waitUntilStopped()
        #expect(other.execute {} == false)
    }
}

extension EventLoop {
    /// Returns when a timer of this loop armed for `duration` fires: the
    /// loop's timers are what these tests check (they fire in deadline
    /// order, so a later timer's firing proves the earlier ones' turns are
    /// over). The task must run on this loop (`Task(executorPreference:)`).
    func timerFired(after duration: Duration) async {
        preconditionInEventLoop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            _ = scheduleTimer(after: duration) { continuation.resume() }
        }
    }
}
