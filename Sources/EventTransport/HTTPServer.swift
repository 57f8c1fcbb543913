import CGatewayShims
import CLibevent
import Glibc
import HTTPFraming
public import Logging
import MonotonicTime
import Synchronization

/// Handles one request, on the loop thread that accepted it. It must not
/// block; it answers through the responder, which it must consume (send
/// now, or `deferred()` for an answer a callback sends later).
public typealias HTTPRequestHandler = @Sendable (HTTPServerRequest, consuming HTTPResponder) -> Void

/// The answer to a request that cannot be read (``HTTPFramingError``), to
/// one that took too long to arrive (`408`), to a connection over the cap
/// (`503`), and to a request whose responder was dropped unanswered
/// (`500`, with the request's fields). The server adds `Connection: close`
/// and closes after it, except after the `500`.
public typealias HTTPProblemResponder = @Sendable (HTTPFramingError) -> HTTPResponse

/// The gateway's HTTP/1.1 front: strict framing (``HTTPRequestParser``),
/// per-connection deadlines, and a cap on connections.
///
/// Spread over every loop of a group: each loop has its own `SO_REUSEPORT`
/// listener on the same port, so the kernel spreads connections, and a
/// connection, its requests and their answers never leave their loop.
/// Sockets are plain: libevent provides the readiness events and timers,
/// this type the HTTP.
public final class HTTPServer: Sendable {
    let configuration: HTTPServerConfiguration
    let handler: HTTPRequestHandler
    let problemResponder: HTTPProblemResponder
    /// Told of every answer to a request, just before it is written.
    let answerObserver: (any HTTPAnswerObserver)?
    /// The observer's ``HTTPAnswerObserver/wantsRecords``.
    let recordsAnswers: Bool
    let logger: Logger
    private let group: EventLoopGroup
    private let fronts = Mutex<[LoopHTTPFront]>([])
    private let draining = Atomic<Bool>(false)
    private let open = Atomic<Int>(0)
    private let rejected = Atomic<Int>(0)

    /// - Parameters:
    ///   - problemResponder: answers requests the server refuses itself;
    ///     the default is the contract's JSON error body.
    ///   - answerObserver: told of every answer to a request (an access
    ///     log, a count by status), on its loop, just before it is written.
    public init(
        group: EventLoopGroup,
        configuration: HTTPServerConfiguration,
        logger: Logger,
        problemResponder: @escaping HTTPProblemResponder = HTTPServer.problemResponse,
        answerObserver: (any HTTPAnswerObserver)? = nil,
        handler: @escaping HTTPRequestHandler
    ) {
        self.group = group
        self.configuration = configuration
        self.logger = logger
        self.problemResponder = problemResponder
        self.answerObserver = answerObserver
        self.recordsAnswers = answerObserver?.wantsRecords ?? false
        self.handler = handler
    }

    /// `{"error":{"status":N,"message":"..."}}` as `application/json`.
    public static func problemResponse(_ error: HTTPFramingError) -> HTTPResponse {
        HTTPResponse(status: error.status, headers: ["Content-Type": "application/json"], body: HTTPConnection.problemBody(error))
    }

    /// Client connections open now (`gateway_connections_open`).
    public var openConnections: Int { open.load(ordering: .relaxed) }

    /// Connections closed at once because the cap was reached
    /// (`gateway_connections_rejected_total`).
    public var rejectedConnections: Int { rejected.load(ordering: .relaxed) }

    /// True once ``beginDraining()`` was called.
    public var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// Binds and starts serving on every loop; returns the bound port (the
    /// real one when the configuration asked for port 0). Call from a thread
    /// that is not one of the group's loops.
    public func start() throws(TransportError) -> Int {
        let (port, fds) = try ListeningSockets.open(host: configuration.host, port: configuration.port, count: group.loops.count)
        var started: [LoopHTTPFront] = []
        var failure: TransportError?
        // With `.closeIdlest` each loop makes room among its own share.
        let loopCap = max(1, configuration.maxConnections / max(1, group.loops.count))
        for (loop, fd) in zip(group.loops, fds) {
            let front = LoopHTTPFront(loop: loop, server: self, loopCap: loopCap, unwrittenBudget: max(1, configuration.maxUnwrittenBytes / max(1, group.loops.count)))
            let result: Result<Void, TransportError> = loop.submitAndWait {
                Result { () throws(TransportError) in try front.start(listening: fd) }
            }
            if case .failure(let error) = result { failure = error; _ = Glibc.close(fd) } else { started.append(front) }
        }
        fronts.withLock { $0 = started }
        if let failure {
            stop()
            throw failure
        }
        return port
    }

