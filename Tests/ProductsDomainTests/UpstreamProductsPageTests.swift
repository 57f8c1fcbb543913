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
    private func body(item itemMembers: String) -> String {
        #"{"items":[{"id":"x",\#(itemMembers)}]}"#
    }

    private let basics = #""title":"T","description":"D","price":{"amount":"1.00","currency":"EUR"}"#

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
        let absent = try parse(body(item: basics))
        let nulls = try parse(body(item: basics + #","icon_url":null,"subscription":null"#))
        for page in [absent, nulls] {
            #expect(page.items[0].iconURL == nil)
            #expect(page.items[0].subscription == nil)
            #expect(page.notFound == [])
        }
        let bareSubscription = try parse(body(item: basics + #","subscription":{"period":"P1Y"}"#))
        #expect(bareSubscription.items[0].subscription == UpstreamSubscription(period: SubscriptionPeriod(iso8601: "P1Y")!))
        let nullOffers = try parse(body(item: basics + #","subscription":{"period":"P1Y","group_id":null,"introductory_offer":null,"discount_offer":null}"#))
        #expect(nullOffers.items[0].subscription == bareSubscription.items[0].subscription)
    }

    @Test func discountOfferAndLowerCaseCurrency() throws {
        let page = try parse(body(item: #""title":"T","description":"D","price":{"amount":"39.99","currency":"eur"},"subscription":{"period":"P1Y","discount_offer":{"amount":"29.99","currency":"eur","period":"P1Y"}}"#))
        #expect(page.items[0].price.currency.text == "EUR")
        #expect(page.items[0].subscription?.discountOffer == UpstreamOffer(price: Money(amount: DecimalAmount("29.99")!, currency: CurrencyCode("EUR")!), period: SubscriptionPeriod(iso8601: "P1Y")!))
    }

    @Test func emptyPage() throws {
        #expect(try parse(#"{"items":[],"not_found":["a","b"]}"#) == UpstreamProductsPage(items: [], notFound: ["a", "b"]))
    }

    @Test(arguments: [
        ("[]", "body: expected an object, got an array"),
        ("{}", "items: missing (expected an array)"),
        (#"{"items":{}}"#, "items: expected an array, got an object"),
        (#"{"items":[1]}"#, "items[0]: expected an object, got a number"),
        (#"{"items":[],"not_found":"a"}"#, "not_found: expected an array, got a string"),
        (#"{"items":[],"not_found":["a",7]}"#, "not_found[1]: expected a string, got a number"),
        (#"{"items":[{"title":"T","description":"D","price":{"amount":"1","currency":"EUR"}}]}"#, "items[0].id: missing (expected a string)"),
        (#"{"items":[{"id":5,"title":"T","description":"D","price":{"amount":"1","currency":"EUR"}}]}"#, "items[0].id: expected a string, got a number"),
    ])
    func badShape(text: String, message: String) {
        #expect(failure(text) == message)
    }

    @Test(arguments: [
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
    ])
    func badItem(members: String, message: String) {
        #expect(failure(body(item: members)) == message)
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
}
