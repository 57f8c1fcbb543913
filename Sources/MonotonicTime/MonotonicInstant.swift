import Glibc

/// A point in time on the system's monotonic clock (`CLOCK_MONOTONIC`, the
/// clock libevent's timers run on), in nanoseconds from an arbitrary origin:
/// what every deadline, TTL, stale window and call duration of the gateway
/// is measured on.
///
/// Not `ContinuousClock.Instant`: the standard library does not freeze that
/// type, so outside it its size is unknown at compile time, and every copy
/// of it, of an optional of it, and of each struct or enum holding one (a
/// call's context, a connection's state machine and its actions, a cache
/// entry) went through runtime value witnesses and metadata lookups. This
/// one is an `Int64`, copied as such.
@frozen
public struct MonotonicInstant: InstantProtocol, Hashable, Sendable, CustomStringConvertible {
    public typealias Duration = Swift.Duration

    /// Nanoseconds since the clock's origin (boot, on Linux).
    public var nanoseconds: Int64

    @inlinable
    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    /// The current instant. One `clock_gettime` through the vDSO.
    public static var now: MonotonicInstant {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return MonotonicInstant(nanoseconds: Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec))
    }

    /// This instant moved by `duration`, saturating at the ends of `Int64`
    /// (a configured "never" of a century does not trap).
    @inlinable
    public func advanced(by duration: Duration) -> MonotonicInstant {
        let (sum, overflow) = nanoseconds.addingReportingOverflow(Self.nanoseconds(of: duration))
        if overflow { return MonotonicInstant(nanoseconds: duration < .zero ? .min : .max) }
        return MonotonicInstant(nanoseconds: sum)
    }

    /// The duration from this instant to `other` (negative when `other` is
    /// earlier).
    @inlinable
    public func duration(to other: MonotonicInstant) -> Duration {
        let (difference, overflow) = other.nanoseconds.subtractingReportingOverflow(nanoseconds)
        if overflow { return other.nanoseconds < nanoseconds ? .nanoseconds(Int64.min) : .nanoseconds(Int64.max) }
        return .nanoseconds(difference)
    }

    @inlinable
    public static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    @inlinable
    public static func + (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        lhs.advanced(by: rhs)
    }

    @inlinable
    public static func += (lhs: inout MonotonicInstant, rhs: Duration) {
        lhs = lhs.advanced(by: rhs)
    }

    @inlinable
    public static func - (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        lhs.advanced(by: .zero - rhs)
    }

    @inlinable
    public static func -= (lhs: inout MonotonicInstant, rhs: Duration) {
        lhs = lhs.advanced(by: .zero - rhs)
    }

    @inlinable
    public static func - (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Duration {
        rhs.duration(to: lhs)
    }

    public var description: String { "MonotonicInstant(\(nanoseconds) ns)" }

    /// `duration` in whole nanoseconds, saturating at the ends of `Int64`
    /// (292 years either way).
    @inlinable
    public static func nanoseconds(of duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowAdding) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflowAdding { return seconds < 0 ? .min : .max }
        return sum
    }
}

/// The clock of ``MonotonicInstant``: what the pure state machines (HTTP and
/// Redis connections, the upstream pool) are instantiated with in
/// production; their tests use made-up clocks.
public struct MonotonicClock: Clock, Sendable {
    public typealias Instant = MonotonicInstant

    public init() {}

    @inlinable
    public var now: MonotonicInstant { .now }

    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Sleeps until `deadline` of this clock (never on a request path: the
    /// loops arm timers instead).
    public func sleep(until deadline: MonotonicInstant, tolerance: Duration? = nil) async throws {
        let delay = MonotonicInstant.now.duration(to: deadline)
        if delay > .zero {
            try await Task.sleep(for: delay, tolerance: tolerance, clock: .continuous)
        }
    }
}
