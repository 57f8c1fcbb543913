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
        let utf8 = text.utf8
        guard (1...maxLength).contains(utf8.count) else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }

    public var description: String { text }
}