    /// Stops taking connections (the listeners close) and marks every later
    /// answer `Connection: close`, so keep-alive clients move on after their
    /// next answer. Requests in flight still get their answers. Idle
    /// connections are left open until ``stop()``: closing one could race a
    /// request its client is sending at that moment.
    public func beginDraining() {
        draining.store(true, ordering: .relaxed)
        for front in fronts.withLock({ $0 }) {
            front.loop.submitAndWait { front.drain() }
        }
    }

    /// Closes every connection once it owes nothing: those with no answer
    /// on its way close now; those still writing one close when it is out,
    /// and those lingering after an error when their client has gone; any
    /// left at `limit` close then. Call after draining, once the calls in
    /// flight have been answered.
    public func closeAfterWritingAnswers(within limit: Duration) async {
        for front in fronts.withLock({ $0 }) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let queued = front.loop.execute {
                    front.closeAfterWriting(within: limit) { continuation.resume() }
                }
                if !queued { continuation.resume() } // a stopped loop has nothing to write
            }
        }
    }

    /// Closes the listeners and every connection. Call after draining, from
    /// a thread that is not one of the loops.
    public func stop() {
        let all = fronts.withLock { current -> [LoopHTTPFront] in
            let taken = current
            current = []
            return taken
        }
        for front in all {
            front.loop.submitAndWait { front.stop() }
        }
    }

    /// Counts a new connection against the cap; false when it is full.
    func admitConnection() -> Bool {
        if open.add(1, ordering: .relaxed).newValue <= configuration.maxConnections { return true }
        open.subtract(1, ordering: .relaxed)
        rejected.add(1, ordering: .relaxed)
        return false
    }

    /// Counts a connection a loop took within its own share
    /// (``HTTPServerConfiguration/WhenFull/closeIdlest``).
    func connectionOpened() {
        open.add(1, ordering: .relaxed)
    }

    /// Counts a connection refused because its loop's share was full and
    /// none of them could make room.
    func connectionRefused() {
        rejected.add(1, ordering: .relaxed)
    }

    func connectionClosed() {
        open.subtract(1, ordering: .relaxed)
    }
}

/// The part of an ``HTTPServer`` on one loop: its listener, its
/// connections, and the buffers they share. Loop-bound.
final class LoopHTTPFront: @unchecked Sendable {
    // @unchecked: every mutable field is touched only on `loop`.
    let loop: EventLoop
    /// unowned(unsafe): the server owns its fronts and outlives them.
    unowned(unsafe) let server: HTTPServer
    let configuration: HTTPServerConfiguration
    /// This loop's share of the cap, when the listener makes room by
    /// closing the idlest connection (``HTTPServerConfiguration/WhenFull/closeIdlest``).
    let loopCap: Int
    /// This loop's share of ``HTTPServerConfiguration/maxUnwrittenBytes``.
    let unwrittenBudget: Int
    /// Bytes of answers this loop's connections hold for clients that have
    /// not read them yet.
    private(set) var heldAnswerBytes = 0
    /// Every connection of this loop reads into this one buffer: a
    /// connection holds only what it has not finished parsing.
    let readBuffer: UnsafeMutableRawBufferPointer
    private var headBuffer: [UInt8] = []
    private var listenerFD: Int32 = -1
    private var listenerEvent: OpaquePointer?
    private var resumeTimer: LoopTimer?
    private var connections: [ObjectIdentifier: HTTPConnection] = [:]
    private var dateSecond = -1
    private var dateBytes: [UInt8] = []
    private var acceptWarnings = LogRateLimit(interval: .seconds(10))
    private var unreadWarnings = LogRateLimit(interval: .seconds(10))
    /// Set by ``closeAfterWriting(within:_:)``: connections close as soon as
    /// they owe nothing, and `whenAllClosed` runs when none is left.
    private(set) var isClosing = false
    private var whenAllClosed: (() -> Void)?
    private var closingDeadline: LoopTimer?

