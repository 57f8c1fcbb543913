package import MemoryTier
package import EventTransport
import Glibc
import JSONRPC
package import ProductsDomain

/// One identifier's answer as the shared tier stores it in Redis: the
/// product's ready JSON bytes (or "unknown"), with its freshness and stale
/// windows, so a replica that reads it keeps it in memory for the rest of
/// its time.
///
/// The format is versioned in the key (``SharedTierKeys``) and checked by a
/// magic in the value, so a format change never reads an old entry wrongly
/// and bytes someone else wrote are ignored:
///
///     "OGW1" | fresh-until (Unix ms, 8 bytes BE) | stale-if-error s (4 BE)
///            | stale-while-revalidate s (4 BE) | "P" + product JSON, or "U"
package struct SharedCacheEntry: Equatable, Sendable {
    package var answer: ProductAnswer
    /// Wall-clock end of freshness, Unix milliseconds (replicas share the
    /// wall clock, not a monotonic one).
    package var freshUntilUnixMS: Int64
    package var staleIfErrorSeconds: Int32
    package var revalidateSeconds: Int32

    package static let magic: [UInt8] = Array("OGW1".utf8)
    package static let headerCount = 4 + 8 + 4 + 4 + 1
    /// The largest entry read: the contract's cap on anything read from Redis.
    package static let maxBytes = 1 << 20

    /// The times an entry may hold: from the epoch to the year 2200. Anything
    /// else is not an entry this format wrote (whatever wrote it), and is
    /// refused where it is decoded, so no arithmetic on it can overflow.
    package static let freshUntilRange: ClosedRange<Int64> = 0...7_258_118_400_000
    /// The windows an entry may hold: the gateway writes at most
    /// `GATEWAY_CACHE_MAX_STALE_S`, whose largest setting is 7 days.
    package static let windowRange: ClosedRange<Int32> = 0...604_800

    /// Milliseconds the entry may still serve in some way (fresh or one of
    /// its stale windows) from `freshUntilUnixMS`: the key's `PX`.
    package func keepMilliseconds(nowUnixMS: Int64) -> Int64 {
        let window = Int64(max(staleIfErrorSeconds, revalidateSeconds)).multipliedReportingOverflow(by: 1000)
        let left = freshUntilUnixMS.subtractingReportingOverflow(nowUnixMS)
        guard !window.overflow, !left.overflow else { return 0 }
        let keep = left.partialValue.addingReportingOverflow(window.partialValue)
        return keep.overflow ? 0 : keep.partialValue
    }

    /// How long the entry stays fresh from `nowUnixMS`, at most `cap`
    /// (a replica keeps nothing longer than `GATEWAY_CACHE_MAX_TTL_S`,
    /// whatever an entry says); negative once it went stale.
    package func freshFor(nowUnixMS: Int64, cap: Duration) -> Duration {
        let left = freshUntilUnixMS.subtractingReportingOverflow(nowUnixMS)
        guard !left.overflow else { return left.partialValue < 0 ? cap : .zero }
        return min(.milliseconds(left.partialValue), cap)
    }

    /// The entry's bytes.
    package var encoded: [UInt8] {
        var command = RedisCommand(reservingBytes: encodedCount, arguments: 1)
        append(to: &command)
        return command.bytes
    }

    /// How many bytes ``encoded`` has.
    package var encodedCount: Int {
        Self.headerCount + (answer.product?.bytes.count ?? 0)
    }

    /// Appends the entry's bytes to `command`, as one argument, with no
    /// buffer of their own (a miss stores one entry per identifier).
    package func append(to command: inout RedisCommand) {
        command.beginArgument()
        command.appendPart(Self.magic)
        withUnsafeBytes(of: freshUntilUnixMS.bigEndian) { command.appendPart($0) }
        withUnsafeBytes(of: staleIfErrorSeconds.bigEndian) { command.appendPart($0) }
        withUnsafeBytes(of: revalidateSeconds.bigEndian) { command.appendPart($0) }
        switch answer {
        case .product(let product):
            command.appendPart(byte: UInt8(ascii: "P"))
            command.appendPart(product.bytes)
        case .unknown:
            command.appendPart(byte: UInt8(ascii: "U"))
        }
        command.endArgument()
    }

    /// Reads an entry for `identifier`; nil for anything that is not one
    /// this format wrote: a wrong magic or length, negative windows, a
    /// product over ``ProductAnswer/maxProductBytes``, a
    /// product that does not start as the gateway writes a product of
    /// `identifier` (`{"productIdentifier":"…",`), or whose bytes are not
    /// exactly what ``JSONWriter`` writes (``EncodedJSON/init(validating:maxDepth:)``,
    /// one pass, no tree): what is spliced into an answer is always one valid
    /// JSON value, whatever Redis held.
    package init?(decoding bytes: [UInt8], identifier: String) {
        guard bytes.count >= Self.headerCount, bytes.count <= Self.maxBytes, bytes.starts(with: Self.magic) else { return nil }
        func integer<T: FixedWidthInteger>(_ type: T.Type, at offset: Int) -> T {
            var value: T = 0
            for byte in bytes[offset..<(offset + MemoryLayout<T>.size)] { value = value << 8 | T(truncatingIfNeeded: byte) }
            return value
        }
        freshUntilUnixMS = integer(Int64.self, at: 4)
        staleIfErrorSeconds = integer(Int32.self, at: 12)
        revalidateSeconds = integer(Int32.self, at: 16)
        guard Self.freshUntilRange.contains(freshUntilUnixMS),
              Self.windowRange.contains(staleIfErrorSeconds), Self.windowRange.contains(revalidateSeconds) else { return nil }
        switch bytes[20] {
        case UInt8(ascii: "U"):
            guard bytes.count == Self.headerCount else { return nil }
            answer = .unknown
        case UInt8(ascii: "P"):
            let payload = Array(bytes[Self.headerCount...])
            // What anyone who can write to Redis wrote: the product must be
            // one the gateway could have answered (at most 64 KiB, its bytes
            // as the gateway writes JSON, and the public shape of a product).
            guard payload.count <= ProductAnswer.maxProductBytes, Self.payload(payload, answers: identifier),
                  let product = EncodedJSON(validating: payload, maxDepth: 16),
                  ProductSchema.admits(payload, identifier: identifier) else { return nil }
            answer = .product(product)
        default:
            return nil
        }
    }

    /// Whether `payload` begins as ``Product/encoded`` writes the product of
    /// `identifier` (identifiers need no escapes: `A-Z a-z 0-9 . _ -`).
    package static func payload(_ payload: [UInt8], answers identifier: String) -> Bool {
        // Compared piece by piece in place: this runs for every entry of
        // every shared-tier hit.
        // With memcmp: a generic elementsEqual of a slice and a UTF-8 view
        // went byte by byte through both collections' indices.
        let opening: StaticString = #"{"productIdentifier":""#
        var name = identifier
        return name.withUTF8 { name in
            payload.withUnsafeBufferPointer { bytes in
                let headCount = opening.utf8CodeUnitCount + name.count + 1
                guard bytes.count > headCount, let base = bytes.baseAddress,
                      memcmp(base, opening.utf8Start, opening.utf8CodeUnitCount) == 0,
                      name.isEmpty || memcmp(base + opening.utf8CodeUnitCount, name.baseAddress!, name.count) == 0,
                      bytes[headCount - 1] == UInt8(ascii: "\"")
                else { return false }
                let next = bytes[headCount]
                return next == UInt8(ascii: ",") || next == UInt8(ascii: "}")
            }
        }
    }

    package init(answer: ProductAnswer, freshUntilUnixMS: Int64, staleIfErrorSeconds: Int32, revalidateSeconds: Int32) {
        self.answer = answer
        self.freshUntilUnixMS = freshUntilUnixMS
        self.staleIfErrorSeconds = staleIfErrorSeconds
        self.revalidateSeconds = revalidateSeconds
    }
}

