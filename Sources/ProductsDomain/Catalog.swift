import JSONRPC

/// A product catalog served when no upstream is configured, answering like the upstream would.
///
/// The catalog file is one JSON object (UTF-8, at most 8 MiB):
///
/// ```json
/// {
///   "defaultLanguage": "en",
///   "products": [
///     {
///       "id": "premium_monthly",
///       "iconUrl": "https://cdn.example.com/premium.png",
///       "localizations": {
///         "en": { "title": "Premium", "description": "All features, billed monthly" },
///         "de": { "title": "Premium", "description": "Alle Funktionen, monatlich abgerechnet" }
///       },
///       "prices": {
///         "DE": { "amount": "4.99", "currency": "EUR" },
///         "JP": { "amount": "600", "currency": "JPY" }
///       },
///       "subscription": {
///         "period": "P1M",
///         "groupId": "premium",
///         "introductoryOffer": { "period": "P1W", "prices": { "DE": { "amount": "0.00", "currency": "EUR" } } },
///         "discountOffer": null
///       }
///     }
///   ]
/// }
/// ```
///
/// - `defaultLanguage` (required): a BCP 47 tag; every product must have a
///   localization for it.
/// - `products` (required): an array; each `id` is a product identifier
///   (1 to 128 characters of `A-Z a-z 0-9 . _ -`) and appears once.
/// - `iconUrl`: a string, or `null`/absent.
/// - `localizations` (required): BCP 47 tag to `{"title","description"}`, both strings.
/// - `prices` (required): ISO 3166-1 alpha-2 code (assigned; any case) to
///   `{"amount","currency"}`: `amount` a decimal string such as `"4.99"` or
///   `"600"`, written to callers with exactly those digits; `currency` ISO 4217.
///   A product is sold only in the countries listed.
/// - `subscription`: `null`/absent for a one-time product; else `period`
///   (`PnD`, `PnW`, `PnM` or `PnY`), `groupId` (string or `null`/absent), and
///   `introductoryOffer`/`discountOffer` (`null`/absent, or a `period` and
///   `prices` as above; an offer applies in the countries it has a price for,
///   which must be countries the product is sold in).
/// - Unknown keys are refused, so that a typo does not silently drop a price.
///
/// A lookup answers each id with an item when the product has a price in the
/// requested country, else lists it as not found. Titles and descriptions are
/// picked by the requested language: the exact tag, then its primary language
/// subtag (`de-AT` uses `de`), then `defaultLanguage`.
public struct Catalog: Sendable {
    /// The largest catalog accepted, in bytes (8 MiB).
    public static let maxBytes = 8 * 1024 * 1024

    /// The language used when a product has no localization for the requested one.
    public let defaultLanguage: LanguageTag
    /// The product identifiers, in file order.
    public let productIdentifiers: [String]
    private let products: [String: CatalogProduct]

    /// Parses a catalog document.
    /// - Parameter json: The file's bytes.
    /// - Throws: `CatalogError` naming the path of the first problem.
    public init(json: [UInt8]) throws(CatalogError) {
        guard json.count <= Self.maxBytes else {
            throw .tooLarge(byteCount: json.count, limit: Self.maxBytes)
        }
        let root: JSONValue
        do {
            root = try JSONParser.parse(json)
        } catch {
            throw .malformedJSON(detail: "\(error)")
        }
        do throws(JSONFieldReader.Failure) {
            let document = try JSONFieldReader(root, path: "", label: "document")
            try document.rejectUnknownKeys(allowed: ["defaultLanguage", "products"])
            let language = try Self.languageTag(document.string("defaultLanguage"), path: document.path("defaultLanguage"))
            var products: [String: CatalogProduct] = [:]
            var order: [String] = []
            for (index, value) in try document.array("products").enumerated() {
                let path = "products[\(index)]"
                let product = try Self.product(JSONFieldReader(value, path: path), defaultLanguage: language)
                guard products[product.id] == nil else {
                    throw JSONFieldReader.Failure(path: "\(path).id", problem: "\(MessageText.quoted(product.id)) appears more than once")
                }
                products[product.id] = product
                order.append(product.id)
            }
            self.defaultLanguage = language
            self.products = products
            self.productIdentifiers = order
        } catch {
            throw .invalid(path: error.path, problem: error.problem)
        }
    }

    /// Answers like the upstream would for (ids, country, language): a product priced
    /// in that country is an item (title/description picked by language: exact tag,
    /// then primary language subtag, then the catalog's defaultLanguage); an unknown
    /// id, or one without a price for that country, goes to notFound.
    ///
    /// Both lists follow the order of `ids`, with repeated ids answered once.
    /// - Parameters:
    ///   - ids: The identifiers asked for.
    ///   - country: The region.
    ///   - language: The preferred language, if any.
    public func page(ids: [String], country: CountryCode, language: LanguageTag?) -> UpstreamProductsPage {
        var page = UpstreamProductsPage(items: [], notFound: [])
        var seen: Set<String> = []
        for id in ids where seen.insert(id).inserted {
            if let product = products[id],
                let item = product.upstream(in: country, localization: localization(of: product, for: language))
            {
                page.items.append(item)
            } else {
                page.notFound.append(id)
            }
        }
        return page
    }

