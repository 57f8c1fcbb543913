import Synchronization

/// A fixed set of event loops, one thread each.
public final class EventLoopGroup: Sendable {
    /// The loops, in creation order.
    public let loops: [EventLoop]
    private let nextIndex = Atomic<Int>(0)

    /// Creates and starts `count` loops named `prefix-0`, `prefix-1`, ...
    public init(count: Int, namePrefix: String = "loop") throws(TransportError) {
        precondition(count > 0, "an event loop group needs at least one loop")
        var loops: [EventLoop] = []
        for index in 0..<count {
            loops.append(try EventLoop(name: "\(namePrefix)-\(index)"))
        }
        self.loops = loops
        for loop in loops { loop.start() }
    }

    /// The next loop, round robin: spreads client work over the threads.
    public func next() -> EventLoop {
        let index = nextIndex.add(1, ordering: .relaxed).oldValue
        return loops[index % loops.count]
    }

    /// Stops every loop and waits until their threads have left `run()`.
    /// Call from a thread that is not one of the loops.
    public func shutdown() {
        for loop in loops { loop.stop() }
        for loop in loops { loop.waitUntilStopped() }
    }
}
