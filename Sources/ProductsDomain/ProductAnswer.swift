public import JSONRPC

/// What is known of one requested identifier: its product, normalised and
/// encoded once (``Product/encoded``), or that the upstream does not know
/// it. The cache keeps these, and a call's result is written from them.
public enum ProductAnswer: Sendable, Equatable {
    /// The product's result item, encoded.
    case product(EncodedJSON)
    /// The upstream reported the identifier as unknown.
    case unknown

    /// The product's bytes; `nil` for an unknown identifier.
    public var product: EncodedJSON? {
        if case .product(let json) = self { return json }
        return nil
    }
}
