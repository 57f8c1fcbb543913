import Glibc
public import MonotonicTime

/// Where the gateway reads the time and arms the timers of what ages: the
/// memory cache's freshness and stale windows, a call's deadline, a
/// waiter's deadline on a shared fetch, the shared tier's entries, leases
/// and polls.
///
/// Instants stay `MonotonicInstant` (the call's arrival, a request's
/// deadline), so nothing above needs to be generic over a clock; only where
/// "now" comes from changes. In production that is the system's clocks
/// (``system``), read directly: a read costs a nil check more than
/// `MonotonicInstant.now`, with no allocation and no dynamic call. Tests put
/// a manual source in (a ``TimeSource``: the `ManualClock` of the test
/// support), on which time moves only when the test says so, and timers
/// due by then fire in order, as swift-nio's
/// `EmbeddedEventLoop.advanceTime(by:)` does.
public struct GatewayClock: Sendable {
    /// Nil: the system's clocks and the loops' own timers.
    private let source: (any TimeSource)?

    /// The system's clocks: `CLOCK_MONOTONIC` for instants, `CLOCK_REALTIME`
    /// for wall time, and loop timers (libevent) for deadlines.
    public static let system = GatewayClock(source: nil)

    /// A clock read from `source` (tests).
    package init(_ source: any TimeSource) {
        self.source = source
    }

    private init(source: (any TimeSource)?) {
        self.source = source
    }

    /// Whether this is ``system``.
    public var isSystem: Bool { source == nil }

    /// The monotonic now: what deadlines, TTLs and stale windows are
    /// measured on.
    @inline(__always)
    public var now: MonotonicInstant {
        if let source { return source.now }
        return .now
    }

    /// Milliseconds since the Unix epoch, for what other processes read
    /// (a shared-tier entry's fresh-until).
    public var unixMilliseconds: Int64 {
        if let source { return source.unixMilliseconds }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Calls `callback` on `loop` at `deadline` of this clock (on the
    /// loop's next turn when it has passed), unless the returned timer is
    /// cancelled first. On `loop`'s thread only.
    public func scheduleTimer(on loop: EventLoop, at deadline: MonotonicInstant, _ callback: @escaping () -> Void) -> ClockTimer {
        if let source { return ClockTimer(source.scheduleTimer(on: loop, at: deadline, callback)) }
        return ClockTimer(loop.scheduleTimer(at: deadline, callback))
    }

    /// Calls `callback` on `loop` after `delay` of this clock, unless the
    /// returned timer is cancelled first. On `loop`'s thread only.
    public func scheduleTimer(on loop: EventLoop, after delay: Duration, _ callback: @escaping () -> Void) -> ClockTimer {
        if let source { return ClockTimer(source.scheduleTimer(on: loop, at: source.now + max(.zero, delay), callback)) }
        return ClockTimer(loop.scheduleTimer(after: delay, callback))
    }
}

/// A source of time other than the system's: what a test's manual clock
/// implements. Its timers run their callbacks on their loop.
package protocol TimeSource: AnyObject, Sendable {
    var now: MonotonicInstant { get }
    var unixMilliseconds: Int64 { get }
    /// Arms a timer that fires on `loop` once this source's time reaches
    /// `deadline`. Called on `loop`.
    func scheduleTimer(on loop: EventLoop, at deadline: MonotonicInstant, _ callback: @escaping () -> Void) -> any TimeSourceTimer
}

/// A timer of a ``TimeSource``.
package protocol TimeSourceTimer: AnyObject {
    var isArmed: Bool { get }
    /// Its callback will not run. Harmless after it fired. On its loop.
    func cancel()
}

/// A timer armed by ``GatewayClock``: a loop timer, or a manual source's.
/// Loop-bound as ``LoopTimer``: cancel it on its loop.
public struct ClockTimer {
    private enum Kind {
        case loop(LoopTimer)
        case source(any TimeSourceTimer)
    }

    private let kind: Kind

    init(_ timer: LoopTimer) { kind = .loop(timer) }
    init(_ timer: any TimeSourceTimer) { kind = .source(timer) }

    /// Whether the timer will still fire.
    public var isArmed: Bool {
        switch kind {
        case .loop(let timer): timer.isArmed
        case .source(let timer): timer.isArmed
        }
    }

    /// Stops the timer; its callback will not run. Harmless after it fired.
    public func cancel() {
        switch kind {
        case .loop(let timer): timer.cancel()
        case .source(let timer): timer.cancel()
        }
    }
}
