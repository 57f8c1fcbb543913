/// A well-formed BCP 47 language tag, kept in its conventional case
/// (`pt-br` becomes `pt-BR`, `zh-hant-tw` becomes `zh-Hant-TW`).
///
/// The accepted form is the part of RFC 5646 that names a language and where it
/// is spoken: `language[-script][-region]*(-variant)`, at most 35 characters.
/// The language subtag has 2 or 3 letters, the script 4 letters, the region
/// 2 letters or 3 digits, and each variant 5 to 8 letters or digits (or 4 starting
/// with a digit). Extended language subtags, extensions (`-u-…`), private use
/// (`-x-…`) and grandfathered tags are refused: the tag ends up in an
/// `Accept-Language` header, and none of those help pick a title.
public struct LanguageTag: Sendable, Hashable, CustomStringConvertible {
    /// The tag in conventional case: language lower, script title, region upper, variants lower.
    public let text: String
    /// The primary language subtag, lower case (`pt` for `pt-BR`).
    public let primaryLanguage: String

    /// The longest tag accepted, in characters.
    public static let maxLength = 35

    /// Parses and canonicalizes the case of a tag; `nil` when it is not well-formed.
    /// - Parameter text: The caller's text, `-` separated (`_` is not BCP 47 and is refused).
    public init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count <= Self.maxLength else { return nil }
        let subtags = text.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false).map(Array.init)
        guard let language = subtags.first, (2...3).contains(language.count), language.allSatisfy(Self.isLetter) else {
            return nil
        }
        var canonical = [Self.lowercased(language)]
        var index = 1
        if index < subtags.count, subtags[index].count == 4, subtags[index].allSatisfy(Self.isLetter) {
            let script = Self.lowercased(subtags[index])
            canonical.append([script[0] - 0x20] + script.dropFirst())
            index += 1
        }
        if index < subtags.count {
            let region = subtags[index]
            if region.count == 2, region.allSatisfy(Self.isLetter) {
                canonical.append(Self.uppercased(region))
                index += 1
            } else if region.count == 3, region.allSatisfy(Self.isDigit) {
                canonical.append(region)
                index += 1
            }
        }
        var variants: Set<[UInt8]> = []
        while index < subtags.count {
            let variant = subtags[index]
            guard Self.isVariant(variant) else { return nil }
            let lowered = Self.lowercased(variant)
            // RFC 5646 section 2.2.5: a variant may appear only once.
            guard variants.insert(lowered).inserted else { return nil }
            canonical.append(lowered)
            index += 1
        }
        self.text = canonical.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "-")
        self.primaryLanguage = String(decoding: canonical[0], as: UTF8.self)
    }

    public var description: String { text }

    private static func isVariant(_ subtag: [UInt8]) -> Bool {
        guard subtag.allSatisfy({ isLetter($0) || isDigit($0) }) else { return false }
        switch subtag.count {
        case 5...8: return true
        case 4: return isDigit(subtag[0])
        default: return false
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func lowercased(_ subtag: [UInt8]) -> [UInt8] {
        subtag.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 0x20 : $0 }
    }

    private static func uppercased(_ subtag: [UInt8]) -> [UInt8] {
        subtag.map { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) ? $0 - 0x20 : $0 }
    }
}
