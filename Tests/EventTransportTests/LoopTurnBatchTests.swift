import EventTransport
import Synchronization
import Testing

/// A turn's elements go to the flush together, once, after the turn's
/// callbacks; the next turn's apart. On a real loop.
@Suite("LoopTurnBatch")
final class LoopTurnBatchTests {
    let loop: EventLoop

    init() throws {
        loop = try EventLoop(name: "batch-loop")
        loop.start()
    }

    deinit {
        loop.stop()
        loop.waitUntilStopped()
    }

    @Test(.timeLimit(.minutes(1))) func aTurnsElementsAreFlushedTogetherAfterItsCallbacks() async {
        let batch = LoopTurnBatch<Int>(loop: loop)
        let flushed = Mutex<[[Int]]>([])
        let loop = self.loop
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            batch.flush = { elements in
                let count = flushed.withLock { $0.append(elements); return $0.count }
                if count == 2 { done.resume() }
            }
            // One turn: three adds, then a callback queued before the flush
            // ran adds a fourth to a new turn.
            loop.execute {
                #expect(batch.add(1) && batch.add(2) && batch.add(3))
                loop.execute {
                    // The first turn's flush has run by now (queued first).
                    #expect(flushed.withLock { $0 } == [[1, 2, 3]])
                    #expect(batch.add(4))
                }
                // Nothing is flushed while the turn's callback runs.
                #expect(flushed.withLock { $0 }.isEmpty)
            }
        }
        #expect(flushed.withLock { $0 } == [[1, 2, 3], [4]])
    }

    @Test func withoutAFlushNothingIsTaken() async {
        let batch = LoopTurnBatch<Int>(loop: loop)
        let taken = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            loop.execute { done.resume(returning: batch.add(1)) }
        }
        #expect(taken == false)
    }
}
