public import JSONRPC

extension UpstreamProductsPage {
    /// The page written as an upstream `200` body (contract section 2), the
    /// inverse of `parse(_:)`; for the mock upstream and for tests. Absent
    /// optional values are written as `null`.
    /// - Parameter country: The body's `country` member.
    public func upstreamBody(country: CountryCode) -> JSONValue {
        .object(JSONObject([
            ("country", .string(country.text)),
            ("items", .array(items.map(Self.body(of:)))),
            ("not_found", .array(notFound.map(JSONValue.string))),
        ]))
    }

    private static func body(of product: UpstreamProduct) -> JSONValue {
        var subscription = JSONValue.null
        if let terms = product.subscription {
            subscription = .object(JSONObject([
                ("period", .string(terms.period.iso8601)),
                ("group_id", terms.groupID.map(JSONValue.string) ?? .null),
                ("introductory_offer", body(of: terms.introductoryOffer)),
                ("discount_offer", body(of: terms.discountOffer)),
            ]))
        }
        return .object(JSONObject([
            ("id", .string(product.id)),
            ("title", .string(product.title)),
            ("description", .string(product.description)),
            ("icon_url", product.iconURL.map(JSONValue.string) ?? .null),
            ("price", body(of: product.price)),
            ("subscription", subscription),
        ]))
    }

    private static func body(of money: Money) -> JSONValue {
        .object(JSONObject([("amount", .string(money.amount.text)), ("currency", .string(money.currency.text))]))
    }

    private static func body(of offer: UpstreamOffer?) -> JSONValue {
        guard let offer else { return .null }
        return .object(JSONObject([
            ("amount", .string(offer.price.amount.text)),
            ("currency", .string(offer.price.currency.text)),
            ("period", .string(offer.period.iso8601)),
        ]))
    }
}
