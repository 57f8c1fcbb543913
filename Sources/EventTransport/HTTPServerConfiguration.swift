import HTTPFraming

/// Address, limits and deadlines of the gateway's ``HTTPServer``.
public struct HTTPServerConfiguration: Sendable {
    /// Host or address to bind, e.g. `127.0.0.1`, `0.0.0.0`, `::`.
    public var host: String
    /// Port to bind; `0` picks a free one (see ``HTTPServer/start()``).
    public var port: Int
    /// Head, field-count and body limits; past them a request gets `431`
    /// or `413` and its connection closes.
    public var limits: HTTPRequestParser.Limits
    /// From a request's first byte to its last; then `408` and close.
    public var readTimeout: Duration
    /// How long a connection may wait with no request in progress; then
    /// the connection closes.
    public var idleTimeout: Duration
    /// How long a client may take to read an answer the socket did not take
    /// at once, from the answer's first write to its last byte (not reset by
    /// progress, so a client that reads a byte now and then is bounded too);
    /// then the connection is reset, and what the answer held is let go
    /// (``HTTPResponse/heldUntilWritten``).
    public var writeTimeout: Duration
    /// Most client connections open at once, over all loops. What a
    /// connection beyond it meets is ``whenFull``'s.
    public var maxConnections: Int
    /// What a connection beyond ``maxConnections`` meets: by default it is
    /// accepted, told `503`, and closed.
    public var whenFull: WhenFull = .refuse
    /// Most bytes of answers held for clients that have not read them yet
    /// (an answer the socket did not take at once is held whole until its
    /// last byte is written), over all loops, shared out evenly between
    /// them. Past it, the loop resets its connection with the most bytes
    /// still to write, as the write deadline would later: without it, many
    /// clients that never read could each hold a large answer until the
    /// write deadline, and together more memory than the process has.
    public var maxUnwrittenBytes: Int = .max
    /// How long a connection that is being closed after an error keeps
    /// reading (and discarding) what the client still sends, so that the
    /// client reads the answer rather than a reset.
    public var lingerTimeout: Duration
    /// For tests only (`@testable`): when set (at least 1), each write of an
    /// answer or of `100 Continue` offers the socket at most this many
    /// bytes, as a socket whose buffer is nearly full takes only part of a
    /// write.
    var writeSizeLimitForTesting: Int?

    /// What a listener whose connections are at the cap does with a new one.
    public enum WhenFull: Sendable, Equatable {
        /// The new connection is told `503` and closed; the open ones go
        /// on. For callers: one who opens connections cannot end another's.
        case refuse
        /// The new connection is taken, and the one that has waited
        /// longest with no request in progress is closed to make room (see
        /// ``HTTPConnection/EvictionRank``). For a listener that must keep
        /// answering whatever its connections do (probes): silent or
        /// dripping connections cannot hold it. The cap is shared out
        /// evenly between the loops (at least one each), so that each loop
        /// makes room among its own connections, at once, without asking
        /// another.
        case closeIdlest
    }

    public init(
        host: String,
        port: Int,
        limits: HTTPRequestParser.Limits = .init(),
        readTimeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(60),
        writeTimeout: Duration = .seconds(10),
        maxConnections: Int = 1024,
        lingerTimeout: Duration = .seconds(2)
    ) {
        self.host = host
        self.port = port
        self.limits = limits
        self.readTimeout = readTimeout
        self.idleTimeout = idleTimeout
        self.writeTimeout = writeTimeout
        self.maxConnections = maxConnections
        self.lingerTimeout = lingerTimeout
    }
}
