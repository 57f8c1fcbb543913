/// What the transport sends back for one HTTP body.
public enum JSONRPCReply: Sendable, Equatable {
    /// Only notifications: HTTP 204 without a body.
    case noContent
    /// One response object or a batch array, serialized: HTTP 200 with
    /// `Content-Type: application/json`.
    case json([UInt8])
}
