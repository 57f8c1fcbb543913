import Foundation
import JSONRPC
import ProductsDomain
import Testing

@Suite("Embedded catalog")
struct CatalogTests {
    let de = CountryCode("DE")!
    let us = CountryCode("US")!
    let gb = CountryCode("GB")!
    let jp = CountryCode("JP")!
    let ch = CountryCode("CH")!

    @Test func sampleLoads() {
        let catalog = Catalog.sample
        #expect(catalog.productIdentifiers.count == 12)
        #expect(catalog.defaultLanguage.text == "en")
        #expect(catalog.productIdentifiers.first == "premium_monthly")
        #expect(Set(catalog.productIdentifiers).count == 12)
    }

    @Test func sampleAnswersTheContractExample() throws {
        let page = Catalog.sample.page(ids: ["premium_monthly", "retired_pack"], country: de, language: nil)
        #expect(page == UpstreamProductsPage(items: [UpstreamProductsPageTests.premiumMonthly], notFound: ["retired_pack"]))
        let result = ProductsResult(requested: ["premium_monthly", "retired_pack"], found: ProductsResultTests.found(page), region: ProductsResultTests.germany)
        #expect(result.jsonValue.serializedString == ProductsResultTests.contractResultText)
    }

    @Test func pricesAreExactPerCountry() throws {
        let catalog = Catalog.sample
        let coinsJP = try #require(catalog.page(ids: ["coins_1200"], country: jp, language: nil).items.first)
        #expect(Product(coinsJP).price.jsonValue.serializedString == #"{"value":1200,"currencyCode":"JPY"}"#)
        let coinsUS = try #require(catalog.page(ids: ["coins_1200"], country: us, language: nil).items.first)
        #expect(Product(coinsUS).price.jsonValue.serializedString == #"{"value":9.99,"currencyCode":"USD"}"#)
        let coinsDE = try #require(catalog.page(ids: ["coins_100"], country: de, language: nil).items.first)
        #expect(coinsDE.price == Money(amount: DecimalAmount("0.99")!, currency: CurrencyCode("EUR")!))
    }

    @Test func subscriptionsAndOffers() throws {
        let catalog = Catalog.sample
        let boost = try #require(catalog.page(ids: ["boost_7days"], country: de, language: nil).items.first)
        #expect(boost.subscription?.period == SubscriptionPeriod(unit: .day, numberOfUnits: 7))
        let weekly = try #require(catalog.page(ids: ["premium_weekly"], country: de, language: nil).items.first)
        #expect(weekly.subscription?.period.unit == .week)
        #expect(weekly.subscription?.introductoryOffer == nil)

        let yearlyDE = try #require(catalog.page(ids: ["premium_yearly"], country: de, language: nil).items.first)
        #expect(yearlyDE.subscription?.period.unit == .year)
        #expect(yearlyDE.subscription?.discountOffer?.price.amount.text == "29.99")
        // The discount is not offered in CH, though the product is sold there.
        let yearlyCH = try #require(catalog.page(ids: ["premium_yearly"], country: ch, language: nil).items.first)
        #expect(yearlyCH.subscription?.discountOffer == nil)
        #expect(yearlyCH.price.amount.text == "40.00")
    }

    @Test func productNotSoldInTheCountryIsNotFound() {
        let page = Catalog.sample.page(ids: ["sticker_pack_cats", "coins_100", "family_monthly", "nope"], country: jp, language: nil)
        #expect(page.items.map(\.id) == ["sticker_pack_cats", "coins_100"])
        #expect(page.notFound == ["family_monthly", "nope"])
        let germany = Catalog.sample.page(ids: ["sticker_pack_cats"], country: de, language: nil)
        #expect(germany.items.isEmpty)
        #expect(germany.notFound == ["sticker_pack_cats"])
    }

    @Test func repeatedIdsAreAnsweredOnce() {
        let page = Catalog.sample.page(ids: ["coins_100", "nope", "coins_100", "nope"], country: de, language: nil)
        #expect(page.items.map(\.id) == ["coins_100"])
        #expect(page.notFound == ["nope"])
    }

    @Test(arguments: [
        ("en-GB", "Remove Adverts"),
        ("en-gb", "Remove Adverts"),
        ("en-US", "Remove Ads"),
        ("en", "Remove Ads"),
        ("de", "Werbung entfernen"),
        ("de-AT", "Werbung entfernen"),
        ("fr-CA", "Supprimer les publicités"),
        ("ja", "Remove Ads"),
        (nil, "Remove Ads"),
    ] as [(String?, String)])
    func languageFallback(language: String?, title: String) {
        let tag = language.map { LanguageTag($0)! }
        let page = Catalog.sample.page(ids: ["remove_ads"], country: gb, language: tag)
        #expect(page.items.first?.title == title)
    }

