/// Why a byte sequence is not the JSON text ``JSONParser`` accepts.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The zero-based byte offset where the input stopped being acceptable
    /// (the input's length when it ended too early).
    public let offset: Int
    /// What went wrong, written for a person and naming the offset, e.g.
    /// `unexpected character 'x' at byte 12, expected a value`.
    public let message: String

    /// An error at `offset` with `message`.
    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    /// The message.
    public var description: String {
        message
    }
}
