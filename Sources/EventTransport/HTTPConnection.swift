import CGatewayShims
import CLibevent
import Glibc
import HTTPFraming
import Logging

/// One client connection of the gateway's HTTP front: a socket, its
/// parser, and one timer for whichever deadline applies now.
///
/// Loop-bound: created, driven and closed on `front.loop`; only
/// ``respond(serial:with:)`` may be called from elsewhere, and it hops.
///
/// Phases: `reading` (idle until a first byte, then the read deadline),
/// `responding` (the handler has the request; the socket is not read, so a
/// pipelining client waits), `writing` (the answer did not fit the socket;
/// the idle deadline bounds a client that does not read), `lingering`
/// (closing after an error: our side is shut, the client's late bytes are
/// read and dropped until it closes or the linger deadline).
final class HTTPConnection: @unchecked Sendable {
    // @unchecked: every mutable field is touched only on `front.loop`.
    private enum Phase { case reading, responding, writing, lingering, closed }
    private enum Deadline { case idle, read, write, linger }

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
    private var phase = Phase.reading
    private var isReadingEnabled = false
    private var parser: HTTPRequestParser
    /// Bytes read past the end of the request being answered (pipelining).
    private var leftover: [UInt8] = []
    /// An answer the socket did not take at once: what is left of its head
    /// (a copy: the head buffer is reused), its body (shared with the
    /// response, not copied: a batch's answer can be megabytes), how much
    /// of the body is written, and what the response asked to be kept until
    /// then.
    private var outboxHead: [UInt8] = []
    private var outboxBody: [UInt8] = []
    private var outboxBodySent = 0
    private var outboxHeld: (any AnyObject & Sendable)?
    /// Which request an answer belongs to; a late answer to an earlier one
    /// (the connection closed and was reused by no one) is dropped.
    private var serial: UInt64 = 0
    private var answeringHead = false
    private var answeringHTTP10KeepAlive = false
    private var keepAlive = true
    private var closeAfterAnswer = false
    private var isDispatching = false
    private var deadline: ContinuousClock.Instant?
    private var deadlineKind = Deadline.idle
    private var timerArmedUntil: ContinuousClock.Instant?

    init(fd: Int32, front: LoopHTTPFront, limits: HTTPRequestParser.Limits) {
        self.fd = fd
        self.front = front
        self.loop = front.loop
        self.parser = HTTPRequestParser(limits: limits)
    }

