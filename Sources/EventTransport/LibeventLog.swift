import CLibevent
public import Logging
import MonotonicTime
import Synchronization

/// Sends libevent's own messages (by default written raw to standard error)
/// to a logger, as one line each, at most ten a second.
public enum LibeventLog {
    private static let state = Mutex<(logger: Logger?, limiter: LogRateLimit)>((nil, LogRateLimit(interval: .milliseconds(100))))

    /// Routes every later libevent message to `logger`. Process-wide.
    public static func route(to logger: Logger) {
        state.withLock { $0.logger = logger }
        event_set_log_callback(libeventLogCallback)
    }

    fileprivate static func log(severity: Int32, message: String) {
        let (logger, suppressed) = state.withLock { current in
            (current.logger, current.limiter.permit(now: .now))
        }
        guard let logger, let suppressed else { return }
        let level: Logger.Level = switch severity {
        case EVENT_LOG_DEBUG: .debug
        case EVENT_LOG_MSG: .info
        case EVENT_LOG_WARN: .warning
        default: .error
        }
        var metadata: Logger.Metadata = ["source": "libevent"]
        if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
        logger.log(level: level, "\(message)", metadata: metadata)
    }
}

private func libeventLogCallback(_ severity: Int32, _ message: UnsafePointer<CChar>?) {
    LibeventLog.log(severity: severity, message: message.map { String(cString: $0) } ?? "")
}
