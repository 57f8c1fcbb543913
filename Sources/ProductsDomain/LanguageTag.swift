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
        // Runs once per call with a language: the canonical form is built
        // in a stack buffer, and a tag already in canonical case (the
        // usual) is kept as the caller's string.
        let parsed: (text: String, primaryLanguage: String)? = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.maxLength) { output in
            let canonicalized: (length: Int, primaryLength: Int)?? = text.utf8.withContiguousStorageIfAvailable { input in
                Self.canonicalize(input, into: output)
            }
            guard let (length, primaryLength) = canonicalized ?? Array(text.utf8).withUnsafeBufferPointer({ Self.canonicalize($0, into: output) }) else {
                return nil
            }
            let canonical = UnsafeBufferPointer(rebasing: output[..<length])
            let primary = String(decoding: UnsafeBufferPointer(rebasing: output[..<primaryLength]), as: UTF8.self)
            return (text.utf8.elementsEqual(canonical) ? text : String(decoding: canonical, as: UTF8.self), primary)
        }
        guard let parsed else { return nil }
        self.text = parsed.text
        self.primaryLanguage = parsed.primaryLanguage
    }

    /// Writes the canonical form of `input` into `output` (at least as long
    /// as `input`): `language[-Script][-REGION]*(-variant)`. Returns its
    /// length and the primary language's, or `nil` when the tag is not
    /// well-formed.
    private static func canonicalize(_ input: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> (length: Int, primaryLength: Int)? {
        var subtags = Subtags(input: input)
        var length = 0
        func write(_ subtag: Slice<UnsafeBufferPointer<UInt8>>, separated: Bool, _ transform: (Int, UInt8) -> UInt8) {
            if separated {
                output[length] = UInt8(ascii: "-")
                length += 1
            }
            for (offset, byte) in subtag.enumerated() {
                output[length] = transform(offset, byte)
                length += 1
            }
        }

        guard let language = subtags.next(), (2...3).contains(language.count), language.allSatisfy(isLetter) else {
            return nil
        }
        write(language, separated: false) { lowercased($1) }
        let primaryLength = length
        var subtag = subtags.next()
        if let script = subtag, script.count == 4, script.allSatisfy(isLetter) {
            write(script, separated: true) { $0 == 0 ? uppercased($1) : lowercased($1) }
            subtag = subtags.next()
        }
        if let region = subtag {
            if region.count == 2, region.allSatisfy(isLetter) {
                write(region, separated: true) { uppercased($1) }
                subtag = subtags.next()
            } else if region.count == 3, region.allSatisfy(isDigit) {
                write(region, separated: true) { $1 }
                subtag = subtags.next()
            }
        }
        let variantsStart = length
        while let variant = subtag {
            guard isVariant(variant) else { return nil }
            // RFC 5646 section 2.2.5: a variant may appear only once. The
            // variants written so far are compared in the output, already
            // lower case.
            var earlier = Subtags(input: UnsafeBufferPointer(rebasing: output[variantsStart..<length]))
            _ = earlier.next()  // the empty text before the first separator
            while let previous = earlier.next() {
                if previous.elementsEqual(variant.lazy.map(lowercased)) { return nil }
            }
            write(variant, separated: true) { lowercased($1) }
            subtag = subtags.next()
        }
        return (length, primaryLength)
    }

    /// The `-` separated subtags of a tag, empty ones included (so a tag
    /// with `--` or a trailing `-` is refused by the subtag rules).
    private struct Subtags {
        let input: UnsafeBufferPointer<UInt8>
        var position = 0

        mutating func next() -> Slice<UnsafeBufferPointer<UInt8>>? {
            guard position <= input.count else { return nil }
            var end = position
            while end < input.count, input[end] != UInt8(ascii: "-") { end += 1 }
            defer { position = end + 1 }
            return input[position..<end]
        }
    }

    public var description: String { text }

    private static func isVariant(_ subtag: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        guard subtag.allSatisfy({ isLetter($0) || isDigit($0) }) else { return false }
        switch subtag.count {
        case 5...8: return true
        case 4: return isDigit(subtag[subtag.startIndex])
        default: return false
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 0x20 : byte
    }

    private static func uppercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) ? byte - 0x20 : byte
    }
}
