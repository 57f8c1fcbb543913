import MemoryTier
import SharedTier
import JSONRPC
import ProductsDomain

/// What Redis may hold, read by the shared tier, each against a reference
/// reading written for clarity, not speed: the writer-form validator
/// (``EncodedJSON/init(validating:maxDepth:)``) against parsing and writing
/// again, the product schema (``ProductSchema``) against a check of the
/// parsed tree, an entry against a field-by-field reading of its format, and
/// a message against its own invariants and a round trip.
extension FuzzCase {
    /// The identifier entries are read for.
    static let entryIdentifier = "premium_monthly"

    func checkSharedTierReading() {
        checkWriterFormValidator(input)
        checkProductSchema(input)
        checkEntry(input)
        // The input as an entry's product, behind a valid header: JSON
        // seeds reach the payload checks this way.
        let header = SharedCacheEntry(answer: .unknown, freshUntilUnixMS: 1_800_000_000_000, staleIfErrorSeconds: 30, revalidateSeconds: 0).encoded.dropLast()
        checkEntry(Array(header) + [UInt8(ascii: "P")] + input)
        checkMessage(input)
    }

    // MARK: - The writer form

    /// The reference: bytes are in the writer's form when they parse and the
    /// writer writes them back byte for byte.
    static func referenceWriterForm(_ bytes: [UInt8], maxDepth: Int) -> Bool? {
        guard let value = try? JSONParser.parse(bytes, limits: .init(maxDepth: maxDepth + 8)) else { return false }
        guard value.serialized() == bytes else { return false }
        // Nesting near the limit is counted differently by the two; the
        // reference does not decide there.
        return depth(of: value) < maxDepth - 1 ? true : nil
    }

    private func checkWriterFormValidator(_ bytes: [UInt8]) {
        let validated = EncodedJSON(validating: bytes, maxDepth: 16) != nil
        if validated {
            require(Self.referenceWriterForm(bytes, maxDepth: 16) != false, "the writer-form validator accepted bytes the writer would not write: \(Self.shown(bytes))")
        } else {
            require(Self.referenceWriterForm(bytes, maxDepth: 16) != true, "the writer-form validator refused bytes the writer writes: \(Self.shown(bytes))")
        }
    }

    // MARK: - The public shape of a product

    /// The reference: the product's tree has exactly the schema's members,
    /// each of its type (``ProductSchema`` reads the bytes instead).
    static func referenceProductFits(_ value: JSONValue, identifier: String) -> Bool {
        func members(_ value: JSONValue, _ names: Set<String>) -> JSONObject? {
            guard case .object(let object) = value, Set(object.map(\.key)) == names, object.map(\.key).count == names.count else { return nil }
            return object
        }
        func string(_ value: JSONValue?) -> String? {
            if case .string(let text)? = value { return text }
            return nil
        }
        func stringOrNull(_ value: JSONValue?) -> Bool {
            if case .null? = value { return true }
            return string(value) != nil
        }
        func money(_ value: JSONValue?) -> Bool {
            guard let value, let object = members(value, ["value", "currencyCode"]), case .number? = object["value"],
                  let code = string(object["currencyCode"]) else { return false }
            return code.utf8.count == 3 && code.utf8.allSatisfy { (65...90).contains($0) }
        }
        func period(_ value: JSONValue?) -> Bool {
            guard let value, let object = members(value, ["unit", "numberOfUnits"]),
                  let unit = string(object["unit"]), ["day", "week", "month", "year"].contains(unit),
                  case .number(let text)? = object["numberOfUnits"], let count = Int(text), String(count) == text else { return false }
            return (1...999_999_999).contains(count)
        }
        func offer(_ value: JSONValue?) -> Bool {
            guard let value, let object = members(value, ["price", "period"]) else { return false }
            return money(object["price"]) && period(object["period"])
        }
        func nullOr(_ value: JSONValue?, _ check: (JSONValue?) -> Bool) -> Bool {
            if case .null? = value { return true }
            return check(value)
        }
        let names: Set<String> = [
            "productIdentifier", "localizedTitle", "localizedDescription", "iconUrl", "price",
            "subscriptionPeriod", "subscriptionGroupIdentifier", "introductoryPrice", "discountedPrice",
        ]
        guard let product = members(value, names) else { return false }
        return string(product["productIdentifier"]) == identifier
            && string(product["localizedTitle"]) != nil && string(product["localizedDescription"]) != nil
            && stringOrNull(product["iconUrl"]) && stringOrNull(product["subscriptionGroupIdentifier"])
            && money(product["price"]) && nullOr(product["subscriptionPeriod"], period)
            && nullOr(product["introductoryPrice"], offer) && nullOr(product["discountedPrice"], offer)
    }

    private func checkProductSchema(_ bytes: [UInt8]) {
        // Where the tree is the bytes exactly (no duplicate member the tree
        // would fold), the two readings agree.
        guard let value = try? JSONParser.parse(bytes, limits: .init(maxDepth: 8)), value.serialized() == bytes else { return }
        let admitted = ProductSchema.admits(bytes, identifier: Self.entryIdentifier)
        let reference = Self.referenceProductFits(value, identifier: Self.entryIdentifier)
        require(admitted == reference, "the product schema \(admitted ? "admitted" : "refused") what its reference \(reference ? "admits" : "refuses"): \(Self.shown(bytes))")
    }

    // MARK: - Entries

