/// One product of a `Catalog`, with its prices for every country it is sold in.
struct CatalogProduct: Sendable {
    /// A title and description in one language.
    struct Localization: Sendable {
        let title: String
        let description: String
    }

    /// An introductory or discount offer, priced per country.
    struct Offer: Sendable {
        let period: SubscriptionPeriod
        let prices: [CountryCode: Money]

        func upstream(in country: CountryCode) -> UpstreamOffer? {
            prices[country].map { UpstreamOffer(price: $0, period: period) }
        }
    }

    /// Subscription terms, with offers priced per country.
    struct Subscription: Sendable {
        let period: SubscriptionPeriod
        let groupID: String?
        let introductoryOffer: Offer?
        let discountOffer: Offer?
    }

    let id: String
    let iconURL: String?
    /// Keyed by the canonical text of a language tag (`en`, `pt-BR`).
    let localizations: [String: Localization]
    let prices: [CountryCode: Money]
    let subscription: Subscription?

    /// The product as the upstream would describe it for `country`, or `nil` when it is not sold there.
    /// - Parameters:
    ///   - country: The region.
    ///   - localization: The already chosen title and description.
    func upstream(in country: CountryCode, localization: Localization) -> UpstreamProduct? {
        guard let price = prices[country] else { return nil }
        return UpstreamProduct(
            id: id,
            title: localization.title,
            description: localization.description,
            iconURL: iconURL,
            price: price,
            subscription: subscription.map { terms in
                UpstreamSubscription(
                    period: terms.period,
                    groupID: terms.groupID,
                    introductoryOffer: terms.introductoryOffer?.upstream(in: country),
                    discountOffer: terms.discountOffer?.upstream(in: country)
                )
            }
        )
    }
}
