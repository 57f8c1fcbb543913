import CGatewayShims
import CLibevent
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
public import MonotonicTime
import Synchronization

/// A write to a peer that has gone (an upstream that reset the connection, a
/// caller that hung up) must fail with `EPIPE`, not kill the process:
/// OpenSSL's socket BIO and libevent write with `write(2)`/`send(2)` without
/// `MSG_NOSIGNAL`, and `SSL_shutdown` writes `close_notify` on a connection
/// the peer may already have reset. Set once, before the first loop runs.
private let ignoreBrokenPipes: Void = {
    _ = signal(SIGPIPE, SIG_IGN)
}()

/// The loop whose thread is the calling thread, if any. A thread-local, so
/// that code running on a loop finds its loop without being handed it.
private let currentLoopKey: pthread_key_t = {
    var key = pthread_key_t()
    precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
    return key
}()

/// One libevent `event_base` and the thread that runs it.
///
/// The base and everything attached to it (evhttp servers, client
/// connections, timers) are touched only on the loop's own thread. Other
/// threads hand work over with ``execute(_:)``: the closure goes onto a locked
/// queue and an eventfd wakes the loop, which drains the queue on its thread.
/// That is the only way in, so the base needs no libevent locking
/// (`EVENT_BASE_FLAG_NOLOCK`).
///
/// It is not a Swift executor: no request runs a task. A request accepted
/// on a loop is answered from that loop's callbacks, without changing
/// threads unless its work really has to move (``execute(_:)``).
public final class EventLoop: @unchecked Sendable {
    // @unchecked: `base` and `wakeEvent` are used only on the loop thread;
    // `pending` is guarded by its mutex; `owner` is an atomic written once
    // before the loop runs.

    /// A short name for logs and thread names (`loop-0`, ...).
    public let name: String

    package let base: OpaquePointer
    private let wakeFD: Int32
    private var wakeEvent: OpaquePointer?
    /// A timer of zero delay that resumes a drain cut short by its budget:
    /// unlike `event_active`, a timer runs after the loop has polled its
    /// sockets again, so requests read meanwhile are answered first.
    private var resumeEvent: OpaquePointer?
    private let pending = Mutex(PendingWork())
    /// The loop thread's own queue and drain buffer; touched only there.
    private var local = LocalWork()
    private let owner = Atomic<UInt>(0)
    private let hasStopped = Atomic<Bool>(false)
    private let finished = FinishedSignal()
    /// What this loop holds per component (``LoopSlot``): a call finds its
    /// loop's Redis connection, batches and pools here, from its own loop.
    public let context = LoopContext()
    /// The loop's resolver (``resolver()``), made on first use; touched
    /// only on the loop thread.
    private var dnsBase: OpaquePointer?
    private var hostsOnlyDNSBase: OpaquePointer?

    private struct LocalWork {
        var items: [Work] = []
        /// An empty array with capacity, swapped in for a queue being run.
        var spare: [Work] = []
        var wakeRequested = false
        var stopped = false
    }

    /// Work waiting for the loop, and whether a wake-up is already on its way
    /// (so a burst of submissions costs one `write(2)`, and submissions from
    /// the loop itself cost none).
    private struct PendingWork {
        var items: [Work] = []
        var wakeRequested = false
        var eventfdSignalled = false
        var stopped = false
    }

    private typealias Work = @Sendable () -> Void

    private enum Wake {
        case none, signal
    }

