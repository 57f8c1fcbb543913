/// Where the shared tier's Redis is and how it is used: `GATEWAY_REDIS_URL`
/// read, with `GATEWAY_REDIS_PASSWORD_FILE`, `GATEWAY_REDIS_TIMEOUT_MS` and
/// `GATEWAY_REDIS_PREFIX`.
public struct RedisSettings: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// From the URL or `GATEWAY_REDIS_PASSWORD_FILE`; never logged.
    public var password: String?
    public var database: Int
    /// `GATEWAY_REDIS_TIMEOUT_MS`.
    public var timeoutMS: Int
    /// `GATEWAY_REDIS_PREFIX`.
    public var prefix: String

    public init(host: String, port: Int, password: String?, database: Int, timeoutMS: Int, prefix: String) {
        self.host = host
        self.port = port
        self.password = password
        self.database = database
        self.timeoutMS = timeoutMS
        self.prefix = prefix
    }

    /// The URL for logs, the password replaced.
    public var redactedURL: String {
        let authority = host.contains(":") ? "[\(host)]" : host
        return "redis://\(password == nil ? "" : ":<redacted>@")\(authority):\(port)/\(database)"
    }
}
