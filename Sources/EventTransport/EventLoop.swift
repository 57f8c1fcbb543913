import CGatewayShims
import CLibevent
import Foundation
import Synchronization

/// A write to a peer that has gone (an upstream that reset the connection, a
/// caller that hung up) must fail with `EPIPE`, not kill the process:
/// OpenSSL's socket BIO and libevent write with `write(2)`/`send(2)` without
/// `MSG_NOSIGNAL`, and `SSL_shutdown` writes `close_notify` on a connection
/// the peer may already have reset. Set once, before the first loop runs.
private let ignoreBrokenPipes: Void = {
    _ = signal(SIGPIPE, SIG_IGN)
}()

/// One libevent `event_base` and the thread that runs it.
///
/// The base and everything attached to it (evhttp servers, client
/// connections) are touched only on the loop's own thread. Other threads hand
/// work over with ``execute(_:)``: the closure goes onto a locked queue and an
/// eventfd wakes the loop, which drains the queue on its thread. That is the
/// only way in, so the base needs no libevent locking
/// (`EVENT_BASE_FLAG_NOLOCK`).
public final class EventLoop: @unchecked Sendable {
    // @unchecked: `base` and `wakeEvent` are used only on the loop thread;
    // `queue` and `thread` are guarded by mutexes.

    /// A short name for logs and thread names (`loop-0`, ...).
    public let name: String

    let base: OpaquePointer
    private let wakeFD: Int32
    private var wakeEvent: OpaquePointer?
    private let queue = Mutex<[@Sendable () -> Void]>([])
    private let threadID = Mutex<pthread_t?>(nil)
    private let finishedCondition = NSCondition()
    private var isFinished = false

    /// Creates the loop. It runs once ``start()`` or ``run()`` is called.
    public init(name: String) throws(TransportError) {
        _ = ignoreBrokenPipes
        self.name = name
        let config = try Libevent.check(event_config_new(), "event_config_new")
        defer { event_config_free(config) }
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue))
        self.base = try Libevent.check(event_base_new_with_config(config), "event_base_new_with_config")
        let fd = gw_eventfd_create()
        guard fd >= 0 else {
            event_base_free(base)
            throw TransportError(call: "eventfd", message: String(cString: strerror(errno)))
        }
        self.wakeFD = fd
        let context = Unmanaged.passUnretained(self).toOpaque()
        let event = event_new(base, fd, Int16(EV_READ | EV_PERSIST), eventLoopWakeCallback, context)
        guard let event, event_add(event, nil) == 0 else {
            close(fd)
            event_base_free(base)
            throw TransportError(call: "event_new", message: "cannot watch the wake-up eventfd")
        }
        self.wakeEvent = event
    }

    deinit {
        if let wakeEvent { event_free(wakeEvent) }
        close(wakeFD)
        event_base_free(base)
    }

    /// True when called on this loop's thread.
    public var inEventLoop: Bool {
        guard let owner = threadID.withLock({ $0 }) else { return false }
        return pthread_equal(owner, pthread_self()) != 0
    }

    /// Crashes when called off the loop thread: loop-owned state must not be
    /// touched from anywhere else, and a test should find out at once.
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "must be called on event loop \(name)", file: file, line: line)
    }

    /// Runs `work` on the loop thread, after the current callback returns.
    /// Safe from any thread, including the loop's own.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        let wasEmpty = queue.withLock { pending in
            pending.append(work)
            return pending.count == 1
        }
        if wasEmpty { _ = gw_eventfd_signal(wakeFD) }
    }

    /// Runs the loop on the calling thread until ``stop()``.
    public func run() {
        threadID.withLock { $0 = pthread_self() }
        _ = event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY)
        // Work queued while stopping still runs, so no continuation is lost.
        drainQueue()
        finishedCondition.lock()
        isFinished = true
        finishedCondition.broadcast()
        finishedCondition.unlock()
    }

    /// Starts a dedicated thread that runs the loop.
    public func start() {
        let thread = Thread { [self] in self.run() }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
        // Wait until the thread has recorded itself, so `inEventLoop` is
        // meaningful as soon as `start` returns.
        while threadID.withLock({ $0 == nil }) { usleep(100) }
    }

    /// Asks the loop to return from ``run()``; safe from any thread.
    public func stop() {
        execute { [self] in _ = event_base_loopbreak(self.base) }
    }

    /// Blocks the calling thread (never a loop thread) until the loop has
    /// stopped running.
    public func waitUntilStopped() {
        finishedCondition.lock()
        while !isFinished { finishedCondition.wait() }
        finishedCondition.unlock()
    }

    fileprivate func drainQueue() {
        gw_eventfd_drain(wakeFD)
        while true {
            let batch = queue.withLock { pending -> [@Sendable () -> Void] in
                let taken = pending
                pending.removeAll(keepingCapacity: true)
                return taken
            }
            if batch.isEmpty { return }
            for work in batch { work() }
        }
    }
}

private func eventLoopWakeCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("event loop wake-up without its loop") }
    Unmanaged<EventLoop>.fromOpaque(context).takeUnretainedValue().drainQueue()
}
