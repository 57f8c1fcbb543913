/// The rules of one client connection of the HTTP front, with no socket, no
/// buffer and no timer: which phase it is in, which deadline applies, what
/// a pipelining client's bytes wait for, and how it closes. ``HTTPConnection``
/// reads, parses, writes and arms the one timer; it tells this machine what
/// happened and does what the returned ``Action`` says.
///
/// Generic over the clock, and told the instant, so tests drive every
/// deadline on instants they make up. A value type with no allocation:
/// every event is a `mutating` call returning a small enum.
///
/// Phases: `reading` (a new connection gets the shorter of the read and
/// idle deadlines for its first byte, a kept-alive one the idle deadline;
/// then the read deadline), `responding` (the handler has the request; what
/// a pipelining client sends meanwhile is held), `writing` (the answer did
/// not fit the socket; the write deadline bounds a client that does not
/// read it, and then the connection is reset), `lingering` (closing after
/// an answer that closes: our side is shut, the client's late bytes are
/// read and dropped until it closes or the linger deadline), `closed`.
public struct HTTPConnectionStateMachine<Clock: _Concurrency.Clock> {
    /// Where the connection is.
    public enum Phase: Equatable, Sendable {
        case reading, responding, writing, lingering, closed
    }

    /// Which deadline the timer is for.
    public enum Deadline: Equatable, Sendable {
        /// The first byte of the next request (of the first: the shorter of
        /// the read and idle timeouts).
        case idle
        /// The rest of a request whose first byte came.
        case read
        /// A client that does not read its answer.
        case write
        /// A closing connection's client, to close in turn.
        case linger
    }

    /// The connection's timeouts.
    public struct Timeouts: Sendable {
        /// For the rest of a request once its first byte came.
        public var read: Clock.Duration
        /// For the next request's first byte.
        public var idle: Clock.Duration
        /// For a client to read an answer the socket did not take at once.
        public var write: Clock.Duration
        /// For a closing connection's client to close in turn.
        public var linger: Clock.Duration

        public init(read: Clock.Duration, idle: Clock.Duration, write: Clock.Duration, linger: Clock.Duration) {
            self.read = read
            self.idle = idle
            self.write = write
            self.linger = linger
        }
    }

    /// What the connection does after an event. `timer`, when given, is the
    /// instant to set the connection's one timer to (it is set only when a
    /// deadline comes before the instant it is set for already; one that
    /// fires early is set again for what is left).
    public enum Action: Equatable {
        /// Nothing.
        case none
        /// Watch the socket for reading; set the timer.
        case read(timer: Clock.Instant?)
        /// Set the timer.
        case armTimer(Clock.Instant)
        /// Parse the bytes just read where they are; keep what follows a
        /// request handed over.
        case parse
        /// Keep the bytes after those not parsed yet (a pipelining client's
        /// next request, held while one is answered); stop watching the
        /// socket when `stopReading` (past one request's worth); parse
        /// what is held when `parse`.
        case hold(stopReading: Bool, parse: Bool)
        /// Drop the bytes just read (a closing connection's).
        case drop
        /// Hand the request parsed to the handler, as request `serial`.
        case handOver(serial: UInt64)
        /// Stop watching the socket for reading, drop what is held, and
        /// answer the framing error, closing.
        case refuse
        /// Write the answer, with `Connection: close` when `close`.
        case write(close: Bool)
        /// The answer is written; read the next request: watch the socket,
        /// set the timer, and parse what is held when `parse`.
        case readNext(timer: Clock.Instant?, parse: Bool)
        /// Drop what is held, shut our side for writing, watch the socket
        /// for reading (to drop what the client still sends), set the timer.
        case linger(timer: Clock.Instant?)
        /// Stop watching the socket for reading and tell the handler of the
        /// request being answered that its client stopped sending.
        case stopReadingAndTellClientStopped
        /// Call the callback now.
        case callNow
        /// Keep the callback until the client stops, or the answer comes.
        case keepCallback
        /// After ``requestsPerTurn`` requests in one turn: parse the rest
        /// in a later turn of the loop.
        case yield
        /// Answer `408` and close: the request did not arrive in time.
        case requestTimedOut
        /// Close the socket.
        case close
        /// Reset the connection (a close with `SO_LINGER` zero): the answer
        /// is lost either way, and a reset frees the socket's buffers at
        /// once, where a close would leave the kernel trickling them to a
        /// client that does not read (as nginx's `reset_timedout_connection`).
        case reset
    }

    /// Most requests of one connection handled in one turn of the loop: the
    /// rest wait for a later turn, so one pipelining client cannot hold the
    /// loop from its other connections.
    public static var requestsPerTurn: Int { 16 }