/// The keys the shared tier writes, all under `GATEWAY_REDIS_PREFIX`, with
/// the format version in them.
package struct SharedTierKeys: Sendable {
    package let prefix: String

    package init(prefix: String) {
        self.prefix = prefix
    }

    /// `{prefix}v1:p:{app}:{country}:{language or -}:{identifier}`: the
    /// fields after the app have no `:`, so a key names one scope.
    package func entry(_ scope: FetchScope, _ identifier: String) -> [UInt8] {
        key("v1:p:", scope, identifier)
    }

    /// `{prefix}{kind}{app}:{country}:{language or -}:{identifier}`.
    package func key(_ kind: StaticString, _ scope: FetchScope, _ identifier: String) -> [UInt8] {
        var command = RedisCommand(reservingBytes: 64, arguments: 1)
        append(kind, scope, identifier, to: &command)
        return command.argumentBytes(0)
    }

    /// Appends `{prefix}{kind}{app}:{country}:{language or -}:`, what every
    /// key of one kind and scope begins with, to the argument being written.
    private func appendHead(_ kind: StaticString, _ scope: FetchScope, to command: inout RedisCommand) {
        command.appendPart(prefix)
        command.appendPart(kind)
        command.appendPart(scope.appID)
        command.appendPart(byte: UInt8(ascii: ":"))
        command.appendPart(scope.country.text)
        command.appendPart(byte: UInt8(ascii: ":"))
        if let language = scope.language { command.appendPart(language.text) } else { command.appendPart(byte: UInt8(ascii: "-")) }
        command.appendPart(byte: UInt8(ascii: ":"))
    }

    /// ``key(_:_:_:)`` written straight into a command, as one argument.
    package func append(_ kind: StaticString, _ scope: FetchScope, _ identifier: String, to command: inout RedisCommand) {
        command.beginArgument()
        appendHead(kind, scope, to: &command)
        command.appendPart(identifier)
        command.endArgument()
    }

    /// Appends the keys of `kind` for each of `identifiers`, in order. The
    /// part before the identifier, the same for all, is written once, in
    /// the first key, and copied from there for the others: a shared-tier
    /// miss writes two or three keys per identifier, and writing each part
    /// of each key cost more than the rest of the command.
    package func append(_ kind: StaticString, _ scope: FetchScope, _ identifiers: [String], to command: inout RedisCommand) {
        guard let first = identifiers.first else { return }
        command.beginArgument()
        let headStart = command.byteCount
        appendHead(kind, scope, to: &command)
        let head = headStart ..< command.byteCount
        command.appendPart(first)
        command.endArgument()
        command.appendArguments(repeating: head, eachAfterTheFirst: identifiers)
    }
}
