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

extension ProductsResult {
    /// The JSON-RPC `result` written straight from products encoded once
    /// (``Product/encoded``): the same bytes as ``jsonValue`` serializes to
    /// for the same products, with no tree and no re-encoding, in one buffer
    /// sized up front.
    ///
    /// - Parameters:
    ///   - requested: The de-duplicated identifiers, in request order.
    ///   - answers: For each requested identifier, at the same index, what
    ///     is known of it. A product goes to `products`; an unknown
    ///     identifier, and one nothing answered (`nil`), to
    ///     `invalidProductIdentifiers`.
    ///   - region: The resolved region.
    /// - Precondition: `answers` has one entry per requested identifier.
    public static func encoded(requested: [String], answers: [ProductAnswer?], region: ResolvedRegion) -> EncodedJSON {
        precondition(requested.count == answers.count, "one answer per requested identifier")
        // Member names, brackets and the region take under 100 bytes.
        var capacity = 128
        for index in requested.indices {
            capacity += (answers[index]?.product?.bytes.count ?? requested[index].utf8.count + 2) + 1
        }
        var writer = JSONWriter(reservingCapacity: capacity)
        writer.beginObject()
        writer.key(literal: "products")
        writer.beginArray()
        for answer in answers {
            if let product = answer?.product { writer.encoded(product) }
        }
        writer.endArray()
        writer.key(literal: "invalidProductIdentifiers")
        writer.beginArray()
        for index in requested.indices where answers[index]?.product == nil {
            writer.string(requested[index])
        }
        writer.endArray()
        writer.key(literal: "region")
        region.write(to: &writer)
        writer.endObject()
        return writer.finish()
    }
}
