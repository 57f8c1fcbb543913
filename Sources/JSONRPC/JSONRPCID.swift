/// A request id, echoed back as the same JSON text.
///
/// Numbers keep their lexeme, so `1.5`, `-0`, `1e400` and
/// `12345678901234567890` return exactly as the client wrote them; a string
/// returns as the same string value (escapes may be written differently).
public enum JSONRPCID: Sendable, Hashable {
    /// A numeric id, as its exact lexeme.
    case number(String)
    /// A string id.
    case string(String)
    /// An explicit `null` id: a real id (the spec discourages it but the
    /// request is still a call, not a notification).
    case null

    /// The id read from a request's `"id"` member, or `nil` when that value
    /// is not a string, a number or `null`.
    public init?(jsonValue: JSONValue) {
        switch jsonValue {
        case .number(let text): self = .number(text)
        case .string(let text): self = .string(text)
        case .null: self = .null
        case .bool, .array, .object, .encoded: return nil
        }
    }

    /// The id as it goes into a response.
    public var jsonValue: JSONValue {
        switch self {
        case .number(let text): .number(text)
        case .string(let text): .string(text)
        case .null: .null
        }
    }

    /// Writes the id as it goes into a response, the same bytes as
    /// ``jsonValue`` serializes to, without building a value.
    public func write(to writer: inout JSONWriter) {
        switch self {
        case .number(let text): writer.number(text)
        case .string(let text): writer.string(text)
        case .null: writer.null()
        }
    }
}
