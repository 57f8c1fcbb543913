import JSONRPC
import ProductsDomain
import Testing

@Suite("Normalization and result assembly")
struct ProductsResultTests {
    /// The result example of contract section 1, verbatim.
    static let contractResult = #"""
    {
      "products": [
        {
          "productIdentifier": "premium_monthly",
          "localizedTitle": "Premium",
          "localizedDescription": "All features, billed monthly",
          "iconUrl": "https://cdn.example.com/premium.png",
          "price": { "value": 4.99, "currencyCode": "EUR" },
          "subscriptionPeriod": { "unit": "month", "numberOfUnits": 1 },
          "subscriptionGroupIdentifier": "premium",
          "introductoryPrice": {
            "price": { "value": 0.00, "currencyCode": "EUR" },
            "period": { "unit": "week", "numberOfUnits": 1 }
          },
          "discountedPrice": null
        }
      ],
      "invalidProductIdentifiers": ["retired_pack"],
      "region": { "countryCode": "DE", "source": "explicit" }
    }
    """#

    static let contractResultText = #"{"products":[{"productIdentifier":"premium_monthly","localizedTitle":"Premium","localizedDescription":"All features, billed monthly","iconUrl":"https://cdn.example.com/premium.png","price":{"value":4.99,"currencyCode":"EUR"},"subscriptionPeriod":{"unit":"month","numberOfUnits":1},"subscriptionGroupIdentifier":"premium","introductoryPrice":{"price":{"value":0.00,"currencyCode":"EUR"},"period":{"unit":"week","numberOfUnits":1}},"discountedPrice":null}],"invalidProductIdentifiers":["retired_pack"],"region":{"countryCode":"DE","source":"explicit"}}"#

    static let germany = ResolvedRegion(countryCode: CountryCode("DE")!, source: .explicit)

    static func found(_ page: UpstreamProductsPage) -> [String: Product] {
        page.productsByID
    }

    @Test func contractExampleRoundTrip() throws {
        let page = try UpstreamProductsPage.parse(Array(UpstreamProductsPageTests.contractBody.utf8))
        let result = ProductsResult(requested: ["premium_monthly", "retired_pack"], found: Self.found(page), region: Self.germany)
        // Equality of JSONValue is textual and ordered: same keys, same order, same number digits.
        #expect(result.jsonValue == (try json(Self.contractResult)))
        #expect(result.jsonValue.serializedString == Self.contractResultText)
    }

    private func money(_ amount: String, _ currency: String) -> Money {
        Money(amount: DecimalAmount(amount)!, currency: CurrencyCode(currency)!)
    }

    @Test func pricesKeepTheUpstreamsDigits() {
        for (amount, expected) in [("9.99", #"{"value":9.99,"currencyCode":"USD"}"#), ("0.00", #"{"value":0.00,"currencyCode":"USD"}"#), ("1200", #"{"value":1200,"currencyCode":"USD"}"#), ("4.990", #"{"value":4.990,"currencyCode":"USD"}"#)] {
            #expect(money(amount, "usd").jsonValue.serializedString == expected)
        }
    }

    @Test func oneTimeProductHasEveryKeyWithNulls() {
        let product = Product(UpstreamProduct(id: "coins_1200", title: "1200 Coins", description: "Chest", iconURL: nil, price: money("1200", "JPY"), subscription: nil))
        #expect(product.jsonValue.serializedString == #"{"productIdentifier":"coins_1200","localizedTitle":"1200 Coins","localizedDescription":"Chest","iconUrl":null,"price":{"value":1200,"currencyCode":"JPY"},"subscriptionPeriod":null,"subscriptionGroupIdentifier":null,"introductoryPrice":null,"discountedPrice":null}"#)
    }

    @Test func subscriptionWithoutGroupOrOffers() {
        let product = Product(UpstreamProduct(
            id: "boost_7days", title: "Boost", description: "Every 7 days", price: money("0.99", "EUR"),
            subscription: UpstreamSubscription(period: SubscriptionPeriod(iso8601: "P7D")!)
        ))
        #expect(product.jsonValue.serializedString == #"{"productIdentifier":"boost_7days","localizedTitle":"Boost","localizedDescription":"Every 7 days","iconUrl":null,"price":{"value":0.99,"currencyCode":"EUR"},"subscriptionPeriod":{"unit":"day","numberOfUnits":7},"subscriptionGroupIdentifier":null,"introductoryPrice":null,"discountedPrice":null}"#)
    }

    @Test func discountedPriceShape() {
        let product = Product(UpstreamProduct(
            id: "y", title: "Y", description: "Y", price: money("39.99", "EUR"),
            subscription: UpstreamSubscription(
                period: SubscriptionPeriod(iso8601: "P1Y")!, groupID: "premium",
                discountOffer: UpstreamOffer(price: money("29.99", "EUR"), period: SubscriptionPeriod(iso8601: "P1Y")!)
            )
        ))
        #expect(product.discountedPrice?.jsonValue.serializedString == #"{"price":{"value":29.99,"currencyCode":"EUR"},"period":{"unit":"year","numberOfUnits":1}}"#)
        #expect(product.jsonValue.objectValue?["introductoryPrice"] == .null)
    }

    @Test func requestOrderDecidesBothLists() {
        func product(_ id: String) -> Product {
            Product(UpstreamProduct(id: id, title: id, description: id, price: money("1.00", "EUR")))
        }
        let found = ["a": product("a"), "b": product("b"), "c": product("c"), "unrequested": product("unrequested")]
        let result = ProductsResult(requested: ["c", "x", "a", "y", "b"], found: found, region: Self.germany)
        #expect(result.products.map(\.productIdentifier) == ["c", "a", "b"])
        #expect(result.invalidProductIdentifiers == ["x", "y"])
        #expect(result.jsonValue.objectValue?.keys == ["products", "invalidProductIdentifiers", "region"])
    }

    @Test func repeatedUpstreamItemKeepsTheFirst() throws {
        let page = try UpstreamProductsPage.parse(Array(#"{"items":[{"id":"a","title":"first","description":"D","price":{"amount":"1","currency":"EUR"}},{"id":"a","title":"second","description":"D","price":{"amount":"2","currency":"EUR"}}]}"#.utf8))
        #expect(page.productsByID.count == 1)
        #expect(page.productsByID["a"]?.localizedTitle == "first")
    }

    @Test func nothingFound() {
        let result = ProductsResult(requested: ["x"], found: [:], region: Self.germany)
        #expect(result.jsonValue.serializedString == #"{"products":[],"invalidProductIdentifiers":["x"],"region":{"countryCode":"DE","source":"explicit"}}"#)
    }
}
