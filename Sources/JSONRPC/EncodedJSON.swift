/// One JSON value already written as compact UTF-8 text by ``JSONWriter``.
///
/// The gateway encodes what it answers over and over (a normalised product,
/// say) once, keeps the bytes, and splices them into later answers with
/// ``JSONWriter/encoded(_:)`` or as a ``JSONValue/encoded(_:)`` result.
///
/// Invariant: the bytes are exactly what ``JSONWriter`` wrote for one
/// complete value, so they are valid JSON text with the writer's escaping
/// rules and splicing them cannot break the text around them. That is why
/// there is no public initializer that trusts arbitrary bytes: the ways to
/// make one are ``JSONWriter/finish()``, ``init(_:)``, which serializes a
/// tree, and ``init(validating:maxDepth:)``, which takes bytes from
/// elsewhere only after checking they are exactly the writer's form.
public struct EncodedJSON: Sendable, Hashable {
    /// The compact JSON text.
    public let bytes: [UInt8]

    /// Bytes that a ``JSONWriter`` wrote for one complete value.
    init(writtenBytes: [UInt8]) {
        self.bytes = writtenBytes
    }

    /// `value` serialized, as ``JSONValue/serialized()`` writes it.
    public init(_ value: JSONValue) {
        self.bytes = value.serialized()
    }

    /// The text, for messages and tests.
    public var text: String {
        String(decoding: bytes, as: UTF8.self)
    }
}
