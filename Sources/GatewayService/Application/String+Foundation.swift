/// The `String` helpers of Foundation's the configuration reads with, for a
/// module that links FoundationEssentials only (Foundation's versions live
/// in the module that carries ICU's data, tens of MB in a static build).
/// Same names and meaning, so the call sites read as before.
extension StringProtocol {
    /// Text with the given characters removed from both ends.
    func trimmingCharacters(in set: TrimmedCharacters) -> String {
        let keep: (Character) -> Bool = { character in
            switch set {
            case .whitespaces: !(character.isWhitespace && !character.isNewline)
            case .whitespacesAndNewlines: !character.isWhitespace
            }
        }
        guard let first = firstIndex(where: keep), let last = lastIndex(where: keep) else { return "" }
        return String(self[first...last])
    }

    /// The first range where `other` occurs, compared scalar by scalar.
    func range(of other: String) -> Range<Index>? {
        guard !other.isEmpty else { return nil }
        var start = startIndex
        while start < endIndex {
            if self[start...].unicodeScalars.starts(with: other.unicodeScalars) {
                let end = unicodeScalars.index(start, offsetBy: other.unicodeScalars.count)
                return start..<end
            }
            start = unicodeScalars.index(after: start)
        }
        return nil
    }

    /// The text with every `%XX` replaced by the byte it encodes; nil when a
    /// `%` is not followed by two hexadecimal digits or the bytes are not
    /// UTF-8 (as Foundation's).
    var removingPercentEncoding: String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Which characters ``StringProtocol/trimmingCharacters(in:)`` removes, as
/// Foundation's sets of the same names: `whitespaces` are spaces and tabs,
/// `whitespacesAndNewlines` also line breaks.
enum TrimmedCharacters {
    case whitespaces
    case whitespacesAndNewlines
}
