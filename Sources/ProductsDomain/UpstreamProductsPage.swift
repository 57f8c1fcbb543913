public import JSONRPC

/// The useful part of one upstream `200` body: the products found and the ids it does not know.
public struct UpstreamProductsPage: Sendable, Equatable {
    /// The products, in the upstream's order.
    public var items: [UpstreamProduct]
    /// The ids the upstream reported as unknown.
    public var notFound: [String]

    /// - Parameters:
    ///   - items: The products.
    ///   - notFound: The ids reported as unknown.
    public init(items: [UpstreamProduct], notFound: [String]) {
        self.items = items
        self.notFound = notFound
    }

    /// The items normalized and keyed by identifier, for `ProductsResult`. When the
    /// upstream repeats an id the first item wins: building the dictionary with
    /// unique-key initializers would trap on such a body.
    public var productsByID: [String: Product] {
        var products: [String: Product] = [:]
        for item in items where products[item.id] == nil {
            products[item.id] = Product(item)
        }
        return products
    }

    /// ``productsByID`` encoded once (``Product/encoded``): the bytes the
    /// gateway keeps and splices into answers. The same first item wins.
    public var encodedProducts: [String: EncodedJSON] {
        var encoded: [String: EncodedJSON] = [:]
        encoded.reserveCapacity(items.count)
        for item in items where encoded[item.id] == nil {
            encoded[item.id] = Product(item).encoded
        }
        return encoded
    }

    /// ``encodedProducts`` of the page in a `200` body, as ``parse(_:)``
    /// reads it: transcoded in one pass from the body's bytes
    /// (``UpstreamBodyReader/encodedProducts(from:)``), or, when that
    /// reading gives up, through the tree (``parseViaTree(_:)``), which
    /// decides and names the problem.
    /// - Throws: `UpstreamBodyError`, as ``parse(_:)``.
    public static func encodedProducts(of body: [UInt8]) throws(UpstreamBodyError) -> [String: EncodedJSON] {
        if let encoded = UpstreamBodyReader.encodedProducts(from: body) {
            return encoded
        }
        return try parseViaTree(body).encodedProducts
    }

    /// Parses a `200` body of `GET /v1/apps/{appId}/products` (contract section 2).
    ///
    /// `items` is required, so that a `200` carrying some other JSON document is
    /// not read as "nothing found"; `not_found` may be absent or `null` (no unknown
    /// ids). Unknown keys, including `country`, are ignored. `icon_url`,
    /// `subscription`, `group_id` and each offer may be `null` or absent; when
    /// present they must have their documented type. Currency codes are
    /// upper-cased.
    /// - Parameter body: The response body bytes.
    /// - Throws: `UpstreamBodyError` naming the path of the first problem.
    public static func parse(_ body: [UInt8]) throws(UpstreamBodyError) -> UpstreamProductsPage {
        // Every fetch that misses the cache reads a body: one pass over the
        // bytes, without a tree or paths. That reading gives no reasons, so
        // a body it gives up on is read again the tree-based way, which
        // names the problem (or, in the rare cases it accepts and the
        // one-pass reading does not, returns the page).
        if let page = UpstreamBodyReader.page(from: body) {
            return page
        }
        return try parseViaTree(body)
    }

    /// ``parse(_:)`` through a `JSONValue` tree read with `JSONFieldReader`:
    /// the reading that decides what a body means and words every refusal.
    package static func parseViaTree(_ body: [UInt8]) throws(UpstreamBodyError) -> UpstreamProductsPage {
        let root: JSONValue
        do {
            root = try JSONParser.parse(body)
        } catch {
            throw UpstreamBodyError(message: "body: not valid JSON (\(error))")
        }
        do {
            return try parse(root)
        } catch {
            throw UpstreamBodyError(message: error.message)
        }
    }

    private static func parse(_ root: JSONValue) throws(JSONFieldReader.Failure) -> UpstreamProductsPage {
        let body = try JSONFieldReader(root, path: "", label: "body")
        var items: [UpstreamProduct] = []
        for (index, value) in try body.array("items").enumerated() {
            items.append(try product(JSONFieldReader(value, path: "items[\(index)]")))
        }
        var notFound: [String] = []
        for (index, value) in (try body.optionalArray("not_found") ?? []).enumerated() {
            notFound.append(try JSONFieldReader.string(value, path: "not_found[\(index)]"))
        }
        return UpstreamProductsPage(items: items, notFound: notFound)
    }

    private static func product(_ item: JSONFieldReader) throws(JSONFieldReader.Failure) -> UpstreamProduct {
        let id = try item.string("id")
        let title = try item.string("title")
        let description = try item.string("description")
        let iconURL = try item.optionalString("icon_url")
        let price = try item.object("price").money()
        var subscription: UpstreamSubscription?
        if let terms = try item.optionalObject("subscription") {
            subscription = UpstreamSubscription(
                period: try terms.period("period"),
                groupID: try terms.optionalString("group_id"),
                introductoryOffer: try offer(terms.optionalObject("introductory_offer")),
                discountOffer: try offer(terms.optionalObject("discount_offer"))
            )
        }
        return UpstreamProduct(id: id, title: title, description: description, iconURL: iconURL, price: price, subscription: subscription)
    }

    private static func offer(_ reader: JSONFieldReader?) throws(JSONFieldReader.Failure) -> UpstreamOffer? {
        guard let reader else { return nil }
        return UpstreamOffer(price: try reader.money(), period: try reader.period("period"))
    }
}