    /// Creates the events and starts reading, idle deadline armed.
    func start() -> Bool {
        let context = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), connectionReadable, context)
        writeEvent = event_new(loop.base, fd, Int16(EV_WRITE | EV_PERSIST), connectionWritable, context)
        timerEvent = event_new(loop.base, -1, 0, connectionTimerFired, context)
        guard readEvent != nil, writeEvent != nil, timerEvent != nil else { return false }
        enableReading(true)
        arm(.idle, after: front.configuration.idleTimeout)
        return true
    }

    // MARK: - Reading

    fileprivate func readable() {
        guard phase != .closed else { return }
        let buffer = front.readBuffer
        let count = gw_read(fd, buffer.baseAddress, buffer.count)
        if count == -Int(EAGAIN) || count == -Int(EINTR) { return }
        guard count > 0 else {
            if phase == .responding || phase == .writing {
                // The client has finished sending (perhaps only half-closed):
                // it still gets its answer, then the connection closes.
                enableReading(false)
                closeAfterAnswer = true
                keepAlive = false
                return
            }
            // End of stream or an error: nothing more will come. A request
            // cut off midway has nobody left to answer.
            close()
            return
        }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<count])
        switch phase {
        case .reading:
            consume(bytes)
            if phase == .reading && !leftover.isEmpty { consumeLeftover() }
        case .responding, .writing:
            // The socket stays watched while a request is answered (no
            // epoll_ctl per request); what a pipelining client sends meanwhile
            // waits here, and past one request's worth reading stops.
            leftover.append(contentsOf: bytes)
            let limits = front.configuration.limits
            if leftover.count > limits.maxHeaderBytes + limits.maxBodyBytes { enableReading(false) }
        case .lingering, .closed:
            break // dropped
        }
    }

    private func consume(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let (used, event) = parser.parse(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            offset += used
            switch event {
            case .needMore:
                if parser.isInsideRequest && deadlineKind != .read { arm(.read, after: front.configuration.readTimeout) }
                return
            case .continueExpected:
                if deadlineKind != .read { arm(.read, after: front.configuration.readTimeout) }
                let interim = "HTTP/1.1 100 Continue\r\n\r\n"
                // Best effort: with the socket's buffer empty this always
                // fits; if it does not, the client sends its body anyway.
                _ = interim.utf8.withContiguousStorageIfAvailable { gw_write2(fd, $0.baseAddress, $0.count, nil, 0) }
            case .request(let head, let body):
                if offset < bytes.count { leftover.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...])) }
                dispatch(head, body: body)
                return
            case .failed(let error):
                answer(error)
                return
            }
        }
    }

    private func consumeLeftover() {
        while phase == .reading && !leftover.isEmpty {
            let bytes = leftover
            leftover = []
            bytes.withUnsafeBytes { consume($0) }
        }
    }

    private func dispatch(_ head: HTTPRequestHead, body: [UInt8]) {
        phase = .responding
        deadline = nil
        deadlineKind = .idle
        serial &+= 1
        answeringHead = head.method == "HEAD"
        keepAlive = head.keepAlive
        answeringHTTP10KeepAlive = head.version == .http10 && head.keepAlive
        let request = HTTPServerRequest(head: head, body: body, loop: loop)
        isDispatching = true
        front.server.handler(request, HTTPResponder(connection: self, serial: serial))
        isDispatching = false
    }

    // MARK: - Answering

    /// Sends the answer to request `serial`, from any thread.
    func respond(serial: UInt64, with response: HTTPResponse) {
        if loop.inEventLoop {
            respondOnLoop(serial: serial, with: response)
        } else {
            _ = loop.execute { self.respondOnLoop(serial: serial, with: response) }
        }
    }

    private func respondOnLoop(serial: UInt64, with response: HTTPResponse) {
        guard phase == .responding, serial == self.serial else { return }
        let close = !keepAlive || front.server.isDraining || Self.asksToClose(response.headers)
        write(status: response.status, headers: response.headers, body: response.body, close: close || closeAfterAnswer, held: response.heldUntilWritten)
    }

    private static func asksToClose(_ headers: HTTPHeaders) -> Bool {
        for field in headers.fields where field.name.utf8.count == 10 && field.name.lowercased() == "connection" {
            if field.value.lowercased() == "close" { return true }
        }
        return false
    }

    /// Answers a request that could not be read, then closes.
    private func answer(_ error: HTTPFramingError) {
        phase = .responding
        enableReading(false)
        leftover = []
        answeringHead = false
        let response = front.server.problemResponder(error)
        write(status: response.status, headers: response.headers, body: response.body, close: true)
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

    private func write(status: Int, headers: HTTPHeaders, body: [UInt8], close: Bool, held: (any AnyObject & Sendable)? = nil) {
        closeAfterAnswer = close
        let bodyless = status == 204 || status == 304 || status < 200
        var head = front.takeHeadBuffer()
        HTTPResponseHead.write(
            status: status,
            headers: headers,
            contentLength: bodyless ? nil : body.count,
            close: close,
            keepAliveForHTTP10: answeringHTTP10KeepAlive && !close,
            date: front.currentDate(),
            into: &head
        )
        let sendsBody = !(answeringHead || bodyless)
        let total = head.count + (sendsBody ? body.count : 0)
        let written = head.withUnsafeBytes { headBytes in
            body.withUnsafeBytes { bodyBytes in
                gw_write2(fd, headBytes.baseAddress, headBytes.count, bodyBytes.baseAddress, sendsBody ? bodyBytes.count : 0)
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
        phase = .writing
        guard watch(writeEvent, "event_add(write)") else { return }
        arm(.write, after: front.configuration.idleTimeout)
    }

    fileprivate func writable() {
        guard phase == .writing else { return }
        let written = outboxHead.withUnsafeBytes { head in
            outboxBody.withUnsafeBytes { body in
                let rest = body.count - outboxBodySent
                return gw_write2(fd, head.baseAddress, head.count, rest > 0 ? body.baseAddress! + outboxBodySent : nil, rest)
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
        answerWritten()
    }

    /// Whether closing now could lose bytes the client is owed: an answer
    /// still being written, or one just written on a connection that is
    /// lingering so the client can read it.
    var owesBytes: Bool { phase == .writing || phase == .lingering }

    private func answerWritten() {
        if front.isClosing {
            close()
            return
        }
        if closeAfterAnswer {
            startLingering()
            return
        }
        phase = .reading
        enableReading(true)
        arm(.idle, after: front.configuration.idleTimeout)
        // An answer given while the handler was still being called comes
        // back here; `readable` then picks up the leftover, without recursion.
        if !leftover.isEmpty && !isDispatching { consumeLeftover() }
    }

    /// Shuts our side, then reads and drops what the client still sends,
    /// until it closes or the linger deadline: closing with unread bytes
    /// would send a reset, which can destroy the answer before it is read.
    private func startLingering() {
        phase = .lingering
        leftover = []
        // ENOTCONN (the client has gone) needs nothing more: lingering ends
        // at the EOF that follows.
        _ = try? CCheck.posix(Int(gw_shutdown_write(fd)), "shutdown")
        enableReading(true)
        arm(.linger, after: front.configuration.lingerTimeout)
    }

    // MARK: - Deadlines

    /// One libevent timer serves every deadline: it is re-armed only when a
    /// new deadline is earlier than the one it is set for, and on firing
    /// early it re-arms for what is left (as nginx's timers do).
    private func arm(_ kind: Deadline, after duration: Duration) {
        guard phase != .closed else { return }
        let now = ContinuousClock.now
        let newDeadline = now + duration
        deadline = newDeadline
        deadlineKind = kind
        if let armed = timerArmedUntil, armed <= newDeadline { return }
        setTimer(after: duration, until: newDeadline)
    }

    private func setTimer(after duration: Duration, until instant: ContinuousClock.Instant) {
        let (seconds, attoseconds) = max(.zero, duration).components
        var interval = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        guard let timerEvent, check(event_add(timerEvent, &interval), "event_add(timer)") else { return }
        timerArmedUntil = instant
    }

    fileprivate func timerFired() {
        timerArmedUntil = nil
        guard let deadline, phase != .closed else { return }
        let now = ContinuousClock.now
        if now < deadline {
            setTimer(after: deadline - now, until: deadline)
            return
        }
        self.deadline = nil
        switch deadlineKind {
        case .idle, .write, .linger:
            close()
        case .read:
            guard phase == .reading else { return }
            let milliseconds = front.configuration.readTimeout.components.seconds * 1000
                + front.configuration.readTimeout.components.attoseconds / 1_000_000_000_000_000
            answer(HTTPFramingError(status: 408, message: "the request's header and body did not arrive within \(milliseconds) ms"))
        }
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
        guard phase != .closed else { return }
        phase = .closed
        deadline = nil
        for event in [readEvent, writeEvent, timerEvent] {
            if let event { event_free(event) }
        }
        readEvent = nil
        writeEvent = nil
        timerEvent = nil
        _ = Glibc.close(fd)
        leftover = []
        outboxHead = []
        outboxBody = []
        outboxHeld = nil
        front.connectionClosed(self)
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
