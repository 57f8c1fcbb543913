import EventTransport
package import Logging
import MonotonicTime
import Synchronization

/// At most one line per `interval` (per level group), with the number of
/// lines left out since the last one: Redis failing under load must not
/// flood the log.
package final class RateLimitedLog: Sendable {
    private let logger: Logger
    /// Warnings and infos are limited apart: a recovery is never held back
    /// by the failures before it.
    private let limits: Mutex<(warning: LogRateLimit, info: LogRateLimit)>

    package init(logger: Logger, interval: Duration) {
        self.logger = logger
        self.limits = Mutex((LogRateLimit(interval: interval), LogRateLimit(interval: interval)))
    }

    package func warning(_ message: @autoclosure () -> String, metadata: Logger.Metadata) {
        let now = MonotonicInstant.now
        guard let suppressed = limits.withLock({ $0.warning.permit(now: now) }) else { return }
        var metadata = metadata
        if suppressed > 0 { metadata["suppressed"] = .stringConvertible(suppressed) }
        logger.warning("\(message())", metadata: metadata)
    }

    package func info(_ message: @autoclosure () -> String, metadata: Logger.Metadata) {
        let now = MonotonicInstant.now
        guard limits.withLock({ $0.info.permit(now: now) }) != nil else { return }
        logger.info("\(message())", metadata: metadata)
    }
}
