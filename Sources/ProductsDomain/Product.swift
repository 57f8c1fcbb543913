public import JSONRPC

/// One product of a `products.fetch` result, normalized from the upstream's description.
public struct Product: Sendable, Equatable {
    /// The product identifier.
    public let productIdentifier: String
    /// The title in the requested language (as far as the upstream had it).
    public let localizedTitle: String
    /// The description in the requested language.
    public let localizedDescription: String
    /// The icon's address, if any.
    public let iconURL: String?
    /// The price in the resolved region.
    public let price: Money
    /// The renewal period; non-`nil` exactly when the product is a subscription.
    public let subscriptionPeriod: SubscriptionPeriod?
    /// The subscription group, if any.
    public let subscriptionGroupIdentifier: String?
    /// The introductory offer, if any.
    public let introductoryPrice: UpstreamOffer?
    /// The discount offer, if any.
    public let discountedPrice: UpstreamOffer?

    /// Normalizes an upstream item: names change to the public API's, the rest is carried as is.
    public init(_ upstream: UpstreamProduct) {
        self.productIdentifier = upstream.id
        self.localizedTitle = upstream.title
        self.localizedDescription = upstream.description
        self.iconURL = upstream.iconURL
        self.price = upstream.price
        self.subscriptionPeriod = upstream.subscription?.period
        self.subscriptionGroupIdentifier = upstream.subscription?.groupID
        self.introductoryPrice = upstream.subscription?.introductoryOffer
        self.discountedPrice = upstream.subscription?.discountOffer
    }

    /// The product as a result item: every key present, `null` where the product
    /// has no value, in the order of the contract's example.
    public var jsonValue: JSONValue {
        .object(JSONObject([
            ("productIdentifier", .string(productIdentifier)),
            ("localizedTitle", .string(localizedTitle)),
            ("localizedDescription", .string(localizedDescription)),
            ("iconUrl", iconURL.map(JSONValue.string) ?? .null),
            ("price", price.jsonValue),
            ("subscriptionPeriod", subscriptionPeriod?.jsonValue ?? .null),
            ("subscriptionGroupIdentifier", subscriptionGroupIdentifier.map(JSONValue.string) ?? .null),
            ("introductoryPrice", introductoryPrice?.jsonValue ?? .null),
            ("discountedPrice", discountedPrice?.jsonValue ?? .null),
        ]))
    }

    /// The result item encoded once: the same bytes as
    /// `jsonValue.serialized()`, written without building the tree. The
    /// gateway keeps these bytes (in the cache, in a fetched page) and
    /// splices them into every answer that needs the product.
    public var encoded: EncodedJSON {
        Self.encode(
            identifier: productIdentifier, title: localizedTitle, description: localizedDescription, iconURL: iconURL,
            price: price, subscriptionPeriod: subscriptionPeriod, subscriptionGroupIdentifier: subscriptionGroupIdentifier,
            introductoryPrice: introductoryPrice, discountedPrice: discountedPrice,
            utf8Count: { $0.utf8.count }, write: { text, writer in writer.string(text) }
        )
    }

    /// ``encoded`` from the parts of a product, whatever holds its texts:
    /// the strings of a normalized ``Product``, or the bytes of an upstream
    /// body that ``UpstreamBodyReader`` transcodes without making strings.
    /// `utf8Count` is (at least) the UTF-8 length of a text; `write` writes
    /// one as a JSON string.
    static func encode<Text>(
        identifier: Text, title: Text, description: Text, iconURL: Text?,
        price: Money, subscriptionPeriod: SubscriptionPeriod?, subscriptionGroupIdentifier: Text?,
        introductoryPrice: UpstreamOffer?, discountedPrice: UpstreamOffer?,
        utf8Count: (Text) -> Int, write: (Text, inout JSONWriter) -> Void
    ) -> EncodedJSON {
        // Sized for the text below, so the bytes kept in the cache carry
        // little unused capacity: member names and punctuation with `null`
        // or quotes take about 210 bytes, a price 31 plus its digits, a
        // period 37, an offer 88 plus its price's digits. Only strings that
        // need escapes make the buffer grow.
        var capacity = 210 + utf8Count(identifier) + utf8Count(title) + utf8Count(description)
            + (iconURL.map(utf8Count) ?? 0) + (subscriptionGroupIdentifier.map(utf8Count) ?? 0)
            + 31 + price.amount.text.utf8.count
        if subscriptionPeriod != nil { capacity += 37 }
        if let introductoryPrice { capacity += 88 + introductoryPrice.price.amount.text.utf8.count }
        if let discountedPrice { capacity += 88 + discountedPrice.price.amount.text.utf8.count }
        var writer = JSONWriter(reservingCapacity: capacity)
        writer.beginObject()
        writer.key(literal: "productIdentifier")
        write(identifier, &writer)
        writer.key(literal: "localizedTitle")
        write(title, &writer)
        writer.key(literal: "localizedDescription")
        write(description, &writer)
        writer.key(literal: "iconUrl")
        if let iconURL { write(iconURL, &writer) } else { writer.null() }
        writer.key(literal: "price")
        price.write(to: &writer)
        writer.key(literal: "subscriptionPeriod")
        if let subscriptionPeriod { subscriptionPeriod.write(to: &writer) } else { writer.null() }
        writer.key(literal: "subscriptionGroupIdentifier")
        if let subscriptionGroupIdentifier { write(subscriptionGroupIdentifier, &writer) } else { writer.null() }
        writer.key(literal: "introductoryPrice")
        if let introductoryPrice { introductoryPrice.write(to: &writer) } else { writer.null() }
        writer.key(literal: "discountedPrice")
        if let discountedPrice { discountedPrice.write(to: &writer) } else { writer.null() }
        writer.endObject()
        return writer.finish()
    }
}
