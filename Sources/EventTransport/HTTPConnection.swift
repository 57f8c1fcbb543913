import CGatewayShims
import CLibevent
import Glibc
import HTTPFraming
import Logging
import MonotonicTime

/// One client connection of the gateway's HTTP front: a socket, its
/// parser, its buffers and one timer for whichever deadline applies now.
/// Its rules (phases, deadlines, pipelining, half-close, lingering) are
/// ``HTTPConnectionStateMachine``'s: this type tells the machine what
/// happened and does what it answers.
///
/// Loop-bound: created, driven and closed on `front.loop`; only
/// ``respond(serial:with:)`` may be called from elsewhere, and it hops.
final class HTTPConnection: @unchecked Sendable {
    // @unchecked: every mutable field is touched only on `front.loop`.
    typealias StateMachine = HTTPConnectionStateMachine<MonotonicClock>

    let fd: Int32
    /// unowned(unsafe): the front closes every connection before it goes,
    /// and after `close()` nothing here touches it (a strong or checked
    /// reference cost a retain per use on the hot path).
    private unowned(unsafe) let front: LoopHTTPFront
    /// The loop, strongly: a late answer from another thread hops to it
    /// even after the front has gone.
    let loop: EventLoop
    private var readEvent: OpaquePointer?
    private var writeEvent: OpaquePointer?
    private var timerEvent: OpaquePointer?
    private var machine: StateMachine
    private var isReadingEnabled = false
    private var parser: HTTPRequestParser
    /// Bytes read past the end of the request being answered (pipelining):
    /// those from `pendingOffset` on are still to be parsed. Requests are
    /// read from here in place; the bytes before the offset are dropped
    /// only once they are half the buffer, so reading costs time in
    /// proportion to the bytes, not to the bytes times the requests.
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    /// Set while the rest of a pipelined read waits for a later turn.
    private var resumeTimer: LoopTimer?
    /// What is left of a `100 Continue` the socket took only part of: it
    /// goes out before the answer's head.
    private var interimRest: [UInt8] = []
    /// The header fields of the request being answered, for the `500` of
    /// a responder dropped unanswered (its `X-Request-Id`).
    private var requestHeaders: HTTPHeaders?
    /// The method and target of the request being answered, for the
    /// server's answer observer when it wants records; nil when its request
    /// line was not read.
    private var requestLine: (method: String, target: String)?
    /// When the first byte of the request being read or answered was read
    /// (for a pipelined request, when its turn to be parsed came):
    /// ``HTTPServerRequest/received``, and the start of the answer
    /// observer's duration. One clock read per request.
    private var requestStarted = MonotonicInstant.now
    /// An answer the socket did not take at once: what is left of its head
    /// (a copy: the head buffer is reused), its body (shared with the
    /// response, not copied: a batch's answer can be megabytes), how much
    /// of the body is written, and what the response asked to be kept until
    /// then.
    private var outboxHead: [UInt8] = []
    private var outboxBody: [UInt8] = []
    private var outboxBodySent = 0
    private var outboxHeld: (any AnyObject & Sendable)?
    /// The bytes of the outbox counted in the front's held answers
    /// (``LoopHTTPFront/answerHeld(_:)``): the whole answer, which is held
    /// until its last byte is written.
    private var outboxCounted = 0
    /// Called when the client hangs up (or only stops sending: that
    /// cannot be told apart) or the connection closes before the request
    /// being answered has its answer, so work that waits (a batch's turn)
    /// can leave at once (``HTTPDeferredResponder/whenClientStops(_:)``).
    /// Let go when the answer comes.
    private var clientStopHandler: (() -> Void)?
    private var answeringHead = false
    private var answeringHTTP10KeepAlive = false

    init(fd: Int32, front: LoopHTTPFront, limits: HTTPRequestParser.Limits) {
        self.fd = fd
        self.front = front
        self.loop = front.loop
        self.parser = HTTPRequestParser(limits: limits)
        let configuration = front.configuration
        self.machine = StateMachine(
            timeouts: .init(read: configuration.readTimeout, idle: configuration.idleTimeout, write: configuration.writeTimeout, linger: configuration.lingerTimeout),
            holdLimit: limits.maxHeaderBytes + limits.maxBodyBytes,
            now: .now
        )
    }

