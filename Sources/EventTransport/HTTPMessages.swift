public import MonotonicTime
@_exported import HTTPFraming

/// A request as the HTTP server received it.
public struct HTTPServerRequest: Sendable {
    /// `GET`, `POST`, ... (upper case).
    public let method: String
    /// The request target as sent, e.g. `/rpc?x=1`.
    public let uri: String
    /// The path part of the target, percent-decoding not applied.
    public let path: String
    /// The header fields in order.
    public let headers: HTTPHeaders
    /// The whole body (already bounded by the server's body limit).
    public let body: [UInt8]
    /// The loop that accepted the request and will write its answer: the
    /// loop its work runs on, passed on explicitly (never looked up from
    /// the calling thread).
    public let loop: EventLoop
    /// When the request's first byte was read (for a pipelined request,
    /// when its turn to be read came): its calls' deadlines count from here.
    public let received: MonotonicInstant

    init(head: HTTPRequestHead, body: [UInt8], loop: EventLoop, received: MonotonicInstant) {
        self.method = head.method
        self.uri = head.target
        self.path = String(head.path)
        self.headers = head.headers
        self.body = body
        self.loop = loop
        self.received = received
    }

    public init(method: String, uri: String, headers: HTTPHeaders, body: [UInt8], loop: EventLoop, received: MonotonicInstant = .now) {
        self.loop = loop
        self.received = received
        self.method = method
        self.uri = uri
        self.path = String(uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        self.headers = headers
        self.body = body
    }
}

/// A response to send, on the server side.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Kept by the connection until the answer's last byte is written to
    /// the socket, or the connection closes; then let go. Its release tells
    /// its owner that the answer no longer holds memory (the gateway's
    /// turn for a batch).
    public var heldUntilWritten: (any AnyObject & Sendable)?
    /// What the handler tells the server's answer observer about the
    /// request (who asked, ...), passed on in ``HTTPAnswerRecord/note``;
    /// never sent. A reference, so that a response stays small to copy: a
    /// note made once (one per API key) costs a request nothing.
    public var note: (any AnyObject & Sendable)?

    public init(status: Int, headers: HTTPHeaders = [:], body: [UInt8] = [], heldUntilWritten: (any AnyObject & Sendable)? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.heldUntilWritten = heldUntilWritten
    }
}

/// One answer of an ``HTTPServer`` as its answer observer sees it, as the
/// answer is handed to the socket: what an access log line and a count by
/// status need. Every answer to a request has one, refusals of the
/// framing included; a connection refused over the cap (no request was
/// read) has none.
public struct HTTPAnswerRecord: Sendable {
    /// The request's method and target as sent (the target with its
    /// query); nil when the request line itself could not be read.
    public let requestLine: (method: String, target: String)?
    public let status: Int
    /// Body bytes sent: none for `HEAD`, `204` or `304`.
    public let bodyBytes: Int
    /// When the request's first byte was read (``HTTPServerRequest/received``).
    public let started: MonotonicInstant
    /// The answer's header fields (its `X-Request-Id`, ...).
    public let responseHeaders: HTTPHeaders
    /// The response's ``HTTPResponse/note``.
    public let note: (any AnyObject & Sendable)?

    /// From the request's first byte read until now: read it as the
    /// observer is called, when the answer is handed to the socket. Only an
    /// observer that needs it reads the clock.
    public var elapsed: Duration { .now - started }

    public init(requestLine: (method: String, target: String)?, status: Int, bodyBytes: Int, started: MonotonicInstant, responseHeaders: HTTPHeaders, note: (any AnyObject & Sendable)?) {
        self.requestLine = requestLine
        self.status = status
        self.bodyBytes = bodyBytes
        self.started = started
        self.responseHeaders = responseHeaders
        self.note = note
    }
}

/// Sees every answer of an ``HTTPServer``, on the loop that writes it,
/// just before it is written: it must be quick and must not block.
///
/// Every answer is ``counted(status:)``; only an observer that
/// ``wantsRecords`` is handed each ``HTTPAnswerRecord`` (and only then does
/// a connection keep the request line for it), so counting alone costs a
/// request no reference count and no copy.
public protocol HTTPAnswerObserver: AnyObject, Sendable {
    /// Read once, when the server is made.
    var wantsRecords: Bool { get }
    /// One answer of this status.
    func counted(status: Int)
    /// The answer just counted, when ``wantsRecords``.
    func answered(_ record: borrowing HTTPAnswerRecord)
}

/// A response the HTTPS client received.
public struct HTTPClientResponse: Sendable {
    public let status: Int
    public let headers: HTTPHeaders
    public let body: [UInt8]

    public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why an HTTPS exchange produced no response.
public struct HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Connecting, resolving, or the peer closed or reset before a full response.
        case connection
        /// The TLS handshake failed, certificate verification included.
        case tls
        /// No response within the attempt's timeout.
        case timeout
        /// No connection became free (the client's cap on exchanges in
        /// flight) before the request's lease deadline: nothing was sent.
        case noLease
        /// The answer cannot be read as HTTP/1.1: a header section over the
        /// limit, a transfer coding that was not asked for, a control
        /// character (NUL) in a field, a status outside 200 to 599 (or an
        /// unasked-for `101`), conflicting framing. The upstream is broken,
        /// not unreachable: asking again would get the same.
        case malformedResponse
        /// The response's body is larger than the client reads
        /// (``HTTPSClientConfiguration/maxResponseBytes``): refused when its
        /// declared length says so, cut off at the limit when it streams.
        case responseTooLarge
    }

    public let kind: Kind
    /// What happened, for a person; never holds request headers.
    public let message: String
    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
