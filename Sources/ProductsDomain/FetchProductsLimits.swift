/// Limits applied when `products.fetch` params are read.
public struct FetchProductsLimits: Sendable {
    /// Most distinct identifiers in one call (`GATEWAY_MAX_IDS`).
    public var maxIdentifiers: Int

    /// - Parameter maxIdentifiers: Most distinct identifiers in one call; at least 1.
    public init(maxIdentifiers: Int) {
        precondition(maxIdentifiers >= 1, "maxIdentifiers must be at least 1")
        self.maxIdentifiers = maxIdentifiers
    }
}
