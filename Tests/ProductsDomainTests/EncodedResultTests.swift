import JSONRPC
import ProductsDomain
import Testing

/// The byte path (products encoded once, results written from those bytes)
/// against the tree path (`jsonValue.serialized()`), byte for byte.
@Suite("Encoded products and results")
struct EncodedResultTests {
    static let countries = ["DE", "FR", "US", "GB", "JP", "CH", "AT"].map { CountryCode($0)! }
    static let languages: [LanguageTag?] = [nil, LanguageTag("en"), LanguageTag("de-DE"), LanguageTag("fr"), LanguageTag("ja")]

    /// Every sample product in every country and language of these tests
    /// (each priced product once per pair).
    static func forEachSampleProduct(_ body: (Product, String, String) -> Void) {
        for country in countries {
            for language in languages {
                let page = Catalog.sample.page(ids: Catalog.sample.productIdentifiers, country: country, language: language)
                for item in page.items { body(Product(item), item.id, "\(item.id) \(country) \(language?.text ?? "-")") }
            }
        }
    }

    @Test func everySampleProductEncodesAsItsTree() {
        var compared = 0
        Self.forEachSampleProduct { product, _, label in
            #expect(product.encoded.bytes == product.jsonValue.serialized(), "\(label)")
            compared += 1
        }
        // Every product is priced somewhere, so each was compared at least once.
        #expect(compared >= Catalog.sample.productIdentifiers.count)
    }

    /// Cached bytes should not carry much unused capacity: the writer is
    /// sized for the product up front and never grows for plain text. The
    /// bound leaves room for glibc, which hands out a reused free chunk up
    /// to 32 bytes larger than asked (too small a remainder to split off),
    /// and the array reports that as capacity; a writer that grew would
    /// show hundreds.
    @Test func encodedProductsCarryLittleSpareCapacity() {
        for country in Self.countries {
            let page = Catalog.sample.page(ids: Catalog.sample.productIdentifiers, country: country, language: LanguageTag("fr"))
            for item in page.items {
                let bytes = Product(item).encoded.bytes
                #expect(bytes.capacity - bytes.count <= 96, "\(item.id) \(country): \(bytes.count) of \(bytes.capacity)")
            }
        }
    }

    static let trickyStrings: [String] = [
        "",
        #"say "hi""#,
        #"back\slash and / slash"#,
        "tab\there, new\nline, return\r, bell\u{07}, nul\u{0}, unit\u{1F}, del\u{7F}",
        "\u{08}\u{0C}",
        "Münzen 20 % extra, Ünïcödé, 価格, 😀",
        "line\u{2028}paragraph\u{2029}separators",
        "e\u{301} decomposed",
        "\"",
        "\\",
        String(repeating: "long plain text ", count: 40) + "\n",
    ]

    @Test(arguments: trickyStrings)
    func trickyStringsEncodeAsTheirTree(text: String) throws {
        let offer = UpstreamOffer(
            price: Money(amount: DecimalAmount("0.00")!, currency: CurrencyCode("eur")!),
            period: SubscriptionPeriod(iso8601: "P7D")!
        )
        let upstream = UpstreamProduct(
            id: "tricky",
            title: text,
            description: text + text,
            iconURL: text.isEmpty ? nil : "https://cdn.example.com/\(text).png",
            price: Money(amount: DecimalAmount("1200")!, currency: CurrencyCode("JPY")!),
            subscription: UpstreamSubscription(
                period: SubscriptionPeriod(iso8601: "P0012M")!,
                groupID: text,
                introductoryOffer: offer,
                discountOffer: text.isEmpty ? nil : offer
            )
        )
        let product = Product(upstream)
        #expect(product.encoded.bytes == product.jsonValue.serialized())
        // The bytes are JSON that reads back as the tree.
        #expect(try JSONParser.parse(product.encoded.bytes) == product.jsonValue)
    }

    @Test(arguments: [RegionSource.explicit, .defaultAssumption, .systemLocale])
    func resultsEncodeAsTheirTree(source: RegionSource) {
        let requested = ["coins_1200", "retired_pack", "premium_monthly", "sticker_pack_cats", "family_monthly", "nope"]
        for country in Self.countries {
            for language in Self.languages {
                let page = Catalog.sample.page(ids: requested, country: country, language: language)
                let region = ResolvedRegion(countryCode: country, source: source)
                let tree = ProductsResult(requested: requested, found: page.productsByID, region: region).jsonValue.serialized()
                let answers = requested.map { id in page.productsByID[id].map { ProductAnswer.product($0.encoded) } }
                let bytes = ProductsResult.encoded(requested: requested, answers: answers, region: region).bytes
                #expect(bytes == tree, "\(country) \(language?.text ?? "-")")
            }
        }
    }

    @Test func resultsWithNothingFoundOrEverythingFound() {
        let region = ResolvedRegion(countryCode: CountryCode("DE")!, source: .explicit)
        let none = ProductsResult.encoded(requested: ["a", "b"], answers: [nil, .unknown], region: region)
        #expect(none.text == #"{"products":[],"invalidProductIdentifiers":["a","b"],"region":{"countryCode":"DE","source":"explicit"}}"#)

        let page = Catalog.sample.page(ids: ["coins_100", "remove_ads"], country: CountryCode("DE")!, language: nil)
        let all = ProductsResult.encoded(requested: ["coins_100", "remove_ads"], answers: page.items.map { .product(Product($0).encoded) }, region: region)
        let tree = ProductsResult(requested: ["coins_100", "remove_ads"], found: page.productsByID, region: region).jsonValue
        #expect(all.bytes == tree.serialized())
    }

    @Test func partsEncodeAsTheirTrees() {
        let money = Money(amount: DecimalAmount("9.99")!, currency: CurrencyCode("EUR")!)
        var writer = JSONWriter()
        money.write(to: &writer)
        #expect(writer.bytes == money.jsonValue.serialized())
        #expect(writer.finish().text == #"{"value":9.99,"currencyCode":"EUR"}"#)

        for units in [1, 7, 12, 9999] {
            let period = SubscriptionPeriod(unit: .year, numberOfUnits: units)!
            var writer = JSONWriter()
            period.write(to: &writer)
            #expect(writer.bytes == period.jsonValue.serialized())
        }
        let region = ResolvedRegion(countryCode: CountryCode("ch")!, source: .systemLocale)
        var regionWriter = JSONWriter()
        region.write(to: &regionWriter)
        #expect(regionWriter.bytes == region.jsonValue.serialized())
    }
}
