public import JSONRPC

/// A non-negative decimal amount kept as the exact text the upstream sent (`4.99`, `0.00`, `1200`).
///
/// Amounts never pass through `Double`, so `9.99` is written back as `9.99` and
/// `0.00` keeps its two digits.
public struct DecimalAmount: Sendable, Hashable, CustomStringConvertible {
    /// The digits, for example `4.99`.
    public let text: String

    /// The longest amount accepted, in characters.
    public static let maxLength = 32

    /// Accepts `digits[.digits]`, at most 32 characters. A leading zero is allowed
    /// only alone before the point (`0.99`, not `007`), because the text is written
    /// into the response as a JSON number and JSON forbids leading zeros.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard (1...Self.maxLength).contains(bytes.count) else { return nil }
        let parts = bytes.split(separator: UInt8(ascii: "."), maxSplits: 1, omittingEmptySubsequences: false)
        let integer = parts[0]
        guard !integer.isEmpty, integer.allSatisfy(Self.isDigit) else { return nil }
        guard integer.count == 1 || integer.first != UInt8(ascii: "0") else { return nil }
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].allSatisfy(Self.isDigit) else { return nil }
        }
        self.text = text
    }

    /// The amount as a JSON number with exactly these digits.
    public var jsonValue: JSONValue { .number(text) }

    public var description: String { text }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}
