import JSONRPC

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
            return try? reader.page()
        }
    }

    /// `{"items": [...], "not_found": [...]}` and nothing after it.
    private mutating func page() throws(Refusal) -> UpstreamProductsPage {
        try scanner.beginObject()
        var items: [UpstreamProduct]?
        var notFound: [String] = []
        while let name = try scanner.nextMember() {
            switch member(name, PageMember.self) {
            case .items: items = try products()
            case .notFound: notFound = try unknownIDs()
            case nil: try scanner.skipValue()
            }
        }
        try scanner.end()
        guard let items else { throw Refusal() }
        return UpstreamProductsPage(items: items, notFound: notFound)
    }

    private mutating func products() throws(Refusal) -> [UpstreamProduct] {
        try scanner.beginArray()
        var items: [UpstreamProduct] = []
        while try scanner.nextElement() {
            // Room for a usual page at once: growing 1, 2, 4, 8 cost three
            // more allocations and copies of every product read so far.
            if items.isEmpty { items.reserveCapacity(8) }
            items.append(try product())
        }
        return items
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

    private mutating func product() throws(Refusal) -> UpstreamProduct {
        try scanner.beginObject()
        var id: String?
        var title: String?
        var description: String?
        var iconURL: String?
        var price: Money?
        var subscription: UpstreamSubscription?
        while let name = try scanner.nextMember() {
            switch member(name, ProductMember.self) {
            case .id: id = try string()
            case .title: title = try string()
            case .description: description = try string()
            case .iconURL: iconURL = try skipNull() ? nil : try string()
            case .price: price = try priced(withPeriod: false).price
            case .subscription: subscription = try skipNull() ? nil : try terms()
            case nil: try scanner.skipValue()
            }
        }
        guard let id, let title, let description, let price else { throw Refusal() }
        return UpstreamProduct(id: id, title: title, description: description, iconURL: iconURL, price: price, subscription: subscription)
    }

    private mutating func terms() throws(Refusal) -> UpstreamSubscription {
        try scanner.beginObject()
        var period: SubscriptionPeriod?
        var groupID: String?
        var introductoryOffer: UpstreamOffer?
        var discountOffer: UpstreamOffer?
        while let name = try scanner.nextMember() {
            switch member(name, SubscriptionMember.self) {
            case .period: period = try formatted { SubscriptionPeriod(iso8601: $0) }
            case .groupID: groupID = try skipNull() ? nil : try string()
            case .introductoryOffer: introductoryOffer = try offer()
            case .discountOffer: discountOffer = try offer()
            case nil: try scanner.skipValue()
            }
        }
        guard let period else { throw Refusal() }
        return UpstreamSubscription(period: period, groupID: groupID, introductoryOffer: introductoryOffer, discountOffer: discountOffer)
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
