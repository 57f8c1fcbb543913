@testable import GatewayMetrics
@testable import MemoryTier
@testable import SharedTier
import JSONRPC
import ProductsDomain
import Testing

/// Whatever Redis holds: entries and messages damaged every way (each
/// number at its edges, cut short at every length, every bit flipped) are
/// refused or read as something the gateway could have written; nothing
/// traps, and nothing read can answer for an identifier that was not asked.
@Suite("Shared tier: damaged entries and messages")
struct SharedTierDamageTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)

    static var product: EncodedJSON {
        let page = Catalog.sample.page(ids: ["premium_monthly"], country: scope.country, language: nil)
        return SourcePage(page: page, maxAgeSeconds: 30).encodedProducts["premium_monthly"]!
    }

    static func entry(freshUntil: Int64 = 1_800_000_000_000, staleIfError: Int32 = 30, revalidate: Int32 = 7) -> [UInt8] {
        SharedCacheEntry(answer: .product(product), freshUntilUnixMS: freshUntil, staleIfErrorSeconds: staleIfError, revalidateSeconds: revalidate).encoded
    }

    /// The clock values an entry's times meet.
    static let clocks: [Int64] = [.min, -1, 0, 1_800_000_000_000, 7_258_118_400_000, .max]

    /// What every use of a decoded entry computes, which must not trap.
    static func use(_ entry: SharedCacheEntry) {
        for now in clocks {
            _ = entry.keepMilliseconds(nowUnixMS: now)
            _ = entry.freshFor(nowUnixMS: now, cap: .seconds(86_400))
        }
    }

    @Test(arguments: [
        (Int64.min, false), (-1, false), (0, true), (1, true), (7_258_118_400_000, true), (7_258_118_400_001, false), (.max, false),
    ] as [(Int64, Bool)])
    func freshUntilAtItsEdges(value: Int64, accepted: Bool) throws {
        let read = SharedCacheEntry(decoding: Self.entry(freshUntil: value), identifier: "premium_monthly")
        #expect((read != nil) == accepted)
        if let read { Self.use(read) }
    }

    /// The bytes the black-box probe wrote: fresh-until `80 00 … 00`.
    @Test func theCrashingEntryOfTheProbeIsRefused() {
        var bytes = Self.entry()
        bytes.replaceSubrange(4..<12, with: [0x80, 0, 0, 0, 0, 0, 0, 0])
        #expect(SharedCacheEntry(decoding: bytes, identifier: "premium_monthly") == nil)
    }

    @Test(arguments: [(Int32.min, false), (-1, false), (0, true), (604_800, true), (604_801, false), (.max, false)] as [(Int32, Bool)])
    func windowsAtTheirEdges(value: Int32, accepted: Bool) {
        #expect((SharedCacheEntry(decoding: Self.entry(staleIfError: value), identifier: "premium_monthly") != nil) == accepted)
        #expect((SharedCacheEntry(decoding: Self.entry(revalidate: value), identifier: "premium_monthly") != nil) == accepted)
    }

    @Test func anEntryCutShortAtAnyLengthIsRefused() {
        let bytes = Self.entry()
        for length in 0..<bytes.count {
            #expect(SharedCacheEntry(decoding: Array(bytes.prefix(length)), identifier: "premium_monthly") == nil, "cut at \(length)")
        }
    }

    @Test func anEntryOverOneMebibyteIsRefusedUnread() {
        let unknown = SharedCacheEntry(answer: .unknown, freshUntilUnixMS: 1, staleIfErrorSeconds: 0, revalidateSeconds: 0).encoded
        #expect(SharedCacheEntry(decoding: unknown + [UInt8](repeating: 0x20, count: 1 << 20), identifier: "x") == nil)
    }

    @Test func everyFlippedBitGivesNothingOrAnEntryForTheSameIdentifier() {
        let bytes = Self.entry()
        for index in bytes.indices {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[index] ^= 1 << bit
                guard let read = SharedCacheEntry(decoding: damaged, identifier: "premium_monthly") else { continue }
                Self.use(read)
                #expect(SharedCacheEntry.freshUntilRange.contains(read.freshUntilUnixMS))
                if case .product(let product) = read.answer {
                    #expect(SharedCacheEntry.payload(product.bytes, answers: "premium_monthly"), "byte \(index) bit \(bit)")
                    #expect((try? JSONParser.parse(product.bytes)) != nil, "byte \(index) bit \(bit)")
                }
            }
        }
    }

    @Test func keepAndFreshnessSaturateInsteadOfTrapping() {
        let entry = SharedCacheEntry(answer: .unknown, freshUntilUnixMS: 7_258_118_400_000, staleIfErrorSeconds: 604_800, revalidateSeconds: 0)
        Self.use(entry)
        #expect(entry.freshFor(nowUnixMS: 0, cap: .seconds(60)) == .seconds(60))
        #expect(entry.freshFor(nowUnixMS: 7_258_118_400_000, cap: .seconds(60)) == .zero)
        #expect(entry.keepMilliseconds(nowUnixMS: 7_258_118_400_000) == 604_800_000)
    }

    // MARK: - Messages

    static func success(maxAge: Int? = 30) -> SharedOutcomeMessage {
        let page = SourcePage(
            page: Catalog.sample.page(ids: ["premium_monthly", "coins_100"], country: scope.country, language: nil),
            maxAgeSeconds: maxAge, staleIfErrorSeconds: 9, staleWhileRevalidateSeconds: 4
        )
        return SharedOutcomeMessage(scope: scope, identifiers: ["premium_monthly", "coins_100", "gone"], kind: .success(page))
    }

    static func text(_ members: String, kind: String = #""kind":"released""#, ids: String = #"["a"]"#) -> [UInt8] {
        Array(#"{"v":1,"app":"demo","country":"DE","language":null,"ids":\#(ids),\#(kind)\#(members)}"#.utf8)
    }

    /// The message of the black-box probe, and every number at its edges.
    @Test(arguments: [
        (#","maxAge":30,"staleIfError":-9999999999,"revalidate":null,"products":{}"#, false),
        (#","maxAge":-1,"staleIfError":null,"revalidate":null,"products":{}"#, false),
        (#","maxAge":0,"staleIfError":0,"revalidate":0,"products":{}"#, true),
        (#","maxAge":315360000,"staleIfError":315360000,"revalidate":315360000,"products":{}"#, true),
        (#","maxAge":315360001,"staleIfError":null,"revalidate":null,"products":{}"#, false),
        (#","maxAge":null,"staleIfError":null,"revalidate":9223372036854775807,"products":{}"#, false),
        (#","maxAge":null,"staleIfError":null,"revalidate":99999999999999999999,"products":{}"#, false),
        (#","maxAge":1.5,"staleIfError":null,"revalidate":null,"products":{}"#, false),
    ] as [(String, Bool)])
    func successNumbersAtTheirEdges(members: String, accepted: Bool) {
        let read = SharedOutcomeMessage(decoding: Self.text(members, kind: #""kind":"success""#))
        #expect((read != nil) == accepted)
    }

    @Test(arguments: [
        (#","reason":"serviceUnavailable","status":503,"retryAfter":7"#, true),
        (#","reason":"serviceUnavailable","status":99,"retryAfter":null"#, false),
        (#","reason":"serviceUnavailable","status":600,"retryAfter":null"#, false),
        (#","reason":"serviceUnavailable","status":503,"retryAfter":-1"#, false),
        (#","reason":"serviceUnavailable","status":-9223372036854775808,"retryAfter":null"#, false),
        (#","reason":"internalError","status":null,"retryAfter":null,"detail":"\#(String(repeating: "x", count: 1025))""#, false),
    ] as [(String, Bool)])
    func failureNumbersAtTheirEdges(members: String, accepted: Bool) {
        #expect((SharedOutcomeMessage(decoding: Self.text(members, kind: #""kind":"failure""#)) != nil) == accepted)
    }

    @Test func identifiersAreCheckedBeforeAnythingIsBuilt() {
        let fifty = "[" + (1...50).map { "\"id\($0)\"" }.joined(separator: ",") + "]"
        let fiftyOne = "[" + (1...51).map { "\"id\($0)\"" }.joined(separator: ",") + "]"
        #expect(SharedOutcomeMessage(decoding: Self.text("", ids: fifty), maxIdentifiers: 50) != nil)
        #expect(SharedOutcomeMessage(decoding: Self.text("", ids: fiftyOne), maxIdentifiers: 50) == nil)
        #expect(SharedOutcomeMessage(decoding: Self.text("", ids: "[]")) == nil)
        #expect(SharedOutcomeMessage(decoding: Self.text("", ids: #"["a b"]"#)) == nil)
        #expect(SharedOutcomeMessage(decoding: Self.text("", ids: #"["\u212Aey"]"#)) == nil)
        #expect(SharedOutcomeMessage(decoding: Self.text("", ids: "[" + String(repeating: "\"", count: 1) + String(repeating: "a", count: 129) + "\"]")) == nil)
        // A product for an identifier the message does not name.
        let stray = #","maxAge":1,"staleIfError":null,"revalidate":null,"products":{"b":{"productIdentifier":"b"}}"#
        #expect(SharedOutcomeMessage(decoding: Self.text(stray, kind: #""kind":"success""#)) == nil)
        // Over 1 MiB, refused before it is parsed.
        let huge = Self.text(#","pad":""# + String(repeating: "x", count: 1 << 20) + "\"")
        #expect(SharedOutcomeMessage(decoding: huge) == nil)
    }

    /// What the gateway writes stays inside what it reads: an upstream's
    /// huge `max-age` is clamped into the range, not refused by the others.
    @Test func aHugeMaxAgeIsWrittenClamped() throws {
        let read = try #require(SharedOutcomeMessage(decoding: Self.success(maxAge: .max).encoded))
        guard case .success(let page) = read.kind else { Issue.record("not a success"); return }
        #expect(page.maxAgeSeconds == 315_360_000)
    }

    @Test func aMessageCutShortAtAnyLengthIsRefused() {
        let bytes = Self.success().encoded
        for length in 0..<bytes.count {
            #expect(SharedOutcomeMessage(decoding: Array(bytes.prefix(length))) == nil, "cut at \(length)")
        }
    }

    @Test func everyFlippedBitGivesNothingOrAMessageInRange() {
        let bytes = Self.success().encoded
        for index in bytes.indices {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[index] ^= 1 << bit
                guard let read = SharedOutcomeMessage(decoding: damaged) else { continue }
                #expect(read.identifiers.allSatisfy(ProductIdentifier.isValid))
                guard case .success(let page) = read.kind else { continue }
                for (identifier, product) in page.encodedProducts {
                    #expect(read.identifiers.contains(identifier), "byte \(index) bit \(bit)")
                    #expect(SharedCacheEntry.payload(product.bytes, answers: identifier), "byte \(index) bit \(bit)")
                }
                for seconds in [page.maxAgeSeconds, page.staleIfErrorSeconds, page.staleWhileRevalidateSeconds] {
                    #expect(seconds.map(SharedOutcomeMessage.secondsRange.contains) ?? true)
                }
                // What a replica does with it: store it as entries.
                _ = SharedTier.window(page.staleIfErrorSeconds, cap: 604_800)
                _ = SharedTier.window(page.staleWhileRevalidateSeconds, cap: 604_800)
            }
        }
    }
}
