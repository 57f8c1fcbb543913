public import JSONRPC

/// An amount in a currency.
public struct Money: Sendable, Equatable {
    /// The amount, with the upstream's exact digits.
    public let amount: DecimalAmount
    /// The currency.
    public let currency: CurrencyCode

    /// - Parameters:
    ///   - amount: The amount.
    ///   - currency: The currency.
    public init(amount: DecimalAmount, currency: CurrencyCode) {
        self.amount = amount
        self.currency = currency
    }

    /// The result's price shape: `{"value": 4.99, "currencyCode": "EUR"}`.
    public var jsonValue: JSONValue {
        .object(JSONObject([
            ("value", amount.jsonValue),
            ("currencyCode", .string(currency.text)),
        ]))
    }

    /// Writes ``jsonValue``'s bytes without building it.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key(literal: "value")
        writer.number(amount.text)
        writer.key(literal: "currencyCode")
        writer.string(currency.text)
        writer.endObject()
    }
}