    /// Creates the events and starts reading, idle deadline armed.
    func start() -> Bool {
        let context = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), connectionReadable, context)
        writeEvent = event_new(loop.base, fd, Int16(EV_WRITE | EV_PERSIST), connectionWritable, context)
        timerEvent = event_new(loop.base, -1, 0, connectionTimerFired, context)
        guard readEvent != nil, writeEvent != nil, timerEvent != nil else { return false }
        let now = MonotonicInstant.now
        perform(machine.start(now: now), now: now)
        return true
    }

    private var unparsedCount: Int { pending.count - pendingOffset }

    // MARK: - Reading

    fileprivate func readable() {
        guard machine.phase != .closed else { return }
        let buffer = front.readBuffer
        let count = gw_read(fd, buffer.baseAddress, buffer.count)
        if count == -Int(EAGAIN) || count == -Int(EINTR) { return }
        guard count > 0 else {
            // End of stream or an error. Last: a handler told may answer
            // at once.
            perform(machine.endOfInput(), now: nil)
            return
        }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<count])
        switch machine.received(count, unparsed: unparsedCount) {
        case .parse:
            noteRequestStart()
            let used = parse(bytes)
            // The read buffer is shared by the loop's connections: what
            // follows a dispatched request is kept, once.
            if used < bytes.count && machine.keepsRest { keepPending(UnsafeRawBufferPointer(rebasing: bytes[used...])) }
            if machine.phase == .reading { parsePending() }
        case .hold(let stopReading, let parse):
            keepPending(bytes)
            if stopReading { enableReading(false) }
            if parse { parsePending() }
        default:
            break // dropped
        }
    }

    /// Appends to the bytes still to be parsed, first dropping those parsed
    /// already when they are at least half of the buffer.
    private func keepPending(_ bytes: UnsafeRawBufferPointer) {
        if pendingOffset > 0 && pendingOffset >= pending.count / 2 {
            pending.removeFirst(pendingOffset)
            pendingOffset = 0
        }
        pending.append(contentsOf: bytes)
    }

    /// Parses up to one request; returns the bytes used. Stops after a
    /// request is dispatched, a framing error is answered, or when every
    /// byte was used.
    private func parse(_ bytes: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        while offset < bytes.count {
            let (used, event) = parser.parse(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            offset += used
            switch event {
            case .needMore:
                if parser.isInsideRequest {
                    let now = MonotonicInstant.now
                    perform(machine.needMore(insideRequest: true, now: now), now: now)
                }
                return offset
            case .continueExpected:
                let now = MonotonicInstant.now
                perform(machine.continueExpected(now: now), now: now)
                guard sendContinue() else { return offset }
            case .request(let head, let body):
                dispatch(head, body: body)
                return offset
            case .failed(let error):
                answer(error)
                return offset
            }
        }
        return offset
    }

    /// Writes `100 Continue`. With the socket's buffer full (a pipelining
    /// client that does not read) it is left out: the client sends its body
    /// after its own wait. Part of it written, the rest goes before the
    /// answer. False when the client has gone; the connection is closed.
    private func sendContinue() -> Bool {
        let interim: StaticString = "HTTP/1.1 100 Continue\r\n\r\n"
        let written = send(interim.utf8Start, interim.utf8CodeUnitCount, nil, 0)
        if written == interim.utf8CodeUnitCount || written == -Int(EAGAIN) || written == -Int(EINTR) { return true }
        guard written >= 0 else {
            close() // EPIPE, ECONNRESET: nobody will send the body
            return false
        }
        interimRest = Array(UnsafeRawBufferPointer(start: interim.utf8Start + written, count: interim.utf8CodeUnitCount - written))
        return true
    }

    /// Parses the held bytes, request after request, while each is
    /// answered at once and the machine allows (``HTTPConnectionStateMachine/mayParseHeld()``);
    /// when it yields, the rest waits for a zero timer: it runs after the
    /// loop has polled its other sockets again.
    private func parsePending() {
        parsing: while unparsedCount > 0 {
            switch machine.mayParseHeld() {
            case .parse:
                break
            case .yield:
                resumeTimer = loop.scheduleTimer(after: .zero) { [weak self] in
                    guard let self else { return }
                    self.resumeTimer = nil
                    self.machine.resumed()
                    self.enableReading(true)
                    self.parsePending()
                }
                return
            default:
                break parsing
            }
            noteRequestStart()
            // A reference of its own, so that what the request's handling
            // does to `pending` does not overlap this read of it.
            let bytes = pending
            let used = bytes.withUnsafeBytes { parse(UnsafeRawBufferPointer(rebasing: $0[pendingOffset...])) }
            // Emptied: a framing error was answered, or the connection is
            // closing; nothing more is read from it.
            if pending.isEmpty { return }
            pendingOffset += used
        }
        if unparsedCount == 0 {
            pending.removeAll(keepingCapacity: pending.capacity <= 65536)
            pendingOffset = 0
        }
    }

    /// A request starts with the bytes about to be parsed, unless part of
    /// one was read already.
    private func noteRequestStart() {
        if !parser.isInsideRequest { requestStarted = .now }
    }

    private func dispatch(_ head: HTTPRequestHead, body: [UInt8]) {
        guard case .handOver(let serial) = machine.requestReceived(keepAlive: head.keepAlive) else { return }
        requestHeaders = head.headers
        if front.server.recordsAnswers { requestLine = (head.method, head.target) }
        answeringHead = head.method == "HEAD"
        answeringHTTP10KeepAlive = head.version == .http10 && head.keepAlive
        let request = HTTPServerRequest(head: head, body: body, loop: loop, received: requestStarted)
        front.server.handler(request, HTTPResponder(connection: self, serial: serial))
        machine.handlerReturned()
    }

    private func dropPending() {
        pending = []
        pendingOffset = 0
    }

    // MARK: - Answering

    /// Calls `callback` when the client stops sending or the connection
    /// closes before request `serial` is answered; at once when that has
    /// happened already. On the loop only.
    func whenClientStops(serial: UInt64, _ callback: @escaping () -> Void) {
        loop.preconditionInEventLoop()
        switch machine.clientStopsCallback(serial: serial) {
        case .keepCallback: clientStopHandler = callback
        case .callNow: callback()
        default: break
        }
    }

    /// Calls the handler waiting to hear that the client stopped, once.
    private func tellClientStopped() {
        guard let handler = clientStopHandler else { return }
        clientStopHandler = nil
        handler()
    }

    /// Sends the answer to request `serial`, from any thread.
    func respond(serial: UInt64, with response: HTTPResponse) {
        if loop.inEventLoop {
            respondOnLoop(serial: serial, with: response)
        } else {
            _ = loop.execute { self.respondOnLoop(serial: serial, with: response) }
        }
    }

    /// Answers request `serial`, whose responder was dropped unanswered (a
    /// bug), with `500`, from any thread: the server's problem answer, so
    /// it carries what every error answer carries (`X-Request-Id`).
    func respondUnanswered(serial: UInt64) {
        if loop.inEventLoop {
            respondUnansweredOnLoop(serial: serial)
        } else {
            _ = loop.execute { self.respondUnansweredOnLoop(serial: serial) }
        }
    }

    private func respondUnansweredOnLoop(serial: UInt64) {
        guard machine.awaitsAnswer(serial) else { return }
        let error = HTTPFramingError(status: 500, message: "the request was not answered", requestHeaders: requestHeaders)
        respondOnLoop(serial: serial, with: front.server.problemResponder(error))
    }

    private func respondOnLoop(serial: UInt64, with response: HTTPResponse) {
        guard machine.awaitsAnswer(serial) else { return }
        clientStopHandler = nil
        guard case .write(let close) = machine.answerReady(serial: serial, close: front.server.isDraining || Self.asksToClose(response.headers)) else { return }
        write(status: response.status, headers: response.headers, body: response.body, close: close, held: response.heldUntilWritten, note: response.note)
    }

    private static func asksToClose(_ headers: HTTPHeaders) -> Bool {
        for field in headers.fields where field.name.utf8.count == 10 && field.name.lowercased() == "connection" {
            if field.value.lowercased() == "close" { return true }
        }
        return false
    }

    /// Answers a request that could not be read, then closes.
    private func answer(_ error: HTTPFramingError) {
        guard case .refuse = machine.framingFailed() else { return }
        enableReading(false)
        dropPending()
        answeringHead = false
        if front.server.recordsAnswers { requestLine = error.requestLine }
        let response = front.server.problemResponder(error)
        write(status: response.status, headers: response.headers, body: response.body, close: true, note: response.note)
    }

    /// `{"error":{"status":N,"message":"..."}}`, the contract's HTTP error body.
    static func problemBody(_ error: HTTPFramingError) -> [UInt8] {
        var body = Array(#"{"error":{"status":"#.utf8)
        body.append(contentsOf: String(error.status).utf8)
        body.append(contentsOf: #","message":""#.utf8)
        for byte in error.message.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): body.append(contentsOf: [UInt8(ascii: "\\"), byte])
            case ..<0x20: body.append(UInt8(ascii: " "))
            default: body.append(byte)
            }
        }
        body.append(contentsOf: #""}}"#.utf8)
        return body
    }

    private func write(status: Int, headers: HTTPHeaders, body: [UInt8], close: Bool, held: (any AnyObject & Sendable)? = nil, note: (any AnyObject & Sendable)? = nil) {
        let bodyless = status == 204 || status == 304 || status < 200
        let sendsBody = !(answeringHead || bodyless)
        if let observer = front.server.answerObserver {
            // Before the write: once a client has its answer, the answer
            // has been counted and logged.
            observer.counted(status: status)
            if front.server.recordsAnswers {
                observer.answered(HTTPAnswerRecord(
                    requestLine: requestLine, status: status, bodyBytes: sendsBody ? body.count : 0,
                    started: requestStarted, responseHeaders: headers, note: note
                ))
            }
        }
        var head = front.takeHeadBuffer()
        if !interimRest.isEmpty {
            head.append(contentsOf: interimRest)
            interimRest = []
        }
        HTTPResponseHead.write(
            status: status,
            headers: headers,
            contentLength: bodyless ? nil : body.count,
            close: close,
            keepAliveForHTTP10: answeringHTTP10KeepAlive && !close,
            date: front.currentDate(),
            into: &head
        )
        let total = head.count + (sendsBody ? body.count : 0)
        let written = head.withUnsafeBytes { headBytes in
            body.withUnsafeBytes { bodyBytes in
                send(headBytes.baseAddress, headBytes.count, bodyBytes.baseAddress, sendsBody ? bodyBytes.count : 0)
            }
        }
        if written == total {
            front.returnHeadBuffer(head)
            answerWritten()
            return
        }
        guard written >= 0 || written == -Int(EAGAIN) else {
            front.returnHeadBuffer(head)
            self.close() // the client has gone (EPIPE, ECONNRESET)
            return
        }
        // The socket took part of it: keep the rest until it is writable.
        let sent = max(0, written)
        outboxHead = sent < head.count ? Array(head[sent...]) : []
        outboxBody = sendsBody ? body : []
        outboxBodySent = max(0, sent - head.count)
        outboxHeld = held
        front.returnHeadBuffer(head)
        guard watch(writeEvent, "event_add(write)") else { return }
        let now = MonotonicInstant.now
        perform(machine.answerPartlyWritten(now: now), now: now)
        outboxCounted = outboxHead.count + outboxBody.count
        // Last: it may reset this very connection.
        front.answerHeld(outboxCounted)
    }

    /// Bytes of an answer still to be written; 0 when none waits.
    var unwrittenCount: Int {
        machine.phase == .writing ? outboxHead.count + outboxBody.count - outboxBodySent : 0
    }

    /// Resets the connection, its answer unread: past the loop's budget of
    /// held answers, as at the write deadline (a reset frees the socket's
    /// buffers at once).
    func resetUnread() {
        _ = gw_socket_set_linger_zero(fd)
        close()
    }

    private func releaseOutbox() {
        guard outboxCounted > 0 else { return }
        front.answerReleased(outboxCounted)
        outboxCounted = 0
    }

    /// One `sendmsg` of two buffers: the bytes the socket took, or `-errno`.
    /// Tests can make the socket seem to take fewer bytes than it would
    /// (``HTTPServerConfiguration/writeSizeLimitForTesting``).
    private func send(_ first: UnsafeRawPointer?, _ firstCount: Int, _ second: UnsafeRawPointer?, _ secondCount: Int) -> Int {
        guard let limit = front.configuration.writeSizeLimitForTesting else {
            return gw_write2(fd, first, firstCount, second, secondCount)
        }
        if firstCount >= limit { return gw_write2(fd, first, limit, nil, 0) }
        return gw_write2(fd, first, firstCount, second, min(secondCount, limit - firstCount))
    }

    fileprivate func writable() {
        guard machine.phase == .writing else { return }
        let written = outboxHead.withUnsafeBytes { head in
            outboxBody.withUnsafeBytes { body in
                let rest = body.count - outboxBodySent
                return send(head.baseAddress, head.count, rest > 0 ? body.baseAddress! + outboxBodySent : nil, rest)
            }
        }
        if written == -Int(EAGAIN) { return }
        guard written > 0 else { close(); return }
        if written < outboxHead.count {
            outboxHead.removeFirst(written)
            return
        }
        outboxBodySent += written - outboxHead.count
        outboxHead = []
        guard outboxBodySent == outboxBody.count else { return }
        guard unwatch(writeEvent, "event_del(write)") else { return }
        outboxBody = []
        outboxBodySent = 0
        outboxHeld = nil
        releaseOutbox()
        answerWritten()
    }

    /// How readily a connection gives its place up to a new one on a full
    /// listener that closes the idlest (``HTTPServerConfiguration/WhenFull/closeIdlest``):
    /// the lowest first. First the connections with no request in progress
    /// (waiting for one, or lingering after an answer that closes), the one
    /// waiting longest first; then those whose request is still arriving
    /// (a drip), the one that started longest ago first; last those whose
    /// client does not read its answer. One whose request is being answered
    /// is never chosen: that ends on its own.
    struct EvictionRank: Comparable {
        enum Tier: Int { case noRequest, requestArriving, answerUnread }
        let tier: Tier
        let since: MonotonicInstant

        static func < (lhs: Self, rhs: Self) -> Bool {
            (lhs.tier.rawValue, lhs.since) < (rhs.tier.rawValue, rhs.since)
        }
    }

    /// This connection's ``EvictionRank``; nil while its request is being
    /// answered, or once closed.
    var evictionRank: EvictionRank? {
        let waitingSince = machine.waitingSince
        switch machine.phase {
        case .reading:
            let arriving = parser.isInsideRequest || unparsedCount > 0
            return EvictionRank(tier: arriving ? .requestArriving : .noRequest, since: waitingSince)
        case .lingering:
            return EvictionRank(tier: .noRequest, since: waitingSince)
        case .writing:
            return EvictionRank(tier: .answerUnread, since: waitingSince)
        case .responding, .closed:
            return nil
        }
    }

    /// Whether closing now could lose bytes the client is owed: an answer
    /// still being written, or one just written on a connection that is
    /// lingering so the client can read it.
    var owesBytes: Bool { machine.owesBytes }

    private func answerWritten() {
        let now = MonotonicInstant.now
        perform(machine.answerWritten(frontClosing: front.isClosing, unparsed: unparsedCount, now: now), now: now)
    }

    // MARK: - Actions and deadlines

    /// Does what the machine answered, but for the actions only one place
    /// asks for, which that place does. `now`: the instant the machine was
    /// told, from which a timer's interval counts (nil when it was told
    /// none, and so returns no timer).
    private func perform(_ action: StateMachine.Action, now: MonotonicInstant?) {
        switch action {
        case .none:
            break
        case .read(let timer):
            enableReading(true)
            setTimer(until: timer, now: now)
        case .armTimer(let instant):
            setTimer(until: instant, now: now)
        case .readNext(let timer, let parse):
            enableReading(true)
            setTimer(until: timer, now: now)
            // An answer given later than the handler's call (by a callback)
            // starts a turn of its own with the held bytes.
            if parse { parsePending() }
        case .linger(let timer):
            dropPending()
            // ENOTCONN (the client has gone) needs nothing more: lingering
            // ends at the EOF that follows.
            _ = try? CCheck.posix(Int(gw_shutdown_write(fd)), "shutdown")
            enableReading(true)
            setTimer(until: timer, now: now)
        case .stopReadingAndTellClientStopped:
            enableReading(false)
            tellClientStopped()
        case .requestTimedOut:
            let milliseconds = front.configuration.readTimeout.components.seconds * 1000
                + front.configuration.readTimeout.components.attoseconds / 1_000_000_000_000_000
            answer(HTTPFramingError(status: 408, message: "the request's header and body did not arrive within \(milliseconds) ms"))
        case .close:
            close()
        case .reset:
            _ = gw_socket_set_linger_zero(fd)
            close()
        case .parse, .hold, .drop, .handOver, .refuse, .write, .callNow, .keepCallback, .yield:
            assertionFailure("\(action) is done where it is asked for")
        }
    }

    /// One libevent timer serves every deadline; the machine says when to
    /// set it (as nginx's timers do: only for a deadline earlier than the
    /// one it is set for, and again for what is left when it fires early).
    private func setTimer(until instant: MonotonicInstant?, now: MonotonicInstant?) {
        guard let instant, let now else { return }
        let (seconds, attoseconds) = max(.zero, instant - now).components
        var interval = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        guard let timerEvent else { return } // closed
        _ = check(event_add(timerEvent, &interval), "event_add(timer)")
    }

    fileprivate func timerFired() {
        let now = MonotonicInstant.now
        perform(machine.timerFired(now: now), now: now)
    }

    // MARK: - Closing

    private func enableReading(_ enabled: Bool) {
        guard enabled != isReadingEnabled, let readEvent else { return }
        isReadingEnabled = enabled
        _ = enabled ? watch(readEvent, "event_add(read)") : unwatch(readEvent, "event_del(read)")
    }

    private func watch(_ event: OpaquePointer?, _ call: String) -> Bool {
        guard let event else { return false } // closed
        return check(event_add(event, nil), call)
    }

    private func unwatch(_ event: OpaquePointer?, _ call: String) -> Bool {
        guard let event else { return false } // closed
        return check(event_del(event), call)
    }

    /// A connection whose events libevent cannot arm can neither be read
    /// nor answered: it is logged and closed.
    private func check(_ result: Int32, _ call: String) -> Bool {
        do {
            try CCheck.libevent(result, call)
            return true
        } catch {
            front.server.logger.error("closing a client connection", metadata: ["error": "\(error)"])
            close()
            return false
        }
    }

    /// Closes the socket and frees the events; an answer that comes later
    /// is dropped. Idempotent.
    func close() {
        guard machine.close() else { return }
        for event in [readEvent, writeEvent, timerEvent] {
            if let event { event_free(event) }
        }
        readEvent = nil
        writeEvent = nil
        timerEvent = nil
        _ = Glibc.close(fd)
        dropPending()
        resumeTimer?.cancel()
        resumeTimer = nil
        requestHeaders = nil
        requestLine = nil
        let stopHandler = clientStopHandler
        clientStopHandler = nil
        outboxHead = []
        outboxBody = []
        outboxHeld = nil
        releaseOutbox()
        front.connectionClosed(self)
        // Last, once the front has let go of the connection: the handler
        // may answer (the answer is dropped).
        stopHandler?()
    }
}

private func connectionReadable(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("read event without its connection") }
    Unmanaged<HTTPConnection>.fromOpaque(context).takeUnretainedValue().readable()
}

private func connectionWritable(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("write event without its connection") }
    Unmanaged<HTTPConnection>.fromOpaque(context).takeUnretainedValue().writable()
}

private func connectionTimerFired(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("timer without its connection") }
    Unmanaged<HTTPConnection>.fromOpaque(context).takeUnretainedValue().timerFired()
}
