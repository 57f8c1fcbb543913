/// Plain text inside a JSON string, eight bytes at a time: the scanner,
/// the writer and the writer-form check step over runs of printable ASCII
/// with one test per word, then read the rest byte by byte.
enum PlainText {
    /// Whether any of the eight bytes of `word` is not plain printable
    /// ASCII inside a string: below 0x20, 0x80 or above, `"` or `\`. The
    /// usual bit tricks for "a byte is zero" and "a byte is less than n";
    /// a borrow can only flag bytes after a flagged one, which the byte loop
    /// then reads exactly.
    @inline(__always)
    static func holdsSpecialByte(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let control = (word &- ones &* 0x20) & ~word
        let quotes = (quote &- ones) & ~quote
        let backslashes = (backslash &- ones) & ~backslash
        return (control | quotes | backslashes | word) & highs != 0
    }

    /// The end of the run of plain printable ASCII in `bytes` that starts
    /// at `start`, found eight bytes at a time; the caller reads the bytes
    /// from there on one by one (the run may go on for up to seven more).
    @inline(__always)
    static func skipWords(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = bytes.baseAddress else { return start }
        var position = start
        while bytes.count - position >= 8 {
            let word = UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self)
            if holdsSpecialByte(word) { break }
            position += 8
        }
        return position
    }
}
