/// One valid JSON-RPC 2.0 request (a call or a notification).
public struct JSONRPCRequest: Sendable, Equatable {
    /// The id to echo; `nil` means a notification (no `"id"` member at all),
    /// while ``JSONRPCID/null`` is a real id that gets a response.
    public let id: JSONRPCID?
    /// The method name.
    public let method: String
    /// The parameters, when the request had a `"params"` member.
    public let params: JSONRPCParams?

    /// A request; methods can be unit-tested with hand-made ones.
    public init(id: JSONRPCID?, method: String, params: JSONRPCParams? = nil) {
        self.id = id
        self.method = method
        self.params = params
    }

    /// Whether the client wants no response.
    public var isNotification: Bool {
        id == nil
    }
}