    /// Pause of the listener when the process is out of descriptors.
    static let acceptPause = Duration.milliseconds(100)

    init(loop: EventLoop, server: HTTPServer, loopCap: Int, unwrittenBudget: Int) {
        self.loop = loop
        self.server = server
        self.configuration = server.configuration
        self.loopCap = loopCap
        self.unwrittenBudget = unwrittenBudget
        self.readBuffer = .allocate(byteCount: 65536, alignment: 16)
        headBuffer.reserveCapacity(512)
    }

    deinit {
        readBuffer.deallocate()
    }

    func start(listening fd: Int32) throws(TransportError) {
        loop.preconditionInEventLoop()
        listenerFD = fd
        let context = Unmanaged.passUnretained(self).toOpaque()
        listenerEvent = try CCheck.pointer(event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), listenerReadable, context), "event_new")
        try CCheck.libevent(event_add(listenerEvent, nil), "event_add")
    }

    fileprivate func acceptReady() {
        // A bounded batch per wake-up keeps one loop from starving its
        // connections under a connection storm.
        for _ in 0..<64 {
            let fd = gw_accept(listenerFD)
            if fd >= 0 {
                admit(fd)
                continue
            }
            switch -fd {
            case EAGAIN, EWOULDBLOCK:
                return
            case EINTR, ECONNABORTED, EPROTO:
                continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                // The pending connection stays in the backlog; retrying at
                // once would spin. Pause, as nginx does.
                pauseAccepting(errno: -fd)
                return
            default:
                warnAccept("accept failed: \(String(cString: strerror(-fd)))")
                return
            }
        }
    }

    private func admit(_ fd: Int32) {
        switch configuration.whenFull {
        case .refuse:
            guard server.admitConnection() else {
                refuse(fd)
                return
            }
        case .closeIdlest:
            if connections.count >= loopCap {
                guard let idlest = idlestConnection() else {
                    // Every one of them has its request being answered:
                    // that ends on its own, a new connection can wait.
                    server.connectionRefused()
                    refuse(fd)
                    return
                }
                idlest.close()
            }
            server.connectionOpened()
        }
        let connection = HTTPConnection(fd: fd, front: self, limits: configuration.limits)
        connections[ObjectIdentifier(connection)] = connection
        if !connection.start() { connection.close() }
    }

    /// Answers a connection over the cap `503` and closes it. The server's
    /// problem answer, so it carries what every error answer carries
    /// (`X-Request-Id`). Best effort: the socket is new, its buffer empty;
    /// it closes either way.
    private func refuse(_ fd: Int32) {
        var bytes = rejectionBytes()
        bytes.withUnsafeBytes { _ = gw_write2(fd, $0.baseAddress, $0.count, nil, 0) }
        bytes.removeAll(keepingCapacity: true)
        returnHeadBuffer(bytes)
        _ = Glibc.close(fd)
    }

    /// The connection of this loop that gives its place up first
    /// (``HTTPConnection/evictionRank``); nil when every one has its
    /// request being answered. A scan, made only when the share is full
    /// (the share is small: a listener for probes).
    private func idlestConnection() -> HTTPConnection? {
        var chosen: (connection: HTTPConnection, rank: HTTPConnection.EvictionRank)?
        for connection in connections.values {
            guard let rank = connection.evictionRank else { continue }
            if chosen == nil || rank < chosen!.rank { chosen = (connection, rank) }
        }
        return chosen?.connection
    }

    /// The answer of a connection over the cap, head and body.
    private func rejectionBytes() -> [UInt8] {
        let response = server.problemResponder(HTTPFramingError(status: 503, message: "too many connections; retry later"))
        var bytes = takeHeadBuffer()
        HTTPResponseHead.write(status: response.status, headers: response.headers, contentLength: response.body.count, close: true, date: currentDate(), into: &bytes)
        bytes.append(contentsOf: response.body)
        return bytes
    }

    private func pauseAccepting(errno code: Int32) {
        guard let listenerEvent else { return }
        do {
            try CCheck.libevent(event_del(listenerEvent), "event_del(listener)")
        } catch {
            server.logger.error("cannot pause the listener", metadata: ["error": "\(error)"])
        }
        warnAccept("cannot accept connections: \(String(cString: strerror(code))); pausing the listener for 100 ms (raise the open-file limit or lower GATEWAY_MAX_CONNECTIONS)")
        resumeTimer = loop.scheduleTimer(after: Self.acceptPause) { [weak self] in
            guard let self, let event = self.listenerEvent else { return }
            do {
                try CCheck.libevent(event_add(event, nil), "event_add(listener)")
            } catch {
                self.server.logger.critical("cannot resume the listener; this loop takes no more connections", metadata: ["error": "\(error)"])
            }
        }
    }

    private func warnAccept(_ message: String) {
        guard let suppressed = acceptWarnings.permit(now: .now) else { return }
        var line = message
        if suppressed > 0 { line += " (\(suppressed) more since the last line)" }
        server.logger.warning("\(line)")
    }

    /// `count` bytes of answer wait in a connection for its client to read
    /// them. Past this loop's budget, the connections with the most bytes
    /// still to write are reset until it holds no more than the budget (the
    /// one that just grew among them).
    func answerHeld(_ count: Int) {
        heldAnswerBytes += count
        while heldAnswerBytes > unwrittenBudget {
            var largest: HTTPConnection?
            for connection in connections.values where connection.unwrittenCount > (largest?.unwrittenCount ?? 0) {
                largest = connection
            }
            guard let largest else { return }
            if let suppressed = unreadWarnings.permit(now: .now) {
                var line = "answers not read by their clients hold more than \(unwrittenBudget) bytes on this loop; resetting the connection with the most unwritten bytes (\(largest.unwrittenCount))"
                if suppressed > 0 { line += " (\(suppressed) more since the last line)" }
                server.logger.warning("\(line)")
            }
            largest.resetUnread()
        }
    }

    /// A held answer is written, or its connection closed.
    func answerReleased(_ count: Int) {
        heldAnswerBytes -= count
    }

    func connectionClosed(_ connection: HTTPConnection) {
        connections.removeValue(forKey: ObjectIdentifier(connection))
        server.connectionClosed()
        if isClosing && connections.isEmpty { finishClosing() }
    }

    func closeAfterWriting(within limit: Duration, _ done: @escaping () -> Void) {
        loop.preconditionInEventLoop()
        closeListener()
        isClosing = true
        whenAllClosed = done
        for connection in Array(connections.values) where !connection.owesBytes {
            connection.close()
        }
        if connections.isEmpty {
            finishClosing()
            return
        }
        closingDeadline = loop.scheduleTimer(after: limit) { [weak self] in
            guard let self else { return }
            for connection in Array(self.connections.values) { connection.close() }
        }
    }

    private func finishClosing() {
        closingDeadline?.cancel()
        closingDeadline = nil
        let done = whenAllClosed
        whenAllClosed = nil
        done?()
    }

    /// A per-loop buffer for response heads, so an answer allocates none.
    func takeHeadBuffer() -> [UInt8] {
        var buffer = headBuffer
        headBuffer = []
        buffer.removeAll(keepingCapacity: true)
        return buffer
    }

    func returnHeadBuffer(_ buffer: [UInt8]) {
        headBuffer = buffer
    }

    /// The `Date` field's value, formatted once a second.
    func currentDate() -> [UInt8] {
        let now = time(nil)
        if now != dateSecond {
            dateSecond = now
            dateBytes = HTTPDate.imfFixdate(secondsSince1970: now)
        }
        return dateBytes
    }

    private func closeListener() {
        resumeTimer?.cancel()
        resumeTimer = nil
        if let listenerEvent { event_free(listenerEvent) }
        listenerEvent = nil
        if listenerFD >= 0 { _ = Glibc.close(listenerFD) }
        listenerFD = -1
    }

    func drain() {
        loop.preconditionInEventLoop()
        closeListener()
    }

    func stop() {
        loop.preconditionInEventLoop()
        closeListener()
        for connection in Array(connections.values) {
            connection.close()
        }
    }
}

private func listenerReadable(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("listener event without its front") }
    Unmanaged<LoopHTTPFront>.fromOpaque(context).takeUnretainedValue().acceptReady()
}