    /// Creates the loop. It runs once ``start()`` or ``run()`` is called.
    public init(name: String) throws(TransportError) {
        _ = ignoreBrokenPipes
        self.name = name
        let config = try CCheck.pointer(event_config_new(), "event_config_new")
        defer { event_config_free(config) }
        try CCheck.libevent(event_config_set_flag(config, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue)), "event_config_set_flag")
        // evhttp and the OpenSSL bufferevents add and remove read and write
        // interest several times per exchange; with the changelist, epoll
        // hears only the net change once per loop turn. Its one known trap,
        // two descriptors sharing one file description (dup), never arises:
        // every socket here is opened by us and closed through its owner.
        try CCheck.libevent(event_config_set_flag(config, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue)), "event_config_set_flag")
        self.base = try CCheck.pointer(event_base_new_with_config(config), "event_base_new_with_config")
        let fd = gw_eventfd_create()
        guard fd >= 0 else {
            event_base_free(base)
            throw TransportError(call: "eventfd", message: String(cString: strerror(errno)))
        }
        self.wakeFD = fd
        self.context.bind(to: self)
        let context = Unmanaged.passUnretained(self).toOpaque()
        let event = event_new(base, fd, Int16(EV_READ | EV_PERSIST), eventLoopWakeCallback, context)
        // Every stored property is set from here on, so a throw runs deinit,
        // which frees the event, the eventfd and the base: no freeing here.
        self.wakeEvent = try CCheck.pointer(event, "event_new")
        try CCheck.libevent(event_add(event, nil), "event_add")
        self.resumeEvent = try CCheck.pointer(event_new(base, -1, 0, eventLoopResumeCallback, context), "event_new")
    }

    deinit {
        if let dnsBase { evdns_base_free(dnsBase, 0) }
        if let hostsOnlyDNSBase { evdns_base_free(hostsOnlyDNSBase, 0) }
        if let resumeEvent { event_free(resumeEvent) }
        if let wakeEvent { event_free(wakeEvent) }
        close(wakeFD)
        event_base_free(base)
    }

    /// The loop's resolver, one for everything the loop connects to (the
    /// upstream, the trace collector, Redis): names are looked up on the
    /// loop, never by a blocking call. One that came up without a name
    /// server (no resolv.conf, or no descriptor free to read it or to open
    /// its socket) is not kept: the next use tries again, and meanwhile a
    /// resolver of `/etc/hosts` alone serves (addresses need none). On the
    /// loop only.
    package func resolver() throws(TransportError) -> OpaquePointer {
        preconditionInEventLoop()
        if let dnsBase { return dnsBase }
        if let base = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE) {
            if evdns_base_count_nameservers(base) > 0 {
                dnsBase = base
                return base
            }
            evdns_base_free(base, 0)
        }
        if let hostsOnlyDNSBase { return hostsOnlyDNSBase }
        let hostsOnly = try CCheck.pointer(evdns_base_new(base, 0), "evdns_base_new")
        hostsOnlyDNSBase = hostsOnly
        // Without the hosts file it still resolves nothing but addresses,
        // which is all it is for until a full resolver comes up.
        _ = try? CCheck.libevent(evdns_base_load_hosts(hostsOnly, nil), "evdns_base_load_hosts")
        return hostsOnly
    }

    /// The loop running on the calling thread, or `nil` off every loop.
    public static var current: EventLoop? {
        guard let pointer = pthread_getspecific(currentLoopKey) else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// True when called on this loop's thread, or once the loop has stopped
    /// for good: then nothing runs it any more, and whoever holds work for it
    /// (a continuation resumed during shutdown) runs that work itself.
    public var inEventLoop: Bool {
        if hasStopped.load(ordering: .acquiring) { return true }
        let thread = owner.load(ordering: .acquiring)
        return thread != 0 && pthread_equal(pthread_t(thread), pthread_self()) != 0
    }

    /// Whether the loop has stopped for good: it runs no job and fires no
    /// timer any more.
    public var isStopped: Bool { hasStopped.load(ordering: .acquiring) }

    /// Crashes when called off the loop thread: loop-owned state must not be
    /// touched from anywhere else, and a test should find out at once.
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "must be called on event loop \(name)", file: file, line: line)
    }

    /// Runs `work` on the loop thread, after the current callback returns.
    /// Safe from any thread, including the loop's own.
    ///
    /// - Returns: `false` when the loop has stopped and will never run it
    ///   (the work is dropped; the caller must answer whoever waits on it).
    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        submit(work)
    }

    private func submit(_ work: @escaping Work) -> Bool {
        let thread = owner.load(ordering: .acquiring)
        let onLoop = thread != 0 && pthread_equal(pthread_t(thread), pthread_self()) != 0
        if onLoop && !hasStopped.load(ordering: .relaxed) {
            // The loop's own submissions (a turn handed over, an answer) skip
            // the lock: only this thread touches `local`.
            if local.stopped { return false }
            local.items.append(work)
            if !local.wakeRequested {
                local.wakeRequested = true
                event_active(wakeEvent, Int32(EV_READ), 0)
            }
            return true
        }
        let wake = pending.withLock { state -> Wake? in
            if state.stopped { return nil }
            state.items.append(work)
            if state.wakeRequested { return Wake.none }
            state.wakeRequested = true
            state.eventfdSignalled = true
            return .signal
        }
        switch wake {
        case nil:
            return false
        case .none?:
            break
        case .signal?:
            precondition(gw_eventfd_signal(wakeFD) == 0, "eventfd write failed on loop \(name): \(String(cString: strerror(errno)))")
        }
        return true
    }

    /// Runs the loop on the calling thread until ``stop()``.
    public func run() {
        pthread_setspecific(currentLoopKey, Unmanaged.passUnretained(self).toOpaque())
        owner.store(UInt(pthread_self()), ordering: .releasing)
        do {
            try CCheck.libevent(event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY), "event_base_loop")
        } catch {
            // The backend (epoll) itself failed: nothing on this loop can run.
            fatalError("\(name): \(error)")
        }
        // Work queued while stopping still runs, so no continuation is lost;
        // later submissions are refused.
        drainQueue(budget: nil)
        pending.withLock { $0.stopped = true }
        local.stopped = true
        hasStopped.store(true, ordering: .releasing)
        drainQueue(budget: nil)
        pthread_setspecific(currentLoopKey, nil)
        finished.signal()
    }

    /// Starts a dedicated thread that runs the loop.
    public func start() {
        // A POSIX thread rather than Foundation's `Thread`: the gateway links
        // FoundationEssentials only.
        // Allocated rather than `pthread_attr_t()`: pthread_attr_init makes it.
        let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
        pthread_attr_init(attributes)
        defer {
            pthread_attr_destroy(attributes)
            attributes.deallocate()
        }
        pthread_attr_setstacksize(attributes, 1 << 20)
        pthread_attr_setdetachstate(attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let created = pthread_create(&thread, attributes, { context in
            let loop = Unmanaged<EventLoop>.fromOpaque(context!).takeRetainedValue()
            _ = gw_set_thread_name(loop.name)
            loop.run()
            return nil
        }, Unmanaged.passRetained(self).toOpaque())
        precondition(created == 0, "pthread_create failed: \(created)")
        // Wait until the thread has recorded itself, so `inEventLoop` is
        // meaningful as soon as `start` returns.
        while owner.load(ordering: .acquiring) == 0 { usleep(100) }
    }

    /// Asks the loop to return from ``run()``; safe from any thread.
    public func stop() {
        execute { [self] in _ = event_base_loopbreak(self.base) }
    }

    /// Blocks the calling thread (never a loop thread) until the loop has
    /// stopped running.
    public func waitUntilStopped() {
        finished.wait()
    }

    /// How long one drain runs queued work before the loop polls its
    /// sockets again. Work queued on the loop (a batch's turn, its calls and
    /// its answer, flushes) could otherwise hold it for as long as
    /// there is any: under a flood of large batches, single calls read by
    /// the same loop waited hundreds of milliseconds for their turn.
    static let drainBudget = Duration.milliseconds(2)

    /// Arms the zero-delay timer that resumes a drain cut short. Should
    /// libevent refuse it, the wake event runs the rest instead (in this
    /// pass, without a poll first): late, never lost.
    private func resumeSoon() {
        var now = timeval(tv_sec: 0, tv_usec: 0)
        if event_add(resumeEvent, &now) != 0 {
            event_active(wakeEvent, Int32(EV_READ), 0)
        }
    }

    /// Runs queued work in submission order: all of it when `budget` is
    /// nil (at shutdown), else until it has run `budget` and more is
    /// waiting; the rest then resumes on a zero-delay timer, after the
    /// loop has polled its sockets.
    fileprivate func drainQueue(budget: Duration? = drainBudget) {
        let signalled = pending.withLock { state in
            let was = state.eventfdSignalled
            state.eventfdSignalled = false
            return was
        }
        if signalled { gw_eventfd_drain(wakeFD) }
        // Work submitted while draining (by the work itself) is picked up by
        // this loop, not by another activation.
        local.wakeRequested = true
        var resumesLater = false
        defer { if !resumesLater { local.wakeRequested = false } }
        let deadline = budget.map { MonotonicInstant.now + $0 }
        while true {
            var batch: [Work]
            if !local.items.isEmpty {
                batch = local.items
                local.items = local.spare
            } else {
                let spare = local.spare
                let taken = pending.withLock { state -> [Work]? in
                    if state.items.isEmpty {
                        // Only now: a submission after this line wakes us anew.
                        state.wakeRequested = false
                        return nil
                    }
                    let items = state.items
                    state.items = spare
                    return items
                }
                guard let taken else {
                    if local.items.isEmpty { return }
                    continue
                }
                batch = taken
            }
            // No access to `local` is held while work runs: work submits.
            local.spare = []
            var ran = 0
            for work in batch {
                work()
                ran += 1
                if let deadline, ran < batch.count, MonotonicInstant.now >= deadline {
                    // The rest goes first next time, before anything
                    // submitted since: submission order is kept.
                    local.items = Array(batch[ran...]) + local.items
                    resumesLater = true
                    resumeSoon()
                    return
                }
            }
            // The batch's storage is kept for the next swap: draining
            // allocates nothing once the arrays have grown.
            batch.removeAll(keepingCapacity: true)
            local.spare = batch
            if let deadline, MonotonicInstant.now >= deadline, !local.items.isEmpty || pending.withLock({ !$0.items.isEmpty }) {
                resumesLater = true
                resumeSoon()
                return
            }
        }
    }
}

