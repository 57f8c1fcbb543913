import EventTransport
import Testing

/// A slot filled per loop is read back, on each loop, as that loop's own
/// value; a loop it was not filled on reads nil; the slot's end empties the
/// loops. On real loops.
@Suite("LoopContext")
final class LoopContextTests {
    let loops: [EventLoop]

    init() throws {
        loops = try (0..<2).map { try EventLoop(name: "context-loop-\($0)") }
        for loop in loops { loop.start() }
    }

    deinit {
        for loop in loops {
            loop.stop()
            loop.waitUntilStopped()
        }
    }

    /// A value only its loop may touch: not `Sendable`.
    final class PerLoop {
        var name: String
        init(name: String) { self.name = name }
    }

    /// Reads `slot` on `loop`, on its thread.
    static func read<Value>(_ slot: LoopSlot<Value>, on loop: EventLoop, _ body: @escaping @Sendable (Value?) -> String?) async -> String? {
        await withCheckedContinuation { (done: CheckedContinuation<String?, Never>) in
            loop.execute { done.resume(returning: body(loop.context[slot])) }
        }
    }

    @Test(.timeLimit(.minutes(1))) func eachLoopReadsItsOwnValue() async {
        let slot = LoopSlot<PerLoop>()
        // Filled from this thread, not a loop's: each fill returns once its
        // loop holds the value.
        for loop in loops { slot.fill(loop, with: PerLoop(name: "made for \(loop.name)")) }
        #expect(await Self.read(slot, on: loops[0]) { $0?.name } == "made for context-loop-0")
        #expect(await Self.read(slot, on: loops[1]) { $0?.name } == "made for context-loop-1")
        // Changed on its loop, seen by the loop's next read, not the other's.
        #expect(await Self.read(slot, on: loops[1]) { value in
            value?.name += ", changed"
            return value?.name
        } == "made for context-loop-1, changed")
        #expect(await Self.read(slot, on: loops[1]) { $0?.name } == "made for context-loop-1, changed")
        #expect(await Self.read(slot, on: loops[0]) { $0?.name } == "made for context-loop-0")
    }

    @Test(.timeLimit(.minutes(1))) func twoSlotsAndAnUnfilledLoopKeepApart() async {
        let first = LoopSlot<PerLoop>()
        let second = LoopSlot<PerLoop>()
        first.fill(loops[0], with: PerLoop(name: "first"))
        second.fill(loops[0], with: PerLoop(name: "second"))
        #expect(await Self.read(first, on: loops[0]) { $0?.name } == "first")
        #expect(await Self.read(second, on: loops[0]) { $0?.name } == "second")
        // Never filled on the second loop.
        #expect(await Self.read(second, on: loops[1]) { $0.map(\.name) ?? "nil" } == "nil")
    }

    @Test(.timeLimit(.minutes(1))) func aFillOnTheLoopItselfIsThereAtOnce() async {
        let slot = LoopSlot<PerLoop>()
        let loop = loops[0]
        let seen = await withCheckedContinuation { (done: CheckedContinuation<String?, Never>) in
            loop.execute {
                slot.fill(loop, with: PerLoop(name: "on the loop"))
                done.resume(returning: slot.value(on: loop)?.name)
            }
        }
        #expect(seen == "on the loop")
    }

    /// Tells when it goes.
    final class Tracked {
        let gone: @Sendable () -> Void
        init(gone: @escaping @Sendable () -> Void) { self.gone = gone }
        deinit { gone() }
    }

    @Test(.timeLimit(.minutes(1))) func theSlotsEndReleasesEachLoopsValue() async {
        // Resumed by the value's deinit: the slot, dropped when this closure
        // returns, has the loop drop the value it held.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let slot = LoopSlot<Tracked>()
            slot.fill(loops[0], with: Tracked { done.resume() })
            _ = slot
        }
    }

    @Test func readingOffTheLoopStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let loop = try EventLoop(name: "context-exit-loop")
            loop.start()
            let slot = LoopSlot<PerLoop>()
            slot.fill(loop, with: PerLoop(name: "the loop's"))
            _ = loop.context[slot]
        }
    }
}
