import JSONRPC

/// What the JSON-RPC 2.0 specification says a server with ``FuzzEngine``'s
/// method table answers, worked out from the parsed body alone, without
/// ``JSONRPCServer``'s own decoding.
enum ExpectedAnswer: Equatable {
    /// No body: only notifications.
    case noContent
    /// One response object.
    case single(ExpectedResponse)
    /// A batch of responses, in batch order.
    case batch([ExpectedResponse])

    /// The answer to `document`, the parsed body (`nil` when it is not
    /// JSON), for a server allowing `maxBatchSize` elements.
    init(document: JSONValue?, maxBatchSize: Int) {
        guard let document else {
            self = .single(.error(code: -32700, id: .null, data: nil))
            return
        }
        switch document {
        case .array(let elements):
            guard !elements.isEmpty, elements.count <= maxBatchSize else {
                self = .single(.error(code: -32600, id: .null, data: nil))
                return
            }
            let responses = elements.compactMap(ExpectedResponse.init(element:))
            self = responses.isEmpty ? .noContent : .batch(responses)
        case .object:
            self = ExpectedResponse(element: document).map(ExpectedAnswer.single) ?? .noContent
        case .null, .bool, .number, .string, .encoded:
            self = .single(.error(code: -32600, id: .null, data: nil))
        }
    }
}

/// One response object as the specification predicts it; error messages
/// are the server's to word, so only their code is predicted.
enum ExpectedResponse: Equatable {
    case result(JSONValue, id: JSONValue)
    case error(code: Int, id: JSONValue, data: JSONValue?)

    /// The response to one request object, `nil` for a notification.
    init?(element: JSONValue) {
        guard case .object(let request) = element else {
            self = .error(code: -32600, id: .null, data: nil)
            return
        }
        let idMember = request["id"]
        switch idMember {
        case nil, .null?, .number?, .string?:
            break
        case .bool?, .array?, .object?, .encoded?:
            self = .error(code: -32600, id: .null, data: nil)
            return
        }
        let id = idMember ?? .null
        guard case .string(let version)? = request["jsonrpc"], Array(version.utf8) == Array("2.0".utf8) else {
            self = .error(code: -32600, id: id, data: nil)
            return
        }
        guard case .string(let method)? = request["method"] else {
            self = .error(code: -32600, id: id, data: nil)
            return
        }
        let params = request["params"]
        switch params {
        case nil, .array?, .object?:
            break
        case .null?, .bool?, .number?, .string?, .encoded?:
            self = .error(code: -32600, id: id, data: nil)
            return
        }
        // Notifications run but are not answered, valid or not.
        guard idMember != nil else { return nil }
        switch FuzzEngine.Method(rawValue: method) {
        case .echo?, .echoEncoded?, .echoLater?:
            self = .result(params ?? .null, id: id)
        case .fail?, .failLater?:
            self = .error(code: FuzzEngine.failCode, id: id, data: params)
        case nil:
            self = .error(code: -32601, id: id, data: nil)
        }
    }

    /// Reads a response object the server wrote, checking its envelope;
    /// `nil` when it is not one.
    init?(answered value: JSONValue) {
        // The members and their order are the specification's example's.
        guard case .object(let response) = value,
              response.keys == ["jsonrpc", "result", "id"] || response.keys == ["jsonrpc", "error", "id"],
              response["jsonrpc"] == .string("2.0"),
              let id = response["id"]
        else { return nil }
        switch id {
        case .null, .number, .string: break
        case .bool, .array, .object, .encoded: return nil
        }
        if let result = response["result"] {
            self = .result(result, id: id)
            return
        }
        guard case .object(let error)? = response["error"],
              let code = error["code"]?.intValue,
              case .string? = error["message"],
              error.keys == ["code", "message"] || error.keys == ["code", "message", "data"]
        else { return nil }
        self = .error(code: code, id: id, data: error["data"])
    }
}
