package import JSONRPC

/// Reads an upstream `200` body straight into an ``UpstreamProductsPage``
/// in one pass over its bytes, for the gateway's cold path: no `JSONValue`
/// tree, no member lookups, no paths for messages. Strings are made once,
/// for the values kept; members nobody reads are checked and skipped.
///
/// It only answers when it succeeds, and gives up on everything else:
/// ``UpstreamProductsPage/parse(_:)`` then reads the body the tree-based
/// way, which finds and names the problem. It gives up on every body the
/// tree-based reading refuses, and on a few it accepts (a member that
/// appears twice with a mistyped first value: the tree keeps only the last
/// one), which the tree-based reading then returns. Where it succeeds, it
/// builds the values the tree-based reading builds: a repeated member's
/// last value wins, unknown members are ignored, `null` and absence mean the
/// same for the optional members, and amounts, currencies and periods go
/// through the same initializers.
package struct UpstreamBodyReader {
    private typealias Refusal = JSONScanner.Refusal

    private var scanner: JSONScanner

    /// The page in `body`, or `nil` when the one-pass reading gives up.
    package static func page(from body: [UInt8]) -> UpstreamProductsPage? {
        body.withUnsafeBufferPointer { bytes in
            var reader = UpstreamBodyReader(scanner: JSONScanner(bytes))
            guard let (items, notFound) = try? reader.page({ (reader: inout Self) throws(Refusal) in try reader.products() }) else { return nil }
            return UpstreamProductsPage(items: items, notFound: notFound)
        }
    }

    /// What ``page(from:)`` reads, already normalized and encoded: the
    /// ``UpstreamProductsPage/encodedProducts`` of that page, transcoded
    /// from the body's bytes to the answer's without making a `String` of
    /// any text but the identifiers. `nil` exactly when ``page(from:)``
    /// gives up. This is how the gateway reads every upstream `200`.
    package static func encodedProducts(from body: [UInt8]) -> [String: EncodedJSON]? {
        body.withUnsafeBufferPointer { bytes in
            var reader = UpstreamBodyReader(scanner: JSONScanner(bytes))
            return try? reader.page({ (reader: inout Self) throws(Refusal) in try reader.encodedItems() }).items
        }
    }

    /// `{"items": [...], "not_found": [...]}` and nothing after it, the
    /// items read by `readItems`.
    private mutating func page<Items>(_ readItems: (inout Self) throws(Refusal) -> Items) throws(Refusal) -> (items: Items, notFound: [String]) {
        try scanner.beginObject()
        var items: Items?
        var notFound: [String] = []
        while let name = try scanner.nextMember() {
            switch member(name, PageMember.self) {
            case .items: items = try readItems(&self)
            case .notFound: notFound = try unknownIDs()
            case nil: try scanner.skipValue()
            }
        }
        try scanner.end()
        guard let items else { throw Refusal() }
        return (items, notFound)
    }

    private mutating func products() throws(Refusal) -> [UpstreamProduct] {
        try scanner.beginArray()
        var items: [UpstreamProduct] = []
        while try scanner.nextElement() {
            // Room for a usual page at once: growing 1, 2, 4, 8 cost three
            // more allocations and copies of every product read so far.
            if items.isEmpty { items.reserveCapacity(8) }
            items.append(product(try item()))
        }
        return items
    }

    /// `items` as ``UpstreamProductsPage/encodedProducts`` holds them: by
    /// identifier, the first item with an identifier winning.
    private mutating func encodedItems() throws(Refusal) -> [String: EncodedJSON] {
        try scanner.beginArray()
        var encoded: [String: EncodedJSON] = [:]
        while try scanner.nextElement() {
            if encoded.isEmpty { encoded.reserveCapacity(8) }
            let item = try item()
            let id = scanner.text(of: item.id)
            if encoded[id] == nil {
                encoded[id] = encode(item)
            }
        }
        return encoded
    }

    /// `not_found`: an array of strings, or `null` for none.
    private mutating func unknownIDs() throws(Refusal) -> [String] {
        if try skipNull() { return [] }
        try scanner.beginArray()
        var ids: [String] = []
        while try scanner.nextElement() {
            ids.append(try string())
        }
        return ids
    }

    /// One object of `items`, its texts left in the body.
    private struct Item {
        var id: JSONScanner.StringToken
        var title: JSONScanner.StringToken
        var description: JSONScanner.StringToken
        var iconURL: JSONScanner.StringToken?
        var price: Money
        var subscription: Terms?
    }

    /// A `subscription` object, its group identifier left in the body.
    private struct Terms {
        var period: SubscriptionPeriod
        var groupID: JSONScanner.StringToken?
        var introductoryOffer: UpstreamOffer?
        var discountOffer: UpstreamOffer?
    }

    private mutating func item() throws(Refusal) -> Item {
        try scanner.beginObject()
        var id: JSONScanner.StringToken?
        var title: JSONScanner.StringToken?
        var description: JSONScanner.StringToken?
        var iconURL: JSONScanner.StringToken?
        var price: Money?
        var subscription: Terms?
        while let name = try scanner.nextMember() {
            switch member(name, ProductMember.self) {
            case .id: id = try scanner.string()
            case .title: title = try scanner.string()
            case .description: description = try scanner.string()
            case .iconURL: iconURL = try skipNull() ? nil : try scanner.string()
            case .price: price = try priced(withPeriod: false).price
            case .subscription: subscription = try skipNull() ? nil : try terms()
            case nil: try scanner.skipValue()
            }
        }
        guard let id, let title, let description, let price else { throw Refusal() }
        return Item(id: id, title: title, description: description, iconURL: iconURL, price: price, subscription: subscription)
    }

    /// An item with its texts made strings.
    private mutating func product(_ item: Item) -> UpstreamProduct {
        let subscription = item.subscription.map { terms in
            UpstreamSubscription(
                period: terms.period, groupID: terms.groupID.map { scanner.text(of: $0) },
                introductoryOffer: terms.introductoryOffer, discountOffer: terms.discountOffer
            )
        }
        return UpstreamProduct(
            id: scanner.text(of: item.id), title: scanner.text(of: item.title), description: scanner.text(of: item.description),
            iconURL: item.iconURL.map { scanner.text(of: $0) }, price: item.price, subscription: subscription
        )
    }

    /// An item as ``Product/encoded`` writes the product it normalizes to,
    /// its texts copied from the body (unescaped, then escaped the
    /// writer's way).
    private mutating func encode(_ item: Item) -> EncodedJSON {
        Product.encode(
            identifier: item.id, title: item.title, description: item.description, iconURL: item.iconURL,
            price: item.price, subscriptionPeriod: item.subscription?.period,
            subscriptionGroupIdentifier: item.subscription?.groupID,
            introductoryPrice: item.subscription?.introductoryOffer, discountedPrice: item.subscription?.discountOffer,
            utf8Count: { $0.utf8CountBound },
            write: { token, writer in scanner.withUTF8(of: token) { writer.string(utf8: $0) } }
        )
    }

    private mutating func terms() throws(Refusal) -> Terms {
        try scanner.beginObject()
        var period: SubscriptionPeriod?
        var groupID: JSONScanner.StringToken?
        var introductoryOffer: UpstreamOffer?
        var discountOffer: UpstreamOffer?
        while let name = try scanner.nextMember() {
            switch member(name, SubscriptionMember.self) {
            case .period: period = try formatted { SubscriptionPeriod(iso8601: $0) }
            case .groupID: groupID = try skipNull() ? nil : try scanner.string()
            case .introductoryOffer: introductoryOffer = try offer()
            case .discountOffer: discountOffer = try offer()
            case nil: try scanner.skipValue()
            }
        }
        guard let period else { throw Refusal() }
        return Terms(period: period, groupID: groupID, introductoryOffer: introductoryOffer, discountOffer: discountOffer)
    }

    /// An offer object, or `null` for none.
    private mutating func offer() throws(Refusal) -> UpstreamOffer? {
        if try skipNull() { return nil }
        let offer = try priced(withPeriod: true)
        guard let period = offer.period else { throw Refusal() }
        return UpstreamOffer(price: offer.price, period: period)
    }

    /// An object with `amount` and `currency` (a price), and `period` when
    /// `withPeriod` (an offer, which carries its price in its own members).
    private mutating func priced(withPeriod: Bool) throws(Refusal) -> (price: Money, period: SubscriptionPeriod?) {
        try scanner.beginObject()
        var amount: DecimalAmount?
        var currency: CurrencyCode?
        var period: SubscriptionPeriod?
        while let name = try scanner.nextMember() {
            switch member(name, PriceMember.self) {
            case .amount: amount = try formatted(DecimalAmount.init)
            case .currency: currency = try formatted(CurrencyCode.init)
            // A price has no `period`: there it is an unknown member.
            case .period where withPeriod: period = try formatted { SubscriptionPeriod(iso8601: $0) }
            case .period, nil: try scanner.skipValue()
            }
        }
        guard let amount, let currency else { throw Refusal() }
        return (Money(amount: amount, currency: currency), period)
    }

    /// Which of `Member`'s members `name` is; `nil` for an unknown one.
    private mutating func member<Member: MemberName>(_ name: JSONScanner.StringToken, _: Member.Type) -> Member? {
        scanner.index(of: name, in: Member.names).flatMap(Member.init(rawValue:))
    }

    /// A string value.
    private mutating func string() throws(Refusal) -> String {
        scanner.text(of: try scanner.string())
    }

    /// A string value that `make` accepts.
    private mutating func formatted<Value>(_ make: (String) -> Value?) throws(Refusal) -> Value {
        guard let value = make(try string()) else { throw Refusal() }
        return value
    }

    /// Reads the next value when it is `null`; `false`, reading nothing,
    /// when it is something else.
    private mutating func skipNull() throws(Refusal) -> Bool {
        guard try scanner.peek() == .null else { return false }
        try scanner.skipValue()
        return true
    }
}

/// The members of one object of the body that the reader keeps: case `n`
/// is the member named `names[n]`.
private protocol MemberName: RawRepresentable<Int> {
    static var names: [StaticString] { get }
}

private enum PageMember: Int, MemberName {
    case items, notFound
    static let names: [StaticString] = ["items", "not_found"]
}

private enum ProductMember: Int, MemberName {
    case id, title, description, iconURL, price, subscription
    static let names: [StaticString] = ["id", "title", "description", "icon_url", "price", "subscription"]
}

private enum SubscriptionMember: Int, MemberName {
    case period, groupID, introductoryOffer, discountOffer
    static let names: [StaticString] = ["period", "group_id", "introductory_offer", "discount_offer"]
}

/// A price's members, and an offer's, which adds `period`.
private enum PriceMember: Int, MemberName {
    case amount, currency, period
    static let names: [StaticString] = ["amount", "currency", "period"]
}
