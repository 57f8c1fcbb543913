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
        // Read in place: an upstream body carries one amount per price and
        // offer, and copying the bytes out would cost an allocation each.
        let utf8 = text.utf8
        guard (1...Self.maxLength).contains(utf8.count) else { return nil }
        var integerDigits = 0
        var fractionDigits = 0
        var sawPoint = false
        for byte in utf8 {
            if byte == UInt8(ascii: "."), !sawPoint {
                sawPoint = true
            } else if !Self.isDigit(byte) {
                return nil
            } else if sawPoint {
                fractionDigits += 1
            } else {
                integerDigits += 1
            }
        }
        guard integerDigits > 0, !sawPoint || fractionDigits > 0 else { return nil }
        guard integerDigits == 1 || utf8.first != UInt8(ascii: "0") else { return nil }
        self.text = text
    }

    /// The amount as a JSON number with exactly these digits.
    public var jsonValue: JSONValue { .number(text) }

    public var description: String { text }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}
