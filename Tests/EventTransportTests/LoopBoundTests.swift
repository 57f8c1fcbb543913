import EventTransport
import Testing

/// The loop-bound value is read and changed on its loop, and touching it
/// from any other thread stops the process. On a real loop.
@Suite("LoopBound")
final class LoopBoundTests {
    let loop: EventLoop

    init() throws {
        loop = try EventLoop(name: "bound-loop")
        loop.start()
    }

    deinit {
        loop.stop()
        loop.waitUntilStopped()
    }

    @Test(.timeLimit(.minutes(1))) func aBoxMadeBeforeTheLoopRunsIsChangedByItsCallbacks() async {
        let box = LoopBoundBox<[Int]>(sending: [], loop: loop)
        let loop = self.loop
        let seen = await withCheckedContinuation { (done: CheckedContinuation<[Int], Never>) in
            loop.execute {
                box.value.append(1)
                loop.execute {
                    box.value.append(2)
                    done.resume(returning: box.value)
                }
            }
        }
        #expect(seen == [1, 2])
    }

    @Test(.timeLimit(.minutes(1))) func aBoundValueCrossesASendableClosureAndComesBack() async {
        let loop = self.loop
        let seen = await withCheckedContinuation { (done: CheckedContinuation<String, Never>) in
            loop.execute {
                let bound = LoopBound(NotSendable(text: "made on the loop"), loop: loop)
                bound.value.text += ", changed"
                loop.execute { done.resume(returning: bound.value.text) }
            }
        }
        #expect(seen == "made on the loop, changed")
    }

    @Test func touchingItOffTheLoopStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let loop = try EventLoop(name: "bound-exit-loop")
            loop.start()
            let box = LoopBoundBox<Int>(sending: 1, loop: loop)
            _ = box.value
        }
        await #expect(processExitsWith: .failure) {
            let loop = try EventLoop(name: "bound-exit-loop")
            loop.start()
            _ = LoopBound(1, loop: loop)
        }
    }
}

/// A class with no `Sendable` conformance, as loop-confined state is.
private final class NotSendable {
    var text: String
    init(text: String) { self.text = text }
}