// MARK: - Timers

extension EventLoop {
    /// Calls `callback` on this loop after `delay`, unless the returned timer
    /// is cancelled first. On the loop thread only.
    public func scheduleTimer(after delay: Duration, _ callback: @escaping () -> Void) -> LoopTimer {
        preconditionInEventLoop()
        return LoopTimer(loop: self, delay: delay, callback: callback)
    }

    /// Calls `callback` on this loop at `deadline` (at once, on the next
    /// turn, when it has passed). On the loop thread only.
    public func scheduleTimer(at deadline: MonotonicInstant, _ callback: @escaping () -> Void) -> LoopTimer {
        scheduleTimer(after: max(.zero, deadline - .now), callback)
    }
}

/// A one-shot libevent timer owned by one loop.
///
/// It keeps itself alive while armed, so dropping the handle does not stop
/// it; ``cancel()`` does. Loop-bound: create, cancel and release it on its
/// loop's thread.
public final class LoopTimer {
    private let loop: EventLoop
    private var event: OpaquePointer?
    private var callback: (() -> Void)?
    /// The reference the armed timer holds on itself; released exactly once,
    /// when it fires or is cancelled.
    private var selfWhileArmed: Unmanaged<LoopTimer>?

    fileprivate init(loop: EventLoop, delay: Duration, callback: @escaping () -> Void) {
        self.loop = loop
        self.callback = callback
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let event = event_new(loop.base, -1, 0, loopTimerCallback, context) else {
            preconditionFailure("event_new failed for a timer on \(loop.name)")
        }
        self.event = event
        let (seconds, attoseconds) = max(.zero, delay).components
        var interval = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        precondition(event_add(event, &interval) == 0, "event_add failed for a timer on \(loop.name)")
        selfWhileArmed = Unmanaged.passRetained(self)
    }