    private func localization(of product: CatalogProduct, for language: LanguageTag?) -> CatalogProduct.Localization {
        if let language {
            if let exact = product.localizations[language.text] { return exact }
            if let primary = product.localizations[language.primaryLanguage] { return primary }
        }
        // Parsing guarantees every product has the default language.
        return product.localizations[defaultLanguage.text]!
    }

    private static func product(_ reader: JSONFieldReader, defaultLanguage: LanguageTag) throws(JSONFieldReader.Failure) -> CatalogProduct {
        try reader.rejectUnknownKeys(allowed: ["id", "iconUrl", "localizations", "prices", "subscription"])
        let id = try reader.string("id")
        guard ProductIdentifier.isValid(id) else {
            throw JSONFieldReader.Failure(
                path: reader.path("id"),
                problem: "\(MessageText.quoted(id)) is not a product identifier: \(ProductIdentifier.formDescription)"
            )
        }
        let localizations = try self.localizations(reader.object("localizations"))
        guard localizations[defaultLanguage.text] != nil else {
            throw JSONFieldReader.Failure(
                path: reader.path("localizations"),
                problem: "no entry for the defaultLanguage \(MessageText.quoted(defaultLanguage.text))"
            )
        }
        let prices = try self.prices(reader.object("prices"))
        var subscription: CatalogProduct.Subscription?
        if let terms = try reader.optionalObject("subscription") {
            try terms.rejectUnknownKeys(allowed: ["period", "groupId", "introductoryOffer", "discountOffer"])
            subscription = CatalogProduct.Subscription(
                period: try terms.period("period"),
                groupID: try terms.optionalString("groupId"),
                introductoryOffer: try offer(terms.optionalObject("introductoryOffer"), productPrices: prices),
                discountOffer: try offer(terms.optionalObject("discountOffer"), productPrices: prices)
            )
        }
        return CatalogProduct(
            id: id,
            iconURL: try reader.optionalString("iconUrl"),
            localizations: localizations,
            prices: prices,
            subscription: subscription
        )
    }

    private static func localizations(_ reader: JSONFieldReader) throws(JSONFieldReader.Failure) -> [String: CatalogProduct.Localization] {
        var result: [String: CatalogProduct.Localization] = [:]
        for key in reader.object.keys {
            let tag = try languageTag(key, path: reader.path(key))
            guard result[tag.text] == nil else {
                throw JSONFieldReader.Failure(path: reader.path(key), problem: "the language \(tag.text) appears more than once")
            }
            let entry = try reader.object(key)
            try entry.rejectUnknownKeys(allowed: ["title", "description"])
            result[tag.text] = CatalogProduct.Localization(title: try entry.string("title"), description: try entry.string("description"))
        }
        return result
    }

    private static func prices(_ reader: JSONFieldReader) throws(JSONFieldReader.Failure) -> [CountryCode: Money] {
        var result: [CountryCode: Money] = [:]
        for key in reader.object.keys {
            guard let country = CountryCode(key) else {
                throw JSONFieldReader.Failure(path: reader.path(key), problem: "not an assigned ISO 3166-1 alpha-2 country code")
            }
            guard result[country] == nil else {
                throw JSONFieldReader.Failure(path: reader.path(key), problem: "the country \(country.text) appears more than once")
            }
            let entry = try reader.object(key)
            try entry.rejectUnknownKeys(allowed: ["amount", "currency"])
            result[country] = try entry.money()
        }
        return result
    }

    private static func offer(_ reader: JSONFieldReader?, productPrices: [CountryCode: Money]) throws(JSONFieldReader.Failure) -> CatalogProduct.Offer? {
        guard let reader else { return nil }
        try reader.rejectUnknownKeys(allowed: ["period", "prices"])
        let period = try reader.period("period")
        let pricesReader = try reader.object("prices")
        let prices = try self.prices(pricesReader)
        for key in pricesReader.object.keys {
            if let country = CountryCode(key), productPrices[country] == nil {
                throw JSONFieldReader.Failure(
                    path: pricesReader.path(key),
                    problem: "the product has no price in \(country.text), so it cannot have an offer there"
                )
            }
        }
        return CatalogProduct.Offer(period: period, prices: prices)
    }

    private static func languageTag(_ text: String, path: String) throws(JSONFieldReader.Failure) -> LanguageTag {
        guard let tag = LanguageTag(text) else {
            throw JSONFieldReader.Failure(path: path, problem: "\(MessageText.quoted(text)) is not a well-formed BCP 47 language tag")
        }
        return tag
    }
}
