/// What a ``JSONRPCServer`` observer learns of one request.
public struct JSONRPCCallRecord: Sendable {
    /// The method name, or `nil` when no valid request could be read.
    public let method: String?
    /// The result or error the request produced (also for notifications,
    /// whose answer is not sent).
    public let outcome: Result<JSONValue, JSONRPCError>
    /// How long the method ran; zero when no method ran.
    public let duration: Duration
    public let isNotification: Bool
    /// The request's id, when one was read (nil for a notification).
    public let id: JSONRPCID?

    public init(method: String?, outcome: Result<JSONValue, JSONRPCError>, duration: Duration, isNotification: Bool, id: JSONRPCID? = nil) {
        self.id = id
        self.method = method
        self.outcome = outcome
        self.duration = duration
        self.isNotification = isNotification
    }
}
