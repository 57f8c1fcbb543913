package import EventTransport
import MonotonicTime
import Synchronization

/// A clock for tests on which time moves only when the test says so
/// (``advance(by:)``), as swift-nio's `EmbeddedEventLoop.advanceTime(by:)`:
/// the timers due by then fire in order of their deadlines (and of their
/// arming, for equal ones), each on its own loop, and the clock reads each
/// timer's deadline while it fires. A timer armed for a time already
/// reached fires on its loop's next turn, with no advance, as a loop timer
/// does.
///
/// The components take it as a ``GatewayClock`` (``gatewayClock``); the
/// loops stay real, so what a timer's callback does runs where it does in
/// production.
package final class ManualClock: TimeSource {
    /// What the wall clock reads at the start: 2026-01-01T00:00:00Z.
    package static let startUnixMilliseconds: Int64 = 1_767_225_600_000

    private struct Armed: Sendable {
        let id: Int
        let deadline: MonotonicInstant
        let loop: EventLoop
        let timer: Timer
    }

    private struct State {
        var now: MonotonicInstant
        var nextID = 0
        var armed: [Armed] = []
    }

    /// The instant the clock started at: an arbitrary origin, since only
    /// differences of instants mean anything.
    package let start: MonotonicInstant
    private let state: Mutex<State>

    package init() {
        let start = MonotonicInstant.now
        self.start = start
        self.state = Mutex(State(now: start))
    }

    /// This clock, as the components take it.
    package var gatewayClock: GatewayClock { GatewayClock(self) }

    package var now: MonotonicInstant { state.withLock { $0.now } }

    /// How much time the test has let pass.
    package var elapsed: Duration { now - start }

    package var unixMilliseconds: Int64 {
        let elapsed = self.elapsed.components
        return Self.startUnixMilliseconds + elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
    }

    /// How many timers are armed (not fired, not cancelled).
    package var armedCount: Int { state.withLock { $0.armed.count { $0.timer.isArmed } } }

    package func scheduleTimer(on loop: EventLoop, at deadline: MonotonicInstant, _ callback: @escaping () -> Void) -> any TimeSourceTimer {
        loop.preconditionInEventLoop()
        let timer = Timer(loop: loop, callback: callback)
        let due = state.withLock { state in
            guard deadline > state.now else { return true }
            state.armed.append(Armed(id: state.nextID, deadline: deadline, loop: loop, timer: timer))
            state.nextID += 1
            return false
        }
        if due { loop.execute { timer.fire() } }
        return timer
    }

    /// Moves time on by `duration`: every timer due by then fires on its
    /// loop, earliest first, the clock reading its deadline; a timer that
    /// a callback arms and that is due by then fires too. Returns once the
    /// last callback has run. Call off the loops.
    package func advance(by duration: Duration) async {
        precondition(duration >= .zero, "time moves forwards")
        let target = state.withLock { $0.now } + duration
        while let next = takeNextDue(by: target) {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let queued = next.loop.execute {
                    next.timer.fire()
                    done.resume()
                }
                // A stopped loop runs nothing more, as a loop timer would not.
                if !queued { done.resume() }
            }
        }
        state.withLock { $0.now = max($0.now, target) }
    }

    /// The earliest timer due by `target`, taken off the list, with the
    /// clock moved to its deadline.
    private func takeNextDue(by target: MonotonicInstant) -> Armed? {
        state.withLock { state in
            state.armed.removeAll { !$0.timer.isArmed }
            guard let index = state.armed.indices.min(by: { (state.armed[$0].deadline, state.armed[$0].id) < (state.armed[$1].deadline, state.armed[$1].id) }),
                  state.armed[index].deadline <= target else { return nil }
            let next = state.armed.remove(at: index)
            state.now = max(state.now, next.deadline)
            return next
        }
    }

    /// One timer: armed until it fires or is cancelled, on its loop.
    private final class Timer: TimeSourceTimer, @unchecked Sendable {
        // @unchecked: `callback` is set at arming and touched on `loop` only
        // afterwards; `armed` is atomic, for the clock's thread to read.
        private let loop: EventLoop
        private var callback: (() -> Void)?
        private let armed = Atomic<Bool>(true)

        init(loop: EventLoop, callback: @escaping () -> Void) {
            self.loop = loop
            self.callback = callback
        }

        var isArmed: Bool { armed.load(ordering: .acquiring) }

        func cancel() {
            loop.preconditionInEventLoop()
            armed.store(false, ordering: .releasing)
            callback = nil
        }

        func fire() {
            loop.preconditionInEventLoop()
            guard armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
            let work = callback
            callback = nil
            work?()
        }
    }
}
