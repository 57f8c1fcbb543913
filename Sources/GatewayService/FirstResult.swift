import Synchronization

/// Resumes one continuation with whichever value is offered first; later
/// offers are dropped. Used to race an upstream attempt against its timeout.
final class FirstResult<Value: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Value, Never>?)
        case done
    }

    private let state = Mutex<State>(.waiting(nil))

    /// Sets the continuation to resume. A value offered before it was
    /// installed is impossible here: both offerers start after `install`.
    func install(_ continuation: CheckedContinuation<Value, Never>) {
        state.withLock { $0 = .waiting(continuation) }
    }

    /// Resumes the continuation with `value` unless another value came
    /// first. Returns whether this offer won.
    @discardableResult
    func offer(_ value: Value) -> Bool {
        let continuation = state.withLock { state -> CheckedContinuation<Value, Never>? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .done
            return continuation
        }
        continuation?.resume(returning: value)
        return continuation != nil
    }
}
