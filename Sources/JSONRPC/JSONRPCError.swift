/// A JSON-RPC error object.
public struct JSONRPCError: Error, Sendable, Equatable {
    /// The error code; -32768 to -32000 are reserved by the specification.
    public var code: Int
    /// A message for a person.
    public var message: String
    /// Structured detail for a program, omitted from the object when `nil`.
    public var data: JSONValue?
    /// The method's own typed failure this object was made from, for the
    /// server's metrics and logs: they read it as a value, never back from
    /// `data`. Not part of the object sent, nor of equality.
    public var cause: (any Error & Sendable)?

    /// An error object.
    public init(code: Int, message: String, data: JSONValue? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.data = data
        self.cause = cause
    }

    /// Equal when the objects sent are equal (``cause`` aside).
    public static func == (lhs: JSONRPCError, rhs: JSONRPCError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.data == rhs.data
    }

    /// -32700: the body is not JSON. `detail` is the parser's message.
    public static func parseError(_ detail: String) -> JSONRPCError {
        JSONRPCError(code: -32700, message: "Parse error: \(detail)")
    }

    /// -32600: the JSON is not a valid request.
    public static func invalidRequest(_ detail: String) -> JSONRPCError {
        JSONRPCError(code: -32600, message: "Invalid request: \(detail)")
    }

    /// -32601: no method of that name.
    public static func methodNotFound(_ method: String) -> JSONRPCError {
        JSONRPCError(code: -32601, message: "Method not found: \(clipped(method))")
    }

    /// The longest method name an error message repeats; a name can be as
    /// long as the body, and echoing all of it would turn a small mistake
    /// into a large answer.
    public static let echoedMethodLimit = 64

    private static func clipped(_ method: String) -> String {
        guard method.count > echoedMethodLimit else { return method }
        return "\(method.prefix(echoedMethodLimit))… (\(method.utf8.count) bytes)"
    }

    /// -32602: the method exists but its params are wrong.
    public static func invalidParams(_ detail: String, data: JSONValue? = nil) -> JSONRPCError {
        JSONRPCError(code: -32602, message: "Invalid params: \(detail)", data: data)
    }

    /// -32603: a fault in the server itself, not in the request.
    public static func internalError(_ detail: String) -> JSONRPCError {
        JSONRPCError(code: -32603, message: "Internal error: \(detail)")
    }

    /// `{"code":...,"message":...,"data":...}`, `data` omitted when `nil`.
    public var jsonValue: JSONValue {
        var object: JSONObject = ["code": .integer(code), "message": .string(message)]
        object["data"] = data
        return .object(object)
    }

    /// Writes ``jsonValue`` without building it.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key(literal: "code")
        writer.integer(code)
        writer.key(literal: "message")
        writer.string(message)
        if let data {
            writer.key(literal: "data")
            writer.value(data)
        }
        writer.endObject()
    }
}
