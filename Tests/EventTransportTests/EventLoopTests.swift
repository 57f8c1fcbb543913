import EventTransport
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
            await loop.sleep(for: .milliseconds(1))
            return [before, after, loop.inEventLoop, EventLoop.current === loop]
        }.value
        #expect(threads == [true, true, true, true])
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
            // A later turn: nothing else fires.
            await loop.sleep(for: .milliseconds(5))
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
