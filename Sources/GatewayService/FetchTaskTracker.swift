import EventTransport
import Synchronization

/// Keeps the unstructured fetch tasks findable, so shutdown can wait for them.
final class FetchTaskTracker: Sendable {
    private let tasks = Mutex<[Int: Task<Void, Never>]>([:])
    private let nextID = Atomic<Int>(0)

    /// Runs `work` in a task of its own, on the calling thread's event loop
    /// when there is one (so the fetch, its upstream exchange and its
    /// timers stay on the loop of the call that started it).
    func track(_ work: @escaping @Sendable () async -> Void) {
        let id = nextID.add(1, ordering: .relaxed).oldValue
        // The task may end before it is stored; the lock orders both sides.
        let task = Task(executorPreference: EventLoop.current) { [self] in
            await work()
            _ = self.tasks.withLock { $0.removeValue(forKey: id) }
        }
        tasks.withLock { current in
            if !task.isCancelled { current[id] = task }
        }
    }

    func waitForAll() async {
        while let next = tasks.withLock({ $0.first?.value }) {
            await next.value
            tasks.withLock { current in
                current = current.filter { $0.value != next }
            }
        }
    }
}