    /// The deadlines' durations.
    public let timeouts: Timeouts
    /// Most bytes held past the request being answered before reading stops.
    public let holdLimit: Int

    /// Where the connection is now.
    public private(set) var phase = Phase.reading
    /// The request being read or answered (1 for the first).
    public private(set) var serial: UInt64 = 0
    /// Whether the connection may serve another request after this answer.
    private var keepAlive = true
    /// The answer being written closes the connection (or will: the client
    /// stopped sending).
    private var closeAfterAnswer = false
    /// The client stopped sending while its request was being answered.
    private var clientStopped = false
    /// The handler is being called: an answer given meanwhile comes back to
    /// the parse loop, which goes on with the held bytes, without recursion.
    private var isDispatching = false
    private var requestsThisTurn = 0
    /// The rest of a pipelined read waits for a later turn.
    public private(set) var isYielding = false
    /// When the connection gives up waiting as it does now; nil while the
    /// handler has the request.
    public private(set) var deadline: Clock.Instant?
    /// What ``deadline`` is for.
    public private(set) var deadlineKind = Deadline.idle
    /// The instant the timer is set for; nil when it is not set.
    private var timerSetFor: Clock.Instant?
    /// When the current deadline was set: when the connection began to
    /// wait as it does now (for a request, for the rest of one, for the
    /// client to read, for it to close).
    public private(set) var waitingSince: Clock.Instant

    /// - Parameters:
    ///   - holdLimit: the most bytes held past the request being answered
    ///     before the socket stops being read (one request's worth).
    public init(timeouts: Timeouts, holdLimit: Int, now: Clock.Instant) {
        self.timeouts = timeouts
        self.holdLimit = holdLimit
        self.waitingSince = now
    }

    // MARK: - Reading

    /// The connection is open: read, with a deadline for the first byte.
    public mutating func start(now: Clock.Instant) -> Action {
        // A connection that sends nothing must not hold a place under the
        // cap for the whole idle deadline: its first byte is due within the
        // shorter of the two.
        .read(timer: arm(.idle, after: min(timeouts.read, timeouts.idle), now: now))
    }

    /// `count` bytes were read; `unparsed` were held already.
    public mutating func received(_ count: Int, unparsed: Int) -> Action {
        switch phase {
        case .reading where unparsed == 0:
            requestsThisTurn = 0
            return .parse
        case .reading, .responding, .writing:
            // The socket stays watched while a request is answered (no
            // epoll_ctl per request); past one request's worth, reading
            // stops.
            let parse = phase == .reading && !isYielding
            if parse { requestsThisTurn = 0 }
            return .hold(stopReading: unparsed + count > holdLimit, parse: parse)
        case .lingering, .closed:
            return .drop
        }
    }

    /// Whether what follows a request parsed in place is kept for later:
    /// not once the connection is closing.
    public var keepsRest: Bool {
        !closeAfterAnswer && phase != .lingering && phase != .closed
    }

    /// Whether held bytes are parsed now: true while reading, for up to
    /// ``requestsPerTurn`` requests in this turn. Past that, ``isYielding``:
    /// the connection schedules ``resumed()`` for a later turn.
    public mutating func mayParseHeld() -> Action {
        guard phase == .reading else { return .none }
        guard requestsThisTurn < Self.requestsPerTurn else {
            isYielding = true
            return .yield
        }
        return .parse
    }

    /// The later turn after a ``Action/yield``: read again, parse what is
    /// held.
    public mutating func resumed() {
        isYielding = false
        requestsThisTurn = 0
    }

    /// The parser used every byte and wants more.
    public mutating func needMore(insideRequest: Bool, now: Clock.Instant) -> Action {
        guard insideRequest, deadlineKind != .read else { return .none }
        return arm(.read, after: timeouts.read, now: now).map { .armTimer($0) } ?? .none
    }

    /// The request's head asked for `100 Continue`: its body is due within
    /// the read deadline.
    public mutating func continueExpected(now: Clock.Instant) -> Action {
        guard deadlineKind != .read else { return .none }
        return arm(.read, after: timeouts.read, now: now).map { .armTimer($0) } ?? .none
    }

    /// A whole request was parsed: it goes to the handler. No deadline
    /// applies while it is answered. Call ``handlerReturned()`` when the
    /// handler returns.
    public mutating func requestReceived(keepAlive: Bool) -> Action {
        phase = .responding
        deadline = nil
        deadlineKind = .idle
        serial &+= 1
        requestsThisTurn += 1
        self.keepAlive = keepAlive
        isDispatching = true
        return .handOver(serial: serial)
    }

    /// The handler's call returned (it may have answered already).
    public mutating func handlerReturned() {
        isDispatching = false
    }

