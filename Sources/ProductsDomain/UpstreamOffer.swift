public import JSONRPC

/// An introductory or discount offer: a price for a period.
public struct UpstreamOffer: Sendable, Equatable {
    /// What the offer costs for its period.
    public let price: Money
    /// How long the offer lasts.
    public let period: SubscriptionPeriod

    /// - Parameters:
    ///   - price: What the offer costs.
    ///   - period: How long it lasts.
    public init(price: Money, period: SubscriptionPeriod) {
        self.price = price
        self.period = period
    }

    /// The result's offer shape (`introductoryPrice`, `discountedPrice`):
    /// `{"price": {...}, "period": {...}}`.
    public var jsonValue: JSONValue {
        .object(JSONObject([
            ("price", price.jsonValue),
            ("period", period.jsonValue),
        ]))
    }

    /// Writes ``jsonValue``'s bytes without building it.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key(literal: "price")
        price.write(to: &writer)
        writer.key(literal: "period")
        period.write(to: &writer)
        writer.endObject()
    }
}
