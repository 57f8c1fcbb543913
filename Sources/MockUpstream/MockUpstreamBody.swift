import JSONRPC
import ProductsDomain

/// Writes an ``UpstreamProductsPage`` in the upstream's wire shape.
enum MockUpstreamBody {
    static func encode(_ page: UpstreamProductsPage, country: CountryCode) -> JSONValue {
        .object([
            "country": .string(country.text),
            "items": .array(page.items.map(item)),
            "not_found": .array(page.notFound.map { .string($0) }),
        ])
    }

    private static func item(_ product: UpstreamProduct) -> JSONValue {
        var object: JSONObject = [
            "id": .string(product.id),
            "title": .string(product.title),
            "description": .string(product.description),
            "icon_url": product.iconURL.map { .string($0) } ?? .null,
            "price": money(product.price),
        ]
        if let subscription = product.subscription {
            object["subscription"] = .object([
                "period": .string(period(subscription.period)),
                "group_id": subscription.groupID.map { .string($0) } ?? .null,
                "introductory_offer": subscription.introductoryOffer.map(offer) ?? .null,
                "discount_offer": subscription.discountOffer.map(offer) ?? .null,
            ])
        }
        return .object(object)
    }

    private static func money(_ money: Money) -> JSONValue {
        .object(["amount": .string(money.amount.text), "currency": .string(money.currency.text)])
    }

    private static func offer(_ offer: UpstreamOffer) -> JSONValue {
        .object([
            "amount": .string(offer.price.amount.text),
            "currency": .string(offer.price.currency.text),
            "period": .string(period(offer.period)),
        ])
    }

    static func period(_ period: SubscriptionPeriod) -> String {
        let letter: String
        switch period.unit {
        case .day: letter = "D"
        case .week: letter = "W"
        case .month: letter = "M"
        case .year: letter = "Y"
        }
        return "P\(period.numberOfUnits)\(letter)"
    }
}
