@testable import GatewayMetrics
@testable import MemoryTier
@testable import SharedTier
import JSONRPC
import ProductsDomain
import EventTransport
import Testing

/// The shared tier's value format and keys, without Redis.
@Suite("Shared cache entries")
struct SharedCacheEntryTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: LanguageTag("pt-BR"))

    static var product: EncodedJSON {
        let page = Catalog.sample.page(ids: ["premium_monthly"], country: scope.country, language: nil)
        return SourcePage(page: page, maxAgeSeconds: 30).encodedProducts["premium_monthly"]!
    }

    @Test func anEntryReadsBackAsWritten() {
        let product = SharedCacheEntry(answer: .product(Self.product), freshUntilUnixMS: 1_800_000_000_123, staleIfErrorSeconds: 30, revalidateSeconds: 7)
        #expect(SharedCacheEntry(decoding: product.encoded, identifier: "premium_monthly") == product)
        let unknown = SharedCacheEntry(answer: .unknown, freshUntilUnixMS: 42, staleIfErrorSeconds: 0, revalidateSeconds: 0)
        #expect(SharedCacheEntry(decoding: unknown.encoded, identifier: "anything") == unknown)
        #expect(unknown.encoded.count == SharedCacheEntry.headerCount)
    }

    @Test func whatThisFormatDidNotWriteIsIgnored() {
        let good = SharedCacheEntry(answer: .product(Self.product), freshUntilUnixMS: 1, staleIfErrorSeconds: 0, revalidateSeconds: 0).encoded
        // Another identifier's product, a truncated one, a wrong magic, a
        // negative window, an unknown kind, trailing bytes after "U".
        #expect(SharedCacheEntry(decoding: good, identifier: "coins_100") == nil)
        #expect(SharedCacheEntry(decoding: Array(good.dropLast()), identifier: "premium_monthly") == nil)
        #expect(SharedCacheEntry(decoding: Array("OGW2".utf8) + good.dropFirst(4), identifier: "premium_monthly") == nil)
        var negative = good
        negative[12] = 0xFF
        #expect(SharedCacheEntry(decoding: negative, identifier: "premium_monthly") == nil)
        var kind = good
        kind[20] = UInt8(ascii: "X")
        #expect(SharedCacheEntry(decoding: kind, identifier: "premium_monthly") == nil)
        let unknown = SharedCacheEntry(answer: .unknown, freshUntilUnixMS: 1, staleIfErrorSeconds: 0, revalidateSeconds: 0).encoded
        #expect(SharedCacheEntry(decoding: unknown + [0x20], identifier: "x") == nil)
        #expect(SharedCacheEntry(decoding: Array("garbage".utf8), identifier: "x") == nil)
        #expect(SharedCacheEntry(decoding: [], identifier: "x") == nil)
    }

    /// Only the writer's own form of a product is taken: valid JSON that
    /// the gateway would not have written (spaces, another escape, a broken
    /// tail) is ignored, so what is spliced is always one valid value.
    @Test func onlyTheWritersFormOfAProductIsTaken() {
        let header = Array(SharedCacheEntry(answer: .unknown, freshUntilUnixMS: 1, staleIfErrorSeconds: 0, revalidateSeconds: 0).encoded.dropLast())
        func entry(_ json: String) -> SharedCacheEntry? {
            SharedCacheEntry(decoding: header + [UInt8(ascii: "P")] + Array(json.utf8), identifier: "x")
        }
        let product = #"{"productIdentifier":"x","localizedTitle":"a\nb","localizedDescription":"d","iconUrl":null,"price":{"value":1.00,"currencyCode":"EUR"},"subscriptionPeriod":null,"subscriptionGroupIdentifier":null,"introductoryPrice":null,"discountedPrice":null}"#
        #expect(entry(product)?.answer.product?.text == product)
        // The writer's form, but not the public shape of a product.
        #expect(entry(#"{"productIdentifier":"x"}"#) == nil)
        #expect(entry(#"{"productIdentifier":"x","localizedTitle":"t","localizedDescription":"d","iconUrl":null,"price":{"value":1.00,"currencyCode":"eur"},"subscriptionPeriod":null,"subscriptionGroupIdentifier":null,"introductoryPrice":null,"discountedPrice":null}"#) == nil)
        #expect(entry(#"{ "productIdentifier" : "x" }"#) == nil)
        #expect(entry(#"{"productIdentifier":"x","t":"\/"}"#) == nil)
        #expect(entry(#"{"productIdentifier":"x","t":"#) == nil)
        #expect(entry(#"{"productIdentifier":"xy"}"#) == nil)
        #expect(entry(#"{"t":1,"productIdentifier":"x"}"#) == nil)
    }

    /// A product of `count` bytes in the writer's form and the public
    /// shape, for `identifier` (its description makes up the length).
    static func product(bytes count: Int, identifier: String = "x") -> [UInt8] {
        let opening = Array(#"{"productIdentifier":"\#(identifier)","localizedTitle":"t","localizedDescription":""#.utf8)
        let closing = Array(#"","iconUrl":null,"price":{"value":1.00,"currencyCode":"EUR"},"subscriptionPeriod":null,"subscriptionGroupIdentifier":null,"introductoryPrice":null,"discountedPrice":null}"#.utf8)
        return opening + [UInt8](repeating: UInt8(ascii: "a"), count: count - opening.count - closing.count) + closing
    }

    /// One product is at most 64 KiB wherever it comes from: an entry
    /// whose product is exactly that is read, one byte more is refused.
    @Test func anEntryWhoseProductIsOver64KiBIsRefused() {
        let header = Array(SharedCacheEntry(answer: .unknown, freshUntilUnixMS: 1, staleIfErrorSeconds: 0, revalidateSeconds: 0).encoded.dropLast())
        func entry(_ product: [UInt8]) -> SharedCacheEntry? {
            SharedCacheEntry(decoding: header + [UInt8(ascii: "P")] + product, identifier: "x")
        }
        #expect(ProductAnswer.maxProductBytes == 65536)
        #expect(entry(Self.product(bytes: 65536))?.answer.product?.bytes.count == 65536)
        #expect(entry(Self.product(bytes: 65537)) == nil)
    }

    @Test func keepTimeIsFreshnessPlusTheLongerStaleWindow() {
        let entry = SharedCacheEntry(answer: .unknown, freshUntilUnixMS: 10_000, staleIfErrorSeconds: 3, revalidateSeconds: 5)
        #expect(entry.keepMilliseconds(nowUnixMS: 4_000) == 11_000)
    }

    @Test func keysAreVersionedAndUnderThePrefix() {
        let keys = SharedTierKeys(prefix: "gw:")
        #expect(String(decoding: keys.entry(Self.scope, "coins_100"), as: UTF8.self) == "gw:v1:p:demo:DE:pt-BR:coins_100")
        let noLanguage = FetchScope(appID: "demo", country: CountryCode("FR")!, language: nil)
        #expect(String(decoding: keys.entry(noLanguage, "a.b"), as: UTF8.self) == "gw:v1:p:demo:FR:-:a.b")
    }

    /// The keys of several identifiers share their head, written once:
    /// each is the key written alone, with or without a language, empty
    /// identifiers and non-ASCII ones included.
    @Test(arguments: [0, 1, 2, 5])
    func keysOfSeveralIdentifiersAreEachTheKeyWrittenAlone(count: Int) {
        let keys = SharedTierKeys(prefix: "a-much-longer-prefix-than-a-small-string:")
        let identifiers = ["coins_100", "", "premium_monthly_with_a_long_name", "é", "x"].prefix(count).map { $0 }
        for scope in [Self.scope, FetchScope(appID: "an-app-identifier-over-fifteen-bytes", country: CountryCode("FR")!, language: nil)] {
            var command = RedisCommand()
            command.append("MGET")
            keys.append("v1:w:", scope, identifiers, to: &command)
            #expect(command.count == 1 + identifiers.count)
            for (index, identifier) in identifiers.enumerated() {
                #expect(command.argumentBytes(1 + index) == keys.key("v1:w:", scope, identifier))
            }
        }
    }
}
