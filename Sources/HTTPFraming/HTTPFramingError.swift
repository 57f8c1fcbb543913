/// Why a request cannot be read as HTTP/1.1: the status to answer and a
/// message naming what was wrong. After any of these the connection closes,
/// since the rest of its bytes can no longer be framed safely.
public struct HTTPFramingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `400`, `413`, `417`, `431`, `501` or `505`.
    public let status: Int
    /// What was wrong, for the client; never echoes more than a few bytes.
    public let message: String
    /// The request's header fields when they were read before the refusal
    /// (a body over the limit, a framing conflict between fields), so the
    /// answer can echo what the contract echoes (`X-Request-Id`); `nil` when
    /// the head itself could not be read.
    public var requestHeaders: HTTPHeaders?
    /// The request's method and target when its request line was read
    /// before the refusal, for the access log; `nil` otherwise.
    public var requestLine: (method: String, target: String)?

    public init(status: Int, message: String, requestHeaders: HTTPHeaders? = nil) {
        self.status = status
        self.message = message
        self.requestHeaders = requestHeaders
    }

    public static func == (lhs: HTTPFramingError, rhs: HTTPFramingError) -> Bool {
        lhs.status == rhs.status && lhs.message == rhs.message
    }

    public var description: String { "\(status): \(message)" }

    static func badRequest(_ message: String) -> HTTPFramingError {
        HTTPFramingError(status: 400, message: message)
    }
}
