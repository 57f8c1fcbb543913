#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import Logging
import ServiceLifecycle
import UnixSignals

/// SIGTERM and SIGINT: the first is logged and starts the group's graceful
/// shutdown; a second one exits at once (status 1), for an operator who
/// does not want to wait.
///
/// Not the group's own `gracefulShutdownSignals`: the group traps those
/// only once it runs, and only the first. These are trapped before the
/// gateway binds, so a signal that arrives while it starts is not lost;
/// the line naming the signal comes before the drain it starts; and the
/// second signal is seen. The group does the rest: the order of the
/// services, the grace, and the cancellation past it.
struct ShutdownSignals {
    private let signals: UnixSignalsSequence
    private let graceMS: Int
    /// Tells of both signals (standard error is the log, one JSON object a
    /// line with `LOG_FORMAT=json`).
    private let logger: Logger

    /// Traps SIGTERM and SIGINT from here on.
    init(graceMS: Int, logger: Logger) async {
        self.signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        self.graceMS = graceMS
        self.logger = logger
    }

    /// Watches until the calling task is cancelled (the group has returned).
    func watch(_ group: ServiceGroup) async {
        var first = true
        for await signal in signals {
            guard first else {
                logger.critical("second \(signal), exiting now")
                exit(1)
            }
            first = false
            logger.info("shutting down", metadata: ["signal": "\(signal)", "graceMs": .stringConvertible(graceMS)])
            await group.triggerGracefulShutdown()
        }
    }
}