    /// The bytes could not be read as a request: it is answered, then the
    /// connection closes.
    public mutating func framingFailed() -> Action {
        phase = .responding
        closeAfterAnswer = true
        return .refuse
    }

    /// The client finished sending (perhaps only half-closed) or the read
    /// failed.
    public mutating func endOfInput() -> Action {
        switch phase {
        case .responding, .writing:
            // It still gets its answer, then the connection closes. A
            // handler still working on that answer is told: the client
            // has most likely gone.
            closeAfterAnswer = true
            keepAlive = false
            clientStopped = true
            return .stopReadingAndTellClientStopped
        case .reading, .lingering:
            // Nothing more will come; a request cut off midway has nobody
            // left to answer.
            return .close
        case .closed:
            return .none
        }
    }

    // MARK: - Answering

    /// Whether request `serial` is the one waiting for its answer.
    public func awaitsAnswer(_ serial: UInt64) -> Bool {
        phase == .responding && serial == self.serial
    }

    /// A handler asks to be called back when the client of request
    /// `serial` stops sending or the connection closes before its answer.
    public func clientStopsCallback(serial: UInt64) -> Action {
        // Answered already (a later request is in, or this one's answer is
        // being written): nothing to tell.
        guard serial == self.serial else { return .none }
        switch phase {
        case .responding where !clientStopped: return .keepCallback
        case .responding, .closed: return .callNow
        case .reading, .writing, .lingering: return .none
        }
    }

    /// The answer to request `serial` is ready; `close` when it or the
    /// server asks to close. An answer to an earlier request (its
    /// connection closed, or answered already) is dropped: ``Action/none``.
    public mutating func answerReady(serial: UInt64, close: Bool) -> Action {
        guard awaitsAnswer(serial) else { return .none }
        closeAfterAnswer = close || !keepAlive || closeAfterAnswer
        return .write(close: closeAfterAnswer)
    }

    /// The socket took part of the answer: the rest waits for it to be
    /// writable, within the write deadline.
    public mutating func answerPartlyWritten(now: Clock.Instant) -> Action {
        phase = .writing
        return arm(.write, after: timeouts.write, now: now).map { .armTimer($0) } ?? .none
    }

    /// The answer's last byte is written. `frontClosing`: the server closes
    /// every connection that owes nothing; `unparsed`: bytes held.
    public mutating func answerWritten(frontClosing: Bool, unparsed: Int, now: Clock.Instant) -> Action {
        if frontClosing { return .close }
        if closeAfterAnswer {
            // Closing with unread bytes would send a reset, which can
            // destroy the answer before it is read: our side is shut, and
            // what the client still sends is read and dropped.
            phase = .lingering
            return .linger(timer: arm(.linger, after: timeouts.linger, now: now))
        }
        phase = .reading
        let timer = arm(.idle, after: timeouts.idle, now: now)
        // An answer given while the handler was still being called comes
        // back to the parse loop, which goes on with the held bytes. One
        // given later (by a callback) starts a turn of its own.
        let parse = unparsed > 0 && !isDispatching && !isYielding
        if parse { requestsThisTurn = 0 }
        return .readNext(timer: timer, parse: parse)
    }

    // MARK: - Deadlines

    /// The timer fired.
    public mutating func timerFired(now: Clock.Instant) -> Action {
        timerSetFor = nil
        guard let deadline, phase != .closed else { return .none }
        if now < deadline {
            timerSetFor = deadline
            return .armTimer(deadline)
        }
        self.deadline = nil
        switch deadlineKind {
        case .idle, .linger:
            return .close
        case .write:
            return .reset
        case .read:
            guard phase == .reading else { return .none }
            return .requestTimedOut
        }
    }

    /// Sets the deadline; returns the instant to set the timer to, unless
    /// it is set for that or earlier already.
    private mutating func arm(_ kind: Deadline, after duration: Clock.Duration, now: Clock.Instant) -> Clock.Instant? {
        guard phase != .closed else { return nil }
        let newDeadline = now.advanced(by: duration)
        deadline = newDeadline
        deadlineKind = kind
        waitingSince = now
        if let timerSetFor, timerSetFor <= newDeadline { return nil }
        timerSetFor = newDeadline
        return newDeadline
    }

    // MARK: - Closing

    /// The connection closes; false when it was closed already.
    public mutating func close() -> Bool {
        guard phase != .closed else { return false }
        phase = .closed
        deadline = nil
        return true
    }

    /// Whether closing now could lose bytes the client is owed: an answer
    /// still being written, or one just written on a connection that is
    /// lingering so the client can read it.
    public var owesBytes: Bool { phase == .writing || phase == .lingering }
}
