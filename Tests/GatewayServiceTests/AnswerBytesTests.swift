import EventTransport
@testable import GatewayMetrics
@testable import GatewayService
import JSONRPC
import Logging
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
@testable import SharedTier
import Synchronization
import Testing

/// Products kept as encoded bytes: the cache's entries, and whole calls of
/// the service against the tree path. No sockets.
@Suite("Answers from bytes")
struct AnswerBytesTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: LanguageTag("de"))
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    /// The sample catalog with a `max-age`, counting its calls.
    final class CountingSource: ProductSource {
        let maxAgeSeconds: Int?
        let calls = Mutex<[[String]]>([])

        init(maxAgeSeconds: Int?) {
            self.maxAgeSeconds = maxAgeSeconds
        }

        func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
            calls.withLock { $0.append(request.identifiers) }
            let page = Catalog.sample.page(ids: request.identifiers, country: request.scope.country, language: request.scope.language)
            let outcome: Result<SourcePage, ProductsFetchFailure> = .success(SourcePage(page: page, maxAgeSeconds: maxAgeSeconds))
            _ = loop.execute { completion(outcome) }
        }
    }

    static func service(source: some ProductSource, cacheMaxTTLSeconds: Int = 60) -> ProductsFetchService {
        ProductsFetchService(
            settings: .init(
                appID: "demo",
                limits: FetchProductsLimits(maxIdentifiers: 100),
                requestTimeout: .seconds(5),
                upstreamMaxIDs: 2,
                cacheMaxTTLSeconds: cacheMaxTTLSeconds,
                regionResolver: RegionResolver(configuredDefault: nil, systemLocale: SystemLocale(environment: [:]))
            ),
            source: source,
            metrics: GatewayMetrics()
        )
    }

    static func params(_ ids: [String], country: String = "de", language: String? = "de") throws -> JSONRPCParams {
        var object: JSONObject = ["productIdentifiers": .array(ids.map(JSONValue.string)), "countryCode": .string(country)]
        if let language { object["language"] = .string(language) }
        return .object(object)
    }

    /// What the tree path answered before bytes were kept: the catalog's
    /// page normalised, assembled and serialized.
    static func treeResult(_ ids: [String], country: String = "DE", language: String? = "de") -> [UInt8] {
        let countryCode = CountryCode(country)!
        let page = Catalog.sample.page(ids: ids, country: countryCode, language: language.flatMap(LanguageTag.init))
        let region = ResolvedRegion(countryCode: countryCode, source: .explicit)
        return ProductsResult(requested: ids, found: page.productsByID, region: region).jsonValue.serialized()
    }

    @Test func fetchedAndCachedAnswersAreTheTreeBytes() async throws {
        let source = CountingSource(maxAgeSeconds: 30)
        let service = Self.service(source: source)
        let ids = ["premium_monthly", "coins_1200", "retired_pack", "family_monthly", "remove_ads"]
        let expected = Self.treeResult(ids)
        for _ in 0 ..< 3 {
            let outcome = await service.fetch(params: try Self.params(ids), requestID: "r", logger: Self.logger)
            #expect(try outcome.get().serialized() == expected)
        }
        // Fetched once, in chunks of two; the unknown identifier is kept too.
        #expect(source.calls.withLock { $0.count } == 3)

        // Some from memory, the rest fetched: the same bytes, in request order.
        let mixed = ["sticker_pack_cats", "remove_ads", "retired_pack", "coins_100", "premium_monthly"]
        let outcome = await service.fetch(params: try Self.params(mixed), requestID: "r", logger: Self.logger)
        #expect(try outcome.get().serialized() == Self.treeResult(mixed))
        #expect(source.calls.withLock { $0.last } == ["sticker_pack_cats", "coins_100"])
    }

    @Test(arguments: [("US", "en-US"), ("JP", nil), ("CH", "fr-CH"), ("GB", "de")] as [(String, String?)])
    func everySampleProductAnswersAsTheTree(country: String, language: String?) async throws {
        let ids = Catalog.sample.productIdentifiers + ["retired_pack"]
        for maxAge in [30, nil] as [Int?] {
            let service = Self.service(source: CountingSource(maxAgeSeconds: maxAge))
            for _ in 0 ..< 2 {
                let outcome = await service.fetch(params: try Self.params(ids, country: country, language: language), requestID: "r", logger: Self.logger)
                #expect(try outcome.get().serialized() == Self.treeResult(ids, country: country, language: language))
            }
        }
    }

    @Test func entriesCountTheirBytes() {
        let cache = ResponseCache(maxTTLSeconds: 60)
        let page = SourcePage(
            page: Catalog.sample.page(ids: ["coins_100", "gone"], country: Self.scope.country, language: Self.scope.language),
            maxAgeSeconds: 30
        )
        let now = MonotonicInstant.now
        cache.store(page, scope: Self.scope, identifiers: ["coins_100", "gone"], now: now)
        let productBytes = page.encodedProducts["coins_100"]!.bytes.count
        // "demo" + "DE" + "de" for the scope, then the identifier, then the
        // fixed overhead of each entry.
        let overhead = ResponseCache.entryOverhead
        #expect(cache.byteCount == (productBytes + 8 + 9 + overhead) + (8 + 4 + overhead))

        var answers: [ProductAnswer?] = [nil, nil, nil]
        #expect(cache.lookup(scope: Self.scope, identifiers: ["gone", "coins_100", "other"], now: now, into: &answers) == 2)
        #expect(answers == [.unknown, .product(page.encodedProducts["coins_100"]!), nil])

        // Another language is another scope.
        let english = FetchScope(appID: "demo", country: Self.scope.country, language: LanguageTag("en"))
        var missed: [ProductAnswer?] = [nil]
        #expect(cache.lookup(scope: english, identifiers: ["coins_100"], now: now, into: &missed) == 0)

        // Storing the same identifiers again replaces, not adds.
        cache.store(page, scope: Self.scope, identifiers: ["coins_100", "gone"], now: now)
        #expect(cache.byteCount == (productBytes + 8 + 9 + overhead) + (8 + 4 + overhead))

        // Expired entries are dropped, with their bytes.
        var later: [ProductAnswer?] = [nil, nil]
        #expect(cache.lookup(scope: Self.scope, identifiers: ["coins_100", "gone"], now: now + .seconds(31), into: &later) == 0)
        #expect(cache.byteCount == 0)
    }

    @Test func aRepeatedItemKeepsTheFirst() {
        let first = UpstreamProduct(id: "a", title: "first", description: "", price: Money(amount: DecimalAmount("1")!, currency: CurrencyCode("EUR")!))
        let second = UpstreamProduct(id: "a", title: "second", description: "", price: Money(amount: DecimalAmount("2")!, currency: CurrencyCode("EUR")!))
        let page = SourcePage(page: UpstreamProductsPage(items: [first, second], notFound: []), maxAgeSeconds: 30)
        #expect(page.encodedProducts["a"] == Product(first).encoded)
        let cache = ResponseCache(maxTTLSeconds: 60)
        cache.store(page, scope: Self.scope, identifiers: ["a"], now: .now)
        var answers: [ProductAnswer?] = [nil]
        _ = cache.lookup(scope: Self.scope, identifiers: ["a"], now: .now, into: &answers)
        #expect(answers == [.product(Product(first).encoded)])
    }

    @Test func nothingIsKeptWithoutMaxAgeOrWithTheCacheOff() {
        let page = Catalog.sample.page(ids: ["coins_100"], country: Self.scope.country, language: nil)
        for (ttl, maxAge) in [(60, nil), (60, 0), (0, 30)] as [(Int, Int?)] {
            let cache = ResponseCache(maxTTLSeconds: ttl)
            cache.store(SourcePage(page: page, maxAgeSeconds: maxAge), scope: Self.scope, identifiers: ["coins_100"], now: .now)
            var answers: [ProductAnswer?] = [nil]
            #expect(cache.lookup(scope: Self.scope, identifiers: ["coins_100"], now: .now, into: &answers) == 0)
            #expect(cache.byteCount == 0)
        }
    }

    @Test func entryCostsCoverTheirLayout() {
        #expect(ResponseCache.entryOverhead >= ResponseCache.measuredEntryOverhead)
        // Not far above it either: the budget should mean what it says.
        #expect(ResponseCache.entryOverhead <= ResponseCache.measuredEntryOverhead + 64)
    }

    /// The byte budget bounds the entries; hit entries outlive a scan of
    /// identifiers asked once; the gauge and the eviction counter follow.
    @Test func theCacheStaysWithinItsByteBudget() {
        let scopeBytes = 8
        // Unknown identifiers of 8 bytes each: the same cost for every one.
        let cost = ResponseCache.entryOverhead + scopeBytes + 8
        let metrics = GatewayMetrics()
        let cache = ResponseCache(maxTTLSeconds: 60, maxBytes: 4 * cost + cost / 2, metrics: metrics)
        let now = MonotonicInstant.now
        func store(_ ids: [String]) {
            let page = SourcePage(page: Catalog.sample.page(ids: ids, country: Self.scope.country, language: Self.scope.language), maxAgeSeconds: 30)
            cache.store(page, scope: Self.scope, identifiers: ids, now: now)
        }
        func hits(_ ids: [String]) -> Int {
            var answers = [ProductAnswer?](repeating: nil, count: ids.count)
            return cache.lookup(scope: Self.scope, identifiers: ids, now: now, into: &answers)
        }
        store(["hot_0000"])
        #expect(hits(["hot_0000"]) == 1)
        for number in 0 ..< 10 {
            store([String(format: "scan%04d", number)])
            #expect(cache.byteCount <= 4 * cost + cost / 2)
        }
        #expect(cache.count == 4)
        #expect(cache.byteCount == 4 * cost)
        // The hit entry and the newest three of the scan.
        #expect(hits(["hot_0000"]) == 1)
        #expect(hits(["scan0009", "scan0008", "scan0007", "scan0006", "scan0000"]) == 3)
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(text.contains("gateway_cache_evictions_total 7\n"))
        #expect(text.contains("gateway_cache_bytes \(4 * cost)\n") || text.contains("gateway_cache_bytes \(4 * cost).0\n"))

        // An entry larger than the budget is not kept; 0 keeps nothing.
        let tiny = ResponseCache(maxTTLSeconds: 60, maxBytes: cost - 1)
        let page = SourcePage(page: Catalog.sample.page(ids: ["hot_0000"], country: Self.scope.country, language: Self.scope.language), maxAgeSeconds: 30)
        tiny.store(page, scope: Self.scope, identifiers: ["hot_0000"], now: now)
        #expect(tiny.count == 0)
        let off = ResponseCache(maxTTLSeconds: 60, maxBytes: 0)
        off.store(page, scope: Self.scope, identifiers: ["hot_0000"], now: now)
        #expect(off.count == 0)
    }
}
