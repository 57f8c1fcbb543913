/// The two `String` helpers of Foundation's the configuration reads with,
/// for a module that links FoundationEssentials only (Foundation's versions
/// live in the module that carries ICU's data, tens of MB in a static
/// build). Same names and meaning, so the call sites read as before.
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
}

/// Which characters ``StringProtocol/trimmingCharacters(in:)`` removes, as
/// Foundation's sets of the same names: `whitespaces` are spaces and tabs,
/// `whitespacesAndNewlines` also line breaks.
enum TrimmedCharacters {
    case whitespaces
    case whitespacesAndNewlines
}
