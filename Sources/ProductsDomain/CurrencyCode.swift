/// An ISO 4217 currency code, upper case (`EUR`).
///
/// Only the shape (three letters) is checked, not the list of currencies in
/// circulation: that list changes, and the upstream is the authority on it.
public struct CurrencyCode: Sendable, Hashable, CustomStringConvertible {
    /// The three upper-case letters.
    public let text: String

    /// Accepts three ASCII letters in any case; lower case is upper-cased.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 3 else { return nil }
        var upper: [UInt8] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): upper.append(byte)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): upper.append(byte - 0x20)
            default: return nil
            }
        }
        self.text = String(decoding: upper, as: UTF8.self)
    }

    public var description: String { text }
}