    /// The reference reading of an entry, field by field.
    static func referenceEntry(_ bytes: [UInt8], identifier: String) -> SharedCacheEntry? {
        guard bytes.count >= 21, bytes.count <= 1 << 20, Array(bytes[0..<4]) == Array("OGW1".utf8) else { return nil }
        func bigEndian(_ range: Range<Int>) -> UInt64 { bytes[range].reduce(0) { $0 << 8 | UInt64($1) } }
        let freshUntil = Int64(bitPattern: bigEndian(4..<12))
        let staleIfError = Int32(bitPattern: UInt32(bigEndian(12..<16)))
        let revalidate = Int32(bitPattern: UInt32(bigEndian(16..<20)))
        guard freshUntil >= 0, freshUntil <= 7_258_118_400_000,
              (0...604_800).contains(staleIfError), (0...604_800).contains(revalidate) else { return nil }
        switch bytes[20] {
        case UInt8(ascii: "U"):
            guard bytes.count == 21 else { return nil }
            return SharedCacheEntry(answer: .unknown, freshUntilUnixMS: freshUntil, staleIfErrorSeconds: staleIfError, revalidateSeconds: revalidate)
        case UInt8(ascii: "P"):
            let payload = Array(bytes[21...])
            guard payload.count <= 65536, referenceWriterForm(payload, maxDepth: 16) == true,
                  let object = (try? JSONParser.parse(payload))?.objectValue,
                  object.keys.first == "productIdentifier", object["productIdentifier"]?.stringValue == identifier,
                  referenceProductFits(.object(object), identifier: identifier),
                  let product = EncodedJSON(validating: payload, maxDepth: 16) else { return nil }
            return SharedCacheEntry(answer: .product(product), freshUntilUnixMS: freshUntil, staleIfErrorSeconds: staleIfError, revalidateSeconds: revalidate)
        default:
            return nil
        }
    }

    private func checkEntry(_ bytes: [UInt8]) {
        let read = SharedCacheEntry(decoding: bytes, identifier: Self.entryIdentifier)
        let reference = Self.referenceEntry(bytes, identifier: Self.entryIdentifier)
        // What an entry key holds is an entry, a lease, or neither: never
        // both, and a lease of any token never reads as an entry.
        require(!(read != nil && SharedLease.isLease(bytes)), "a lease was read as an entry: \(Self.shown(bytes))")
        let lease = SharedLease.value(token: String(decoding: bytes.prefix(64), as: UTF8.self))
        require(SharedCacheEntry(decoding: lease, identifier: Self.entryIdentifier) == nil, "a lease was read as an entry: \(Self.shown(lease))")
        if let read {
            // Near the depth limit the reference does not decide.
            if let reference { require(read == reference, "an entry was read other than its format says: \(Self.shown(bytes))") }
            for now: Int64 in [.min, -1, 0, 1_800_000_000_000, .max] {
                _ = read.keepMilliseconds(nowUnixMS: now)
                _ = read.freshFor(nowUnixMS: now, cap: .seconds(86_400))
            }
            require(read.encoded == bytes, "an entry read does not write back as read: \(Self.shown(bytes))")
        } else {
            require(reference == nil, "an entry its format allows was refused: \(Self.shown(bytes))")
        }
    }

    // MARK: - Messages

    private func checkMessage(_ bytes: [UInt8]) {
        guard let read = SharedOutcomeMessage(decoding: bytes, maxIdentifiers: 50) else { return }
        require(bytes.count <= SharedOutcomeMessage.maxBytes, "a message over the size cap was read")
        require((1...50).contains(read.identifiers.count), "a message naming \(read.identifiers.count) identifiers was read: \(Self.shown(bytes))")
        require(read.identifiers.allSatisfy(ProductIdentifier.isValid), "a message naming an invalid identifier was read: \(Self.shown(bytes))")
        switch read.kind {
        case .success(let page):
            for (identifier, product) in page.encodedProducts {
                require(read.identifiers.contains(identifier), "a message's product for \(identifier), which it does not name, was read: \(Self.shown(bytes))")
                require(SharedCacheEntry.payload(product.bytes, answers: identifier), "a message's product does not answer \(identifier): \(Self.shown(bytes))")
                let tree = try? JSONParser.parse(product.bytes)
                require(tree.map { Self.referenceProductFits($0, identifier: identifier) } == true, "a message's product out of the schema was read: \(Self.shown(bytes))")
            }
            for seconds in [page.maxAgeSeconds, page.staleIfErrorSeconds, page.staleWhileRevalidateSeconds] {
                require(seconds.map(SharedOutcomeMessage.secondsRange.contains) ?? true, "a message's seconds out of range were read: \(Self.shown(bytes))")
            }
        case .failure(let failure):
            require(failure.upstreamStatus.map(SharedOutcomeMessage.statusRange.contains) ?? true, "a failure's status out of range was read: \(Self.shown(bytes))")
            require(failure.retryAfterSeconds.map(SharedOutcomeMessage.secondsRange.contains) ?? true, "a failure's retry-after out of range was read: \(Self.shown(bytes))")
        case .released:
            break
        }
        // The round trip: what a replica reads, it writes the same way.
        guard let again = SharedOutcomeMessage(decoding: read.encoded, maxIdentifiers: 50) else {
            fail("a message read could not be read again once written: \(Self.shown(bytes))")
        }
        require(again.scope == read.scope && again.identifiers == read.identifiers, "a message changed in a round trip: \(Self.shown(bytes))")
        require(again.encoded == read.encoded, "a message's writing changed in a round trip: \(Self.shown(bytes))")
    }
}
