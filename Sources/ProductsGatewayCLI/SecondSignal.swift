import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

/// The operator's side of SIGTERM and SIGINT. The `ServiceGroup` turns the
/// first into the graceful shutdown; this service logs it, and exits at
/// once (status 1) on a second one, for an operator who does not want to
/// wait. It is the group's first service, so the group stops it last:
/// it listens for the whole drain.
struct SecondSignal: Service {
    /// Made before the group starts, so no signal falls between the group's
    /// own registration and this one.
    let signals: UnixSignalsSequence
    let graceMS: Int
    /// Tells of both signals (standard error is the log, one JSON object a
    /// line with `LOG_FORMAT=json`).
    let logger: Logger

    func run() async {
        var first = true
        for await signal in signals.cancelOnGracefulShutdown() {
            guard first else {
                logger.critical("second \(signal), exiting now")
                exit(1)
            }
            first = false
            logger.info("shutting down", metadata: ["signal": "\(signal)", "graceMs": "\(graceMS)"])
        }
    }
}
