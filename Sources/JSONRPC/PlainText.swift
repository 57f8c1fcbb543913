/// Plain text inside a JSON string, eight bytes at a time: the scanner,
/// the writer and the writer-form check step over runs of printable ASCII
/// with one test per word, then read the rest byte by byte.
enum PlainText {
    /// The bytes of `word` (read little-endian) that are not plain
    /// printable ASCII inside a string, flagged by their high bit: below
    /// 0x20, 0x80 or above, `"` or `\`. The usual bit tricks for "a byte is
    /// zero" and "a byte is less than n"; a borrow can only flag bytes after
    /// a flagged one, so the lowest flag is exact.
    @inline(__always)
    static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let control = (word &- ones &* 0x20) & ~word
        let quotes = (quote &- ones) & ~quote
        let backslashes = (backslash &- ones) & ~backslash
        return (control | quotes | backslashes | word) & highs
    }

    /// The end of the run of plain printable ASCII in `bytes` that starts
    /// at `start`, found eight bytes at a time: the first byte that is not
    /// plain, or, where fewer than eight bytes are left, the first of them
    /// (the caller reads the bytes from there on one by one).
    @inline(__always)
    static func skipWords(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = bytes.baseAddress else { return start }
        var position = start
        while bytes.count - position >= 8 {
            let word = UInt64(littleEndian: UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self))
            let special = specialBytes(word)
            if special != 0 {
                // The lowest flag is exact: the bytes below it are plain.
                return position + special.trailingZeroBitCount >> 3
            }
            position += 8
        }
        return position
    }
}
