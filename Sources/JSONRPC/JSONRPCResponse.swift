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

    /// Writes ``jsonValue`` without building it: a result that is
    /// ``JSONValue/encoded(_:)`` is appended as its bytes.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key(literal: "jsonrpc")
        writer.string("2.0")
        switch outcome {
        case .success(let result):
            writer.key(literal: "result")
            writer.value(result)
        case .failure(let error):
            writer.key(literal: "error")
            error.write(to: &writer)
        }
        writer.key(literal: "id")
        id.write(to: &writer)
        writer.endObject()
    }

    /// The response as compact JSON, the same bytes as
    /// `jsonValue.serialized()`, written into one buffer reserved up front.
    public func serialized() -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: estimatedByteCount)
        write(to: &writer)
        return writer.takeBytes()
    }

    /// Room for the envelope, the id and a pre-encoded result, so that
    /// writing the response rarely grows the buffer; a tree result or an
    /// error gets a guess.
    var estimatedByteCount: Int {
        let envelope = 48
        let id: Int
        switch self.id {
        case .number(let text), .string(let text): id = text.utf8.count + 2
        case .null: id = 4
        }
        switch outcome {
        case .success(.encoded(let json)): return envelope + id + json.bytes.count
        case .success: return envelope + id + 256
        case .failure(let error): return envelope + id + 96 + error.message.utf8.count
        }
    }
}
