/// An ISO 4217 currency code, upper case (`EUR`).
///
/// Only the shape (three letters) is checked, not the list of currencies in
/// circulation: that list changes, and the upstream is the authority on it.
public struct CurrencyCode: Sendable, Hashable, CustomStringConvertible {
    /// The three upper-case letters.
    public let text: String

    /// Accepts three ASCII letters in any case; lower case is upper-cased.
    public init?(_ text: String) {
        // Read in place, and the text kept as it is when already upper
        // case: no allocation for a code read from an upstream body.
        let utf8 = text.utf8
        guard utf8.count == 3 else { return nil }
        var isUpperCase = true
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): break
            case UInt8(ascii: "a")...UInt8(ascii: "z"): isUpperCase = false
            default: return nil
            }
        }
        guard !isUpperCase else {
            self.text = text
            return
        }
        self.text = String(unsafeUninitializedCapacity: 3) { buffer in
            for (index, byte) in utf8.enumerated() {
                buffer[index] = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) ? byte - 0x20 : byte
            }
            return 3
        }
    }

    public var description: String { text }
}
