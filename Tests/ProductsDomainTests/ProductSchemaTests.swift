import JSONRPC
import ProductsDomain
import Testing

/// The public shape of a product, checked on bytes from Redis: every product
/// the gateway writes fits, and each way a forged one breaks the shape is
/// refused.
@Suite("Product schema")
struct ProductSchemaTests {
    /// Every sample product, in every country and language it is priced in,
    /// subscriptions and offers included, fits the shape for its own
    /// identifier and no other.
    @Test func everyProductTheGatewayWritesFits() {
        var checked = 0
        EncodedResultTests.forEachSampleProduct { product, identifier, label in
            let bytes = product.encoded.bytes
            #expect(ProductSchema.admits(bytes, identifier: identifier), "\(label)")
            #expect(!ProductSchema.admits(bytes, identifier: identifier + "x"))
            checked += 1
        }
        #expect(checked >= Catalog.sample.productIdentifiers.count)
    }

    static let good = #"{"productIdentifier":"p","localizedTitle":"T","localizedDescription":"D","iconUrl":"https://i/p.png","price":{"value":4.99,"currencyCode":"EUR"},"subscriptionPeriod":{"unit":"month","numberOfUnits":1},"subscriptionGroupIdentifier":"g","introductoryPrice":{"price":{"value":0.00,"currencyCode":"EUR"},"period":{"unit":"week","numberOfUnits":1}},"discountedPrice":null}"#

    @Test func aFullProductFitsWithMembersInAnyOrder() {
        #expect(ProductSchema.admits(Array(Self.good.utf8), identifier: "p"))
        let reordered = #"{"discountedPrice":null,"price":{"currencyCode":"EUR","value":4.99},"productIdentifier":"p","localizedDescription":"D","localizedTitle":"T","iconUrl":null,"subscriptionGroupIdentifier":null,"subscriptionPeriod":null,"introductoryPrice":{"period":{"numberOfUnits":12,"unit":"year"},"price":{"value":1,"currencyCode":"USD"}}}"#
        #expect(ProductSchema.admits(Array(reordered.utf8), identifier: "p"))
    }

    /// One change each to the good product; every one is refused.
    @Test(arguments: [
        (#""localizedTitle":"T","#, #""#),                                           // a member missing
        (#""localizedTitle":"T","#, #""localizedTitle":"T","localizedTitle":"U","#), // a member twice
        (#""localizedTitle":"T","#, #""localizedTitle":"T","extra":1,"#),           // a member not in the schema
        (#""localizedTitle":"T""#, #""localizedTitle":7"#),                           // a number for a string
        (#""localizedTitle":"T""#, #""localizedTitle":null"#),                        // null where none may be
        (#""iconUrl":"https://i/p.png""#, #""iconUrl":false"#),                      // neither string nor null
        (#""value":4.99"#, #""value":"4.99""#),                                      // a price as a string
        (#""currencyCode":"EUR"},"subscriptionPeriod""#, #""currencyCode":"eur"},"subscriptionPeriod""#),
        (#""currencyCode":"EUR"},"subscriptionPeriod""#, #""currencyCode":"EURO"},"subscriptionPeriod""#),
        (#""unit":"month""#, #""unit":"decade""#),
        (#""numberOfUnits":1},"subscriptionGroupIdentifier""#, #""numberOfUnits":0},"subscriptionGroupIdentifier""#),
        (#""numberOfUnits":1},"subscriptionGroupIdentifier""#, #""numberOfUnits":-1},"subscriptionGroupIdentifier""#),
        (#""numberOfUnits":1},"subscriptionGroupIdentifier""#, #""numberOfUnits":1.5},"subscriptionGroupIdentifier""#),
        (#""numberOfUnits":1},"subscriptionGroupIdentifier""#, #""numberOfUnits":1e3},"subscriptionGroupIdentifier""#),
        (#""numberOfUnits":1},"subscriptionGroupIdentifier""#, #""numberOfUnits":"1"},"subscriptionGroupIdentifier""#),
        (#""numberOfUnits":1},"subscriptionGroupIdentifier""#, #""numberOfUnits":1234567890},"subscriptionGroupIdentifier""#),
        (#""period":{"unit":"week","numberOfUnits":1}}"#, #""period":{"unit":"week"}}"#), // an offer's period cut short
        (#""discountedPrice":null"#, #""discountedPrice":{"price":{"value":1,"currencyCode":"EUR"}}"#),
        (#""discountedPrice":null}"#, #""discountedPrice":null,"x":[1,2,3]}"#),
        (#""productIdentifier":"p""#, #""productIdentifier":"q""#),                   // another identifier
    ])
    func aChangedProductIsRefused(_ change: (String, String)) {
        let bytes = Array(Self.good.replacing(change.0, with: change.1, maxReplacements: 1).utf8)
        #expect(bytes != Array(Self.good.utf8), "the change applies")
        #expect(!ProductSchema.admits(bytes, identifier: "p"))
    }

    @Test func notAnObjectIsRefused() {
        for text in ["", "null", "[]", #""p""#, "{}", Self.good + " x", String(Self.good.dropLast())] {
            #expect(!ProductSchema.admits(Array(text.utf8), identifier: "p"), "\(text.prefix(20))")
        }
    }
}
