public import MonotonicTime
/// At most one line per interval, saying how many were held back: the one
/// rule every rate-limited log of the gateway follows (failing accepts,
/// libevent's own messages, the shared tier's Redis failures).
public struct LogRateLimit: Sendable {
    public let interval: Duration
    private var last: MonotonicInstant?
    private var suppressed = 0

    public init(interval: Duration) {
        self.interval = interval
    }

    /// The count of lines held back since the last permitted one, or nil
    /// when this one must be held back too.
    public mutating func permit(now: MonotonicInstant) -> Int? {
        if let last, now - last < interval {
            suppressed += 1
            return nil
        }
        last = now
        defer { suppressed = 0 }
        return suppressed
    }
}

extension Duration {
    /// Whole milliseconds (rounded toward zero): for settings, messages and
    /// Redis's `PX`.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
