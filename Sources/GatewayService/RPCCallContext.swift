import Logging

/// What every JSON-RPC call of one HTTP request shares.
public struct RPCCallContext: Sendable {
    /// The `X-Request-Id`, sent upstream and put in `error.data.requestId`.
    public let requestID: String
    /// A logger with `requestId` metadata.
    public let logger: Logger

    /// A context for the calls of one HTTP request; public so that a
    /// benchmark or a test can drive the engine in process.
    public init(requestID: String, logger: Logger) {
        self.requestID = requestID
        self.logger = logger
    }
}
