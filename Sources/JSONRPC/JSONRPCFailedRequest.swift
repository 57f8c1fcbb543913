/// A batch element or body that is not a valid request, with the id to
/// answer it under.
public struct JSONRPCFailedRequest: Error, Sendable, Equatable {
    /// The request's id when it could be read (a valid `"id"` member);
    /// `nil` otherwise, answered as `null`. An invalid request is never a
    /// notification, so `nil` here still gets a response.
    public let id: JSONRPCID?
    /// Why the request is invalid (-32600).
    public let error: JSONRPCError

    /// A failed request.
    public init(id: JSONRPCID?, error: JSONRPCError) {
        self.id = id
        self.error = error
    }
}
