import Dispatch
import Foundation
import Logging

/// SIGTERM and SIGINT as an async event: the first starts the graceful
/// shutdown; a second one exits at once (status 1), for an operator who
/// does not want to wait.
final class ShutdownSignals: @unchecked Sendable {
    // @unchecked: `sources` is written once in init and only kept alive after.

    private let stream: AsyncStream<String>
    private let sources: [any DispatchSourceSignal]

    /// - Parameter logger: tells of the second signal (standard error is the
    ///   log, one JSON object a line with `LOG_FORMAT=json`).
    init(logger: Logger) {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        self.stream = stream
        let queue = DispatchQueue(label: "shutdown-signals")
        let received = ManagedAtomicFlag()
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                if received.testAndSet() {
                    logger.critical("second \(name), exiting now")
                    exit(1)
                }
                continuation.yield(name)
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    /// The name of the first signal received.
    func first() async -> String {
        for await name in stream { return name }
        return "none"
    }
}

/// A flag set once, read on the signal queue only.
private final class ManagedAtomicFlag: @unchecked Sendable {
    // @unchecked: only touched on the serial signal queue.
    private var isSet = false

    func testAndSet() -> Bool {
        defer { isSet = true }
        return isSet
    }
}
