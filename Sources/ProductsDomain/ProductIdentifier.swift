/// An Onside product identifier (a slug such as `premium_monthly`): 1 to 128
/// characters of `A-Z a-z 0-9 . _ -`.
///
/// The alphabet needs no percent-encoding in the upstream query and cannot hide
/// a `,` that would split one identifier into two upstream ids.
public struct ProductIdentifier: Sendable, Hashable, CustomStringConvertible {
    /// The identifier, exactly as given (identifiers are case-sensitive).
    public let text: String

    /// The longest identifier accepted, in characters.
    public static let maxLength = 128

    /// The accepted form, worded for error messages.
    public static let formDescription = "1 to \(maxLength) characters of A-Z a-z 0-9 . _ -"

    /// Accepts `text` when it has the identifier form; `nil` otherwise.
    public init?(_ text: String) {
        guard Self.isValid(text) else { return nil }
        self.text = text
    }

    /// Whether `text` has the identifier form.
    public static func isValid(_ text: String) -> Bool {
        // Runs for every identifier of every call: a loop over the bytes
        // in place, without ranges or closures per byte.
        text.utf8.withContiguousStorageIfAvailable(isValid) ?? Array(text.utf8).withUnsafeBufferPointer(isValid)
    }

    private static func isValid(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard utf8.count >= 1, utf8.count <= maxLength else { return false }
        for byte in utf8 {
            let letter = byte | 0x20  // ASCII letters in lower case
            guard (letter >= UInt8(ascii: "a") && letter <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            else { return false }
        }
        return true
    }

    public var description: String { text }
}
