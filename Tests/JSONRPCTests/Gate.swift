/// A one-way latch: `wait()` returns once `open()` has been called.
///
/// Waiting also ends when the waiting task is cancelled, so a test whose
/// time limit runs out fails instead of hanging the whole run.
actor Gate {
    private var isOpen = false
    private var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
    private var nextTicket = 0

    func open() {
        isOpen = true
        for waiter in waiters.values {
            waiter.resume(returning: true)
        }
        waiters.removeAll()
    }

    /// `true` once the gate is open, `false` when the task was cancelled
    /// first.
    func wait() async -> Bool {
        guard !isOpen else { return true }
        let ticket = nextTicket
        nextTicket += 1
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(returning: false)
                } else {
                    waiters[ticket] = continuation
                }
            }
        } onCancel: {
            Task { await self.cancel(ticket) }
        }
    }

    private func cancel(_ ticket: Int) {
        waiters.removeValue(forKey: ticket)?.resume(returning: false)
    }
}
