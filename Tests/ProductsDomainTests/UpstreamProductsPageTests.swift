import JSONRPC
import ProductsDomain
import Testing

@Suite("Upstream body parsing")
struct UpstreamProductsPageTests {
    /// The `200` body of contract section 2.
    static let contractBody = #"""
    {
      "country": "DE",
      "items": [
        {
          "id": "premium_monthly",
          "title": "Premium",
          "description": "All features, billed monthly",
          "icon_url": "https://cdn.example.com/premium.png",
          "price": { "amount": "4.99", "currency": "EUR" },
          "subscription": {
            "period": "P1M",
            "group_id": "premium",
            "introductory_offer": { "amount": "0.00", "currency": "EUR", "period": "P1W" },
            "discount_offer": null
          }
        }
      ],
      "not_found": ["retired_pack"]
    }
    """#

    static let premiumMonthly = UpstreamProduct(
        id: "premium_monthly",
        title: "Premium",
        description: "All features, billed monthly",
        iconURL: "https://cdn.example.com/premium.png",
        price: Money(amount: DecimalAmount("4.99")!, currency: CurrencyCode("EUR")!),
        subscription: UpstreamSubscription(
            period: SubscriptionPeriod(iso8601: "P1M")!,
            groupID: "premium",
            introductoryOffer: UpstreamOffer(
                price: Money(amount: DecimalAmount("0.00")!, currency: CurrencyCode("EUR")!),
                period: SubscriptionPeriod(iso8601: "P1W")!
            ),
            discountOffer: nil
        )
    )

    private func parse(_ text: String) throws(UpstreamBodyError) -> UpstreamProductsPage {
        try UpstreamProductsPage.parse(Array(text.utf8))
    }

    private func failure(_ text: String) -> String? {
        #expect(throws: UpstreamBodyError.self) { try parse(text) }?.message
    }

    /// A body with one item whose members are `itemMembers` after `"id":"x"`.
    static func body(item itemMembers: String) -> String {
        #"{"items":[{"id":"x",\#(itemMembers)}]}"#
    }

    static let basics = #""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"}"#

    @Test func contractExample() throws {
        let page = try parse(Self.contractBody)
        #expect(page == UpstreamProductsPage(items: [Self.premiumMonthly], notFound: ["retired_pack"]))
    }

    @Test func unknownKeysAreIgnored() throws {
        let page = try parse(#"""
        {"items":[{"id":"x","title":"T","description":"D","price":{"amount":"1.00","currency":"EUR","tax":"0.19"},
          "rating":5,"subscription":{"period":"P1M","trial":true,"introductory_offer":{"amount":"0.00","currency":"EUR","period":"P3D","kind":"free"}}}],
         "not_found":[],"next_page":null,"meta":{"v":2}}
        """#)
        #expect(page.items.count == 1)
        #expect(page.items[0].subscription?.introductoryOffer?.period == SubscriptionPeriod(iso8601: "P3D"))
    }

    @Test func optionalMembersMayBeNullOrAbsent() throws {
        let absent = try parse(Self.body(item: Self.basics))
        let nulls = try parse(Self.body(item: Self.basics + #","icon_url":null,"subscription":null"#))
        for page in [absent, nulls] {
            #expect(page.items[0].iconURL == nil)
            #expect(page.items[0].subscription == nil)
            #expect(page.notFound == [])
        }
        let bareSubscription = try parse(Self.body(item: Self.basics + #","subscription":{"period":"P1Y"}"#))
        #expect(bareSubscription.items[0].subscription == UpstreamSubscription(period: SubscriptionPeriod(iso8601: "P1Y")!))
        let nullOffers = try parse(Self.body(item: Self.basics + #","subscription":{"period":"P1Y","group_id":null,"introductory_offer":null,"discount_offer":null}"#))
        #expect(nullOffers.items[0].subscription == bareSubscription.items[0].subscription)
    }

    @Test func discountOfferAndLowerCaseCurrency() throws {
        let page = try parse(Self.body(item: #""title":"T","description":"D","price":{"amount":"39.99","currency":"eur"},"subscription":{"period":"P1Y","discount_offer":{"amount":"29.99","currency":"eur","period":"P1Y"}}"#))
        #expect(page.items[0].price.currency.text == "EUR")
        #expect(page.items[0].subscription?.discountOffer == UpstreamOffer(price: Money(amount: DecimalAmount("29.99")!, currency: CurrencyCode("EUR")!), period: SubscriptionPeriod(iso8601: "P1Y")!))
    }

    @Test func emptyPage() throws {
        #expect(try parse(#"{"items":[],"not_found":["a","b"]}"#) == UpstreamProductsPage(items: [], notFound: ["a", "b"]))
    }

    /// Bodies refused for their shape, with the message.
    static let badShapes: [(String, String)] = [
        ("[]", "body: expected an object, got an array"),
        ("{}", "items: missing (expected an array)"),
        (#"{"items":{}}"#, "items: expected an array, got an object"),
        (#"{"items":[1]}"#, "items[0]: expected an object, got a number"),
        (#"{"items":[],"not_found":"a"}"#, "not_found: expected an array, got a string"),
        (#"{"items":[],"not_found":["a",7]}"#, "not_found[1]: expected a string, got a number"),
        (#"{"items":[{"title":"T","description":"D","price":{"amount":"1","currency":"EUR"}}]}"#, "items[0].id: missing (expected a string)"),
        (#"{"items":[{"id":5,"title":"T","description":"D","price":{"amount":"1","currency":"EUR"}}]}"#, "items[0].id: expected a string, got a number"),
    ]

    @Test(arguments: badShapes)
    func badShape(text: String, message: String) {
        #expect(failure(text) == message)
    }

    /// Members after `"id":"x"` of the one item of a body (see ``body(item:)``) that make it refused, with the message.
    static let badItems: [(String, String)] = [
        (#""description":"D","price":{"amount":"1.00","currency":"EUR"}"#, "items[0].title: missing (expected a string)"),
        (#""title":null,"description":"D","price":{"amount":"1.00","currency":"EUR"}"#, "items[0].title: expected a string, got null"),
        (#""title":"T","description":true,"price":{"amount":"1.00","currency":"EUR"}"#, "items[0].description: expected a string, got a boolean"),
        (#""title":"T","description":"D""#, "items[0].price: missing (expected an object)"),
        (#""title":"T","description":"D","price":"4.99""#, "items[0].price: expected an object, got a string"),
        (#""title":"T","description":"D","price":{"currency":"EUR"}"#, #"items[0].price.amount: missing (expected a decimal string such as "4.99")"#),
        (#""title":"T","description":"D","price":{"amount":4.99,"currency":"EUR"}"#, #"items[0].price.amount: expected a decimal string such as "4.99", got a number"#),
        (#""title":"T","description":"D","price":{"amount":"4,99","currency":"EUR"}"#, #"items[0].price.amount: expected a decimal string such as "4.99", got "4,99""#),
        (#""title":"T","description":"D","price":{"amount":"-1.00","currency":"EUR"}"#, #"items[0].price.amount: expected a decimal string such as "4.99", got "-1.00""#),
        (#""title":"T","description":"D","price":{"amount":"1.00"}"#, "items[0].price.currency: missing (expected a three-letter ISO 4217 currency code)"),
        (#""title":"T","description":"D","price":{"amount":"1.00","currency":"EURO"}"#, #"items[0].price.currency: expected a three-letter ISO 4217 currency code, got "EURO""#),
        (#""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"},"icon_url":5"#, "items[0].icon_url: expected a string, got a number"),
        (#""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"},"subscription":"P1M""#, "items[0].subscription: expected an object, got a string"),
        (#""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"},"subscription":{}"#, "items[0].subscription.period: missing (expected an ISO 8601 period PnD, PnW, PnM or PnY with n from 1 to 9999)"),
        (#""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"},"subscription":{"period":"P1M2D"}"#, #"items[0].subscription.period: expected an ISO 8601 period PnD, PnW, PnM or PnY with n from 1 to 9999, got "P1M2D""#),
        (#""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"},"subscription":{"period":"P1M","group_id":1}"#, "items[0].subscription.group_id: expected a string, got a number"),
        (#""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"},"subscription":{"period":"P1M","introductory_offer":{"amount":"0.00","currency":"EUR","period":"P0W"}}"#, #"items[0].subscription.introductory_offer.period: expected an ISO 8601 period PnD, PnW, PnM or PnY with n from 1 to 9999, got "P0W""#),
        (#""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"},"subscription":{"period":"P1M","discount_offer":{"currency":"EUR","period":"P1M"}}"#, #"items[0].subscription.discount_offer.amount: missing (expected a decimal string such as "4.99")"#),
    ]

    @Test(arguments: badItems)
    func badItem(members: String, message: String) {
        #expect(failure(Self.body(item: members)) == message)
    }

    @Test func pathNamesTheItemIndex() {
        let good = #"{"id":"a","title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"}}"#
        let bad = #"{"id":"c","title":"T","description":"D","price":{"amount":"x","currency":"EUR"}}"#
        #expect(failure(#"{"items":[\#(good),\#(good),\#(bad)]}"#) == #"items[2].price.amount: expected a decimal string such as "4.99", got "x""#)
    }

    @Test func invalidJSON() {
        let message = failure(#"{"items":[}"#)
        #expect(message?.hasPrefix("body: not valid JSON (") == true)
        #expect(failure("") != nil)
    }

    @Test func upstreamBodyRoundTrips() throws {
        let page = UpstreamProductsPage(items: [Self.premiumMonthly], notFound: ["retired_pack"])
        let body = page.upstreamBody(country: CountryCode("DE")!)
        #expect(try UpstreamProductsPage.parse(body.serialized()) == page)
        #expect(body == (try json(Self.contractBody)))
    }

    // MARK: - What the one-pass reading must keep exactly

    /// A product with the basic members and `title`, for the tests below.
    private static func item(id: String = "x", title: String) -> UpstreamProduct {
        UpstreamProduct(id: id, title: title, description: "D", price: Money(amount: DecimalAmount("1.00")!, currency: CurrencyCode("EUR")!))
    }

    @Test func aRepeatedMemberKeepsItsLastValue() throws {
        #expect(try parse(#"{"items":[{"id":"a"}],"not_found":["z"],"items":[],"not_found":null}"#) == UpstreamProductsPage(items: [], notFound: []))
        let titles = try parse(Self.body(item: Self.basics + #","title":"Second","icon_url":"https://a","icon_url":null"#))
        #expect(titles.items == [Self.item(title: "Second")])
        // The first value is never read, so its type does not matter.
        let retyped = try parse(Self.body(item: #""title":5,"description":"D","price":"4.99","price":{"amount":"1.00","currency":"EUR"},"title":"T""#))
        #expect(retyped.items == [Self.item(title: "T")])
        let offers = try parse(Self.body(item: Self.basics + #","subscription":{"period":"P1M","discount_offer":{"amount":"x"},"discount_offer":null,"period":"P2M"}"#))
        #expect(offers.items[0].subscription == UpstreamSubscription(period: SubscriptionPeriod(iso8601: "P2M")!))
        // The last value decides even when it is the wrong one.
        #expect(failure(Self.body(item: Self.basics + #","title":null"#)) == "items[0].title: expected a string, got null")
    }

    @Test func escapedNamesAndValuesAreReadUnescaped() throws {
        let page = try parse(#"""
        {"\u0069tems":[{"id":"caf\u00e9","\u0074itle":"\"q\" \\ \/ \b\f\n\r\t \ud83d\ude00 \u0000 \u20ac","description":"Münzen €",
          "price":{"amount":"1\u002e00","currency":"e\u0055r"}}],"not_found":["\u00e9t\u00e9"]}
        """#)
        #expect(page.items[0].id.utf8.elementsEqual("caf\u{E9}".utf8))
        #expect(page.items[0].title.utf8.elementsEqual("\"q\" \\ / \u{8}\u{C}\n\r\t \u{1F600} \u{0} \u{20AC}".utf8))
        #expect(page.items[0].description == "Münzen €")
        #expect(page.items[0].price == Money(amount: DecimalAmount("1.00")!, currency: CurrencyCode("EUR")!))
        #expect(page.notFound == ["été"])
        // A name that is not one of the known ones once unescaped is ignored.
        #expect(failure(#"{"item\u0073x":[]}"#) == "items: missing (expected an array)")
    }

    @Test func manyMembersAndWhitespace() throws {
        let unknown = (0 ..< 20).map { #""k\#($0)":[\#($0),{"a":null}]"# }.joined(separator: ",")
        let page = try parse(" \n\t{ \r\n" + unknown + #" , "items" : [ { "id" : "a" , "title" : "A" , "title" : "B" , "description" : "D" , "price" : { "amount" : "1.00" , "currency" : "EUR" } , "# + unknown + " } ] }\n ")
        #expect(page.items == [Self.item(id: "a", title: "B")])
    }

    @Test(arguments: [
        (#"{"items":[]} x"#, "body: not valid JSON (unexpected character 'x' at byte 13 after the JSON value)"),
        (#"{"items":[]}{}"#, "body: not valid JSON (unexpected character '{' at byte 12 after the JSON value)"),
        (#"{"items":[],"meta":[1,]}"#, "body: not valid JSON (unexpected character ']' at byte 22, expected a value)"),
        (#"{"items":[],"meta":{"a":01}}"#, "body: not valid JSON (leading zeros are not allowed in numbers at byte 24)"),
        (#"{"items":[],"meta":"\ud800"}"#, #"body: not valid JSON (lone surrogate \uD800 in a string at byte 20)"#),
        (#"{"items":[],"meta":"\x"}"#, #"body: not valid JSON (invalid escape '\x' in a string at byte 20)"#),
        (#"{"items":[],"meta":tru}"#, "body: not valid JSON (unexpected character '}' at byte 22, expected 'true')"),
        (#"{"items":[{"id":"x",}]}"#, "body: not valid JSON (unexpected character '}' at byte 20, expected a member name in double quotes)"),
        (#"{"items":[{"id":"x","price":{"amount":"1.00","currency":"EUR"}"#, "body: not valid JSON (unexpected end of input at byte 62, expected ',' or '}')"),
        ("", "body: not valid JSON (unexpected end of input at byte 0, expected a value)"),
        ("\u{FEFF}{}", "body: not valid JSON (unexpected byte 0xEF at byte 0, expected a value)"),
    ])
    func invalidJSONAnywhereIsRefused(text: String, message: String) {
        #expect(failure(text) == message)
    }

    @Test func invalidUTF8IsRefused() throws {
        for bytes: [UInt8] in [[0xC3, 0x28], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC0, 0xAF], [0x80]] {
            let body = Array(#"{"items":[],"meta":""#.utf8) + bytes + Array(#""}"#.utf8)
            #expect(throws: UpstreamBodyError(message: "body: not valid JSON (invalid UTF-8 at byte 20)")) { try UpstreamProductsPage.parse(body) }
        }
        let valid = Array(#"{"items":[],"not_found":[""#.utf8) + [0xF0, 0x9F, 0x98, 0x80, 0xE2, 0x82, 0xAC] + Array(#""]}"#.utf8)
        #expect(try UpstreamProductsPage.parse(valid).notFound == ["\u{1F600}\u{20AC}"])
    }

    /// The root object and the unknown member's arrays count: 64 containers
    /// open at once are accepted, 65 are not, wherever they are.
    @Test func nestingIsLimitedTo64Levels() throws {
        func nested(_ depth: Int) -> String {
            String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        }
        #expect(try parse(#"{"items":[],"meta":\#(nested(63))}"#).items == [])
        #expect(failure(#"{"items":[],"meta":\#(nested(64))}"#) == "body: not valid JSON (nesting deeper than 64 levels at byte 82)")
        // Items (2), the item (3), its price (4): 60 more levels inside the price.
        #expect(try parse(Self.body(item: #""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR","x":\#(nested(60))}"#)).items.count == 1)
        #expect(failure(Self.body(item: #""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR","x":\#(nested(61))}"#))?.hasPrefix("body: not valid JSON (nesting deeper than 64 levels") == true)
    }
}
