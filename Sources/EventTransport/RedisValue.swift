/// One reply of a Redis server (RESP2), copied out of hiredis's reply
/// object, so nothing above this layer sees a C pointer.
public enum RedisValue: Sendable, Equatable {
    /// `+OK` and other simple strings.
    case status(String)
    /// `-ERR ...`: the server refused this command (the connection is fine).
    case error(String)
    case integer(Int)
    /// A bulk string, as bytes (the gateway stores binary values).
    case bulk([UInt8])
    /// A nil bulk string or nil array (`GET` of a missing key).
    case null
    case array([RedisValue])

    /// The bytes of a bulk string, else nil.
    public var bytes: [UInt8]? {
        if case .bulk(let bytes) = self { return bytes }
        return nil
    }
}

/// Why a Redis command got no usable reply. The message never holds the
/// password.
public struct RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// No connection is ready (connecting, backing off, closed): the
        /// command was not sent; the caller carries on without Redis.
        case notConnected
        /// The reply did not arrive within `GATEWAY_REDIS_TIMEOUT_MS`.
        case timeout
        /// The connection went away before the reply arrived.
        case disconnected
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// Where the shared tier's Redis is, and how to talk to it.
public struct RedisEndpoint: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// Sent with `AUTH` after connecting; never logged.
    public var password: String?
    /// Selected with `SELECT` after connecting when not 0.
    public var database: Int
    /// Every command's deadline (`GATEWAY_REDIS_TIMEOUT_MS`).
    public var commandTimeout: Duration
    /// How long connecting (TCP, `AUTH`, `SELECT`) may take before the
    /// attempt is abandoned and retried with backoff.
    public var connectTimeout: Duration

    public init(host: String, port: Int, password: String?, database: Int, commandTimeout: Duration, connectTimeout: Duration = .seconds(1)) {
        self.host = host
        self.port = port
        self.password = password
        self.database = database
        self.commandTimeout = commandTimeout
        self.connectTimeout = connectTimeout
    }
}

/// Hears of a connection's ups and downs, for logs and metrics. Called on
/// the connection's loop.
public protocol RedisConnectionObserver: Sendable {
    /// A connection is ready (connected, authenticated, database selected).
    func redisConnected(loop: String)
    /// A connection attempt failed or a ready connection was lost
    /// (`wasReady`); it is retried with backoff. `message` never holds the
    /// password.
    func redisConnectionFailed(loop: String, message: String, wasReady: Bool)
    /// A ready connection was closed for good (shutdown).
    func redisConnectionClosed(loop: String)
    /// A command on a ready connection waited its whole timeout: the
    /// connection is dropped (``redisConnectionFailed(loop:message:wasReady:)``
    /// follows).
    func redisTimedOut(loop: String)
    /// Whether the server refused the password (`AUTH`) on this loop's
    /// last attempt: `true` after a refusal, `false` once a connection
    /// with a password is ready again.
    func redisPasswordRefused(loop: String, _ refused: Bool)
}

extension RedisConnectionObserver {
    public func redisPasswordRefused(loop: String, _ refused: Bool) {}
    public func redisTimedOut(loop: String) {}
}