    @Test func productWithOnlyTheDefaultLanguage() {
        let page = Catalog.sample.page(ids: ["sticker_pack_cats", "premium_monthly"], country: us, language: LanguageTag("de-DE"))
        #expect(page.items.map(\.title) == ["Cat Stickers", "Premium"])
        #expect(page.items.map(\.description) == ["Twenty-four cat stickers for your chats", "Alle Funktionen, monatlich abgerechnet"])
    }

    @Test func catalogPagesTravelAsUpstreamBodies() throws {
        let page = Catalog.sample.page(ids: Catalog.sample.productIdentifiers + ["nope"], country: gb, language: LanguageTag("de"))
        let body = page.upstreamBody(country: gb).serialized()
        #expect(try UpstreamProductsPage.parse(body) == page)
    }

    // MARK: - Catalog files

    private func load(_ text: String) -> CatalogError? {
        #expect(throws: CatalogError.self) { try Catalog(json: Array(text.utf8)) }
    }

    private func catalog(product: String) -> String {
        #"{"defaultLanguage":"en","products":[\#(product)]}"#
    }

    private let localizations = #""localizations":{"en":{"title":"T","description":"D"}}"#

    @Test func minimalCatalog() throws {
        let catalog = try Catalog(json: Array(catalog(product: #"{"id":"a",\#(localizations),"prices":{"de":{"amount":"1","currency":"eur"}}}"#).utf8))
        let page = catalog.page(ids: ["a"], country: de, language: nil)
        #expect(page.items == [UpstreamProduct(id: "a", title: "T", description: "D", price: Money(amount: DecimalAmount("1")!, currency: CurrencyCode("EUR")!))])
    }

    @Test func emptyCatalog() throws {
        let catalog = try Catalog(json: Array(#"{"defaultLanguage":"de","products":[]}"#.utf8))
        #expect(catalog.page(ids: ["a"], country: de, language: nil).notFound == ["a"])
    }

    @Test(arguments: [
        (#"[]"#, CatalogError.invalid(path: "document", problem: "expected an object, got an array")),
        (#"{"products":[]}"#, .invalid(path: "defaultLanguage", problem: "missing (expected a string)")),
        (#"{"defaultLanguage":"en_US","products":[]}"#, .invalid(path: "defaultLanguage", problem: #""en_US" is not a well-formed BCP 47 language tag"#)),
        (#"{"defaultLanguage":"en"}"#, .invalid(path: "products", problem: "missing (expected an array)")),
        (#"{"defaultLanguage":"en","products":[],"version":2}"#, .invalid(path: "version", problem: "unknown key; allowed: defaultLanguage, products")),
    ])
    func badDocument(text: String, error: CatalogError) {
        #expect(load(text) == error)
    }

    @Test func badProducts() {
        let price = #""prices":{"DE":{"amount":"1.00","currency":"EUR"}}"#
        let cases: [(String, CatalogError)] = [
            (#"{"id":"a b",\#(localizations),\#(price)}"#, .invalid(path: "products[0].id", problem: #""a b" is not a product identifier: 1 to 128 characters of A-Z a-z 0-9 . _ -"#)),
            (#"{"id":"a",\#(localizations),\#(price),"price":{}}"#, .invalid(path: "products[0].price", problem: "unknown key; allowed: id, iconUrl, localizations, prices, subscription")),
            (#"{"id":"a","localizations":{"de":{"title":"T","description":"D"}},\#(price)}"#, .invalid(path: "products[0].localizations", problem: #"no entry for the defaultLanguage "en""#)),
            (#"{"id":"a","localizations":{"en":{"title":"T","description":"D"},"EN":{"title":"T","description":"D"}},\#(price)}"#, .invalid(path: "products[0].localizations.EN", problem: "the language en appears more than once")),
            (#"{"id":"a","localizations":{"en":{"title":"T"}},\#(price)}"#, .invalid(path: "products[0].localizations.en.description", problem: "missing (expected a string)")),
            (#"{"id":"a",\#(localizations)}"#, .invalid(path: "products[0].prices", problem: "missing (expected an object)")),
            (#"{"id":"a",\#(localizations),"prices":{"XX":{"amount":"1.00","currency":"EUR"}}}"#, .invalid(path: "products[0].prices.XX", problem: "not an assigned ISO 3166-1 alpha-2 country code")),
            (#"{"id":"a",\#(localizations),"prices":{"DE":{"amount":"1.00","currency":"EUR"},"de":{"amount":"2.00","currency":"EUR"}}}"#, .invalid(path: "products[0].prices.de", problem: "the country DE appears more than once")),
            (#"{"id":"a",\#(localizations),"prices":{"DE":{"amount":1.00,"currency":"EUR"}}}"#, .invalid(path: "products[0].prices.DE.amount", problem: #"expected a decimal string such as "4.99", got a number"#)),
            (#"{"id":"a",\#(localizations),\#(price),"subscription":{"period":"P1Q"}}"#, .invalid(path: "products[0].subscription.period", problem: #"expected an ISO 8601 period PnD, PnW, PnM or PnY with n from 1 to 9999, got "P1Q""#)),
            (#"{"id":"a",\#(localizations),\#(price),"subscription":{"period":"P1M","introductoryOffer":{"period":"P1W","prices":{"FR":{"amount":"0.00","currency":"EUR"}}}}}"#, .invalid(path: "products[0].subscription.introductoryOffer.prices.FR", problem: "the product has no price in FR, so it cannot have an offer there")),
            (#"{"id":"a",\#(localizations),\#(price),"subscription":{"period":"P1M","discountOffer":{"prices":{}}}}"#, .invalid(path: "products[0].subscription.discountOffer.period", problem: "missing (expected an ISO 8601 period PnD, PnW, PnM or PnY with n from 1 to 9999)")),
        ]
        for (product, error) in cases {
            #expect(load(catalog(product: product)) == error, "\(product)")
        }
    }

    @Test func duplicateProductIdentifier() {
        let product = #"{"id":"a",\#(localizations),"prices":{}}"#
        #expect(load(#"{"defaultLanguage":"en","products":[\#(product),\#(product)]}"#) == .invalid(path: "products[1].id", problem: #""a" appears more than once"#))
    }

    @Test func malformedAndOversizedInput() {
        guard case .malformedJSON = load(#"{"defaultLanguage":"en","products":[}"#) else {
            Issue.record("expected malformedJSON")
            return
        }
        let huge = [UInt8](repeating: UInt8(ascii: " "), count: Catalog.maxBytes + 1)
        #expect(throws: CatalogError.tooLarge(byteCount: Catalog.maxBytes + 1, limit: Catalog.maxBytes)) {
            try Catalog(json: huge)
        }
    }

    @Test func errorDescriptionsNameThePath() {
        #expect(CatalogError.invalid(path: "products[3].prices.DE.amount", problem: "expected a decimal string").description == "catalog products[3].prices.DE.amount: expected a decimal string")
        #expect(CatalogError.unreadable(file: "/etc/catalog.json", detail: "no such file").description == "catalog file /etc/catalog.json cannot be read: no such file")
    }

    @Test func readsFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tests-\(UInt64.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let file = directory.appendingPathComponent("catalog.json")
        try Data(Catalog.sampleJSON.utf8).write(to: file)
        let catalog = try Catalog(contentsOfFile: file.path)
        #expect(catalog.productIdentifiers == Catalog.sample.productIdentifiers)

        let link = directory.appendingPathComponent("link.json")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: file)
        #expect(try Catalog(contentsOfFile: link.path).productIdentifiers.count == 12)

        let missing = directory.appendingPathComponent("missing.json").path
        let error = #expect(throws: CatalogError.self) { try Catalog(contentsOfFile: missing) }
        guard case .unreadable(let name, _) = error else {
            Issue.record("expected unreadable, got \(String(describing: error))")
            return
        }
        #expect(error == .unreadable(file: missing, detail: "no such file"))
        #expect(name == missing)
        #expect(throws: CatalogError.unreadable(file: directory.path, detail: "it is a directory")) {
            try Catalog(contentsOfFile: directory.path)
        }

        let big = directory.appendingPathComponent("big.json")
        try Data(repeating: UInt8(ascii: " "), count: Catalog.maxBytes + 1).write(to: big)
        #expect(throws: CatalogError.tooLarge(byteCount: Catalog.maxBytes + 1, limit: Catalog.maxBytes)) {
            try Catalog(contentsOfFile: big.path)
        }
    }
}
