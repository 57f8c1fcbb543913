import Synchronization

/// Names of the methods called, in call order.
final class CallRecorder: Sendable {
    private let names = Mutex<[String]>([])

    var calls: [String] { names.withLock { $0 } }

    func record(_ method: String) {
        names.withLock { $0.append(method) }
    }
}
