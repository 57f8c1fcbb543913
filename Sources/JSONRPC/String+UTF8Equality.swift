extension String {
    /// Whether the two strings are the same UTF-8 bytes.
    ///
    /// JSON text is compared code unit by code unit (RFC 8259 section 8.3),
    /// while `String ==` compares canonical equivalence, under which
    /// `"\u{E9}"` equals `"e\u{301}"` and the Kelvin sign U+212A equals `"K"`:
    /// two member names or string values the client wrote differently.
    func hasSameUTF8(as other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        // Over the contiguous bytes: every member lookup of every request
        // lands here, and the views' own iterators cost several times more.
        var left = self
        var right = other
        return left.withUTF8 { a in right.withUTF8 { b in a.elementsEqual(b) } }
    }

    /// Feeds the UTF-8 bytes to `hasher`, in step with
    /// ``hasSameUTF8(as:)``.
    func hashUTF8(into hasher: inout Hasher) {
        hasher.combine(utf8.count)
        let hashed: Void? = utf8.withContiguousStorageIfAvailable { bytes in
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        }
        if hashed == nil {
            for byte in utf8 { hasher.combine(byte) }
        }
    }
}

/// A dictionary key that is a string compared by its UTF-8 bytes.
struct UTF8Key: Hashable {
    let text: String

    static func == (lhs: UTF8Key, rhs: UTF8Key) -> Bool {
        lhs.text.hasSameUTF8(as: rhs.text)
    }

    func hash(into hasher: inout Hasher) {
        text.hashUTF8(into: &hasher)
    }
}