    deinit {
        if let event { event_free(event) }
    }

    /// Whether the timer will still fire.
    public var isArmed: Bool { selfWhileArmed != nil }

    /// Stops the timer; its callback will not run. Harmless after it fired.
    public func cancel() {
        loop.preconditionInEventLoop()
        guard let retained = selfWhileArmed else { return }
        if let event { event_del(event) }
        callback = nil
        selfWhileArmed = nil
        retained.release()
    }

    fileprivate func fire() {
        guard let retained = selfWhileArmed else { return }
        let work = callback
        callback = nil
        selfWhileArmed = nil
        work?()
        retained.release()
    }
}

private func loopTimerCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("timer without its LoopTimer") }
    Unmanaged<LoopTimer>.fromOpaque(context).takeUnretainedValue().fire()
}

private func eventLoopWakeCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("event loop wake-up without its loop") }
    Unmanaged<EventLoop>.fromOpaque(context).takeUnretainedValue().drainQueue()
}

private func eventLoopResumeCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("event loop resume without its loop") }
    Unmanaged<EventLoop>.fromOpaque(context).takeUnretainedValue().drainQueue()
}

/// A one-way flag that threads can wait for: set once the loop has stopped.
private final class FinishedSignal: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var isSet = false

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    func signal() {
        pthread_mutex_lock(&mutex)
        isSet = true
        pthread_cond_broadcast(&condition)
        pthread_mutex_unlock(&mutex)
    }

    func wait() {
        pthread_mutex_lock(&mutex)
        while !isSet { pthread_cond_wait(&condition, &mutex) }
        pthread_mutex_unlock(&mutex)
    }
}
