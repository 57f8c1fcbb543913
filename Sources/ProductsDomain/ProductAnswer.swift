public import JSONRPC

/// What is known of one requested identifier: its product, normalised and
/// encoded once (``Product/encoded``), or that the upstream does not know
/// it. The cache keeps these, and a call's result is written from them.
public enum ProductAnswer: Sendable, Equatable {
    /// The product's result item, encoded.
    case product(EncodedJSON)
    /// The upstream reported the identifier as unknown.
    case unknown

    /// The most bytes one product's encoded result item may have, wherever
    /// it comes from (the upstream, a shared-tier entry, an outcome
    /// message): 64 KiB, where a product is a few hundred bytes. Anything
    /// that can write to the upstream's answers or to Redis could otherwise
    /// make every answer that names an identifier as large as it likes (24
    /// entries of 1 MiB made one answer 25 MB, and slow readers of such
    /// answers a replica's memory grow past its limit). A larger product is
    /// not one: from the upstream its identifier is unknown, from Redis the
    /// entry or message is refused as damaged.
    public static let maxProductBytes = 64 << 10

    /// The product's bytes; `nil` for an unknown identifier.
    public var product: EncodedJSON? {
        if case .product(let json) = self { return json }
        return nil
    }
}
