import Dispatch

extension EventLoop {
    /// Runs `work` on the loop and waits for its result. Only from a thread
    /// that is not this loop (it would wait for itself).
    package func submitAndWait<T>(_ work: @escaping @Sendable () -> T) -> T {
        if inEventLoop { return work() }
        let box = ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        execute {
            box.value = work()
            done.signal()
        }
        done.wait()
        return box.value!
    }
}

/// Carries a value from the loop thread to the waiting thread; the semaphore
/// orders the write before the read.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
