/// One JSON-RPC response object.
public struct JSONRPCResponse: Sendable, Equatable {
    /// The id of the request answered; ``JSONRPCID/null`` when it could not
    /// be read.
    public var id: JSONRPCID
    /// The result or the error.
    public var outcome: Result<JSONValue, JSONRPCError>

    /// A response.
    public init(id: JSONRPCID, outcome: Result<JSONValue, JSONRPCError>) {
        self.id = id
        self.outcome = outcome
    }

    /// `{"jsonrpc":"2.0","result":...,"id":...}` or
    /// `{"jsonrpc":"2.0","error":{...},"id":...}`, in that member order.
    public var jsonValue: JSONValue {
        switch outcome {
        case .success(let result):
            ["jsonrpc": "2.0", "result": result, "id": id.jsonValue]
        case .failure(let error):
            ["jsonrpc": "2.0", "error": error.jsonValue, "id": id.jsonValue]
        }
    }
}
