import Logging

/// What every JSON-RPC call of one HTTP request shares.
public struct RPCCallContext: Sendable {
    /// The `X-Request-Id`, sent upstream and put in `error.data.requestId`.
    public let requestID: String
    /// A logger with `requestId` metadata.
    public let logger: Logger
}
