public import JSONRPC

/// The result of a successful `products.fetch` call.
public struct ProductsResult: Sendable, Equatable {
    /// The products found, in request order.
    public var products: [Product]
    /// The requested identifiers not found, in request order.
    public var invalidProductIdentifiers: [String]
    /// The region the call was answered for.
    public let region: ResolvedRegion

    /// Assembles the result so that every requested identifier lands in exactly one list.
    ///
    /// `requested`: the de-duplicated identifiers in request order; `found`: products
    /// by id; every requested id not in `found` goes to `invalidProductIdentifiers`,
    /// in request order; found products not requested are dropped.
    /// - Parameters:
    ///   - requested: The de-duplicated identifiers, in request order.
    ///   - found: The products the upstream (or catalog) returned, by identifier.
    ///   - region: The resolved region.
    public init(requested: [String], found: [String: Product], region: ResolvedRegion) {
        var products: [Product] = []
        var invalid: [String] = []
        for identifier in requested {
            if let product = found[identifier] {
                products.append(product)
            } else {
                invalid.append(identifier)
            }
        }
        self.products = products
        self.invalidProductIdentifiers = invalid
        self.region = region
    }

    /// The JSON-RPC `result`: `{"products":[...],"invalidProductIdentifiers":[...],"region":{...}}`.
    public var jsonValue: JSONValue {
        .object(JSONObject([
            ("products", .array(products.map(\.jsonValue))),
            ("invalidProductIdentifiers", .array(invalidProductIdentifiers.map(JSONValue.string))),
            ("region", region.jsonValue),
        ]))
    }
}
