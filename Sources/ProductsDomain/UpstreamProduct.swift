/// One item of an upstream `200` body, as the upstream described it.
public struct UpstreamProduct: Sendable, Equatable {
    /// The product identifier.
    public let id: String
    /// The localized title.
    public let title: String
    /// The localized description.
    public let description: String
    /// The icon's address, if any.
    public let iconURL: String?
    /// The price in the requested country.
    public let price: Money
    /// The subscription terms; `nil` for a one-time product.
    public let subscription: UpstreamSubscription?

    /// - Parameters:
    ///   - id: The product identifier.
    ///   - title: The localized title.
    ///   - description: The localized description.
    ///   - iconURL: The icon's address, if any.
    ///   - price: The price in the requested country.
    ///   - subscription: The subscription terms, or `nil` for a one-time product.
    public init(id: String, title: String, description: String, iconURL: String? = nil, price: Money, subscription: UpstreamSubscription? = nil) {
        self.id = id
        self.title = title
        self.description = description
        self.iconURL = iconURL
        self.price = price
        self.subscription = subscription
    }
}
