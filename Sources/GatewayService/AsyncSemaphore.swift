import Synchronization

/// Bounds how many upstream calls are in flight at once
/// (`UPSTREAM_CONCURRENCY`); the rest wait their turn, first come first served.
final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(permits: Int) {
        state = Mutex(State(available: permits))
    }

    func acquire() async {
        await withCheckedContinuation { continuation in
            let granted = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }

    func withPermit<T>(_ body: () async -> T) async -> T {
        await acquire()
        defer { release() }
        return await body()
    }
}
