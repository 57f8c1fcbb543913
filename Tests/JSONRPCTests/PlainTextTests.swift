@testable import JSONRPC
import Testing

/// `PlainText.skipWords`: the scanner, the writer and the writer-form check
/// jump to the byte it returns, so it must be exactly the first byte that is
/// not plain printable ASCII when a word holds one.
@Suite("PlainText")
struct PlainTextTests {
    /// The first index at or after `start` whose byte is not plain, read
    /// byte by byte: the reference.
    static func firstSpecial(in bytes: [UInt8], from start: Int) -> Int {
        var index = start
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x20 || byte >= 0x80 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { break }
            index += 1
        }
        return index
    }

    static let specialBytes: [UInt8] = [0x00, 0x01, 0x0A, 0x1F, 0x22, 0x5C, 0x80, 0xC3, 0xFF]
    /// Neighbours of the special bytes, which the bit tricks' borrows could
    /// confuse with them.
    static let plainBytes: [UInt8] = [0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7E, 0x7F, 0x41]

    @Test(arguments: specialBytes)
    func aSpecialByteIsFoundExactlyAtEveryOffset(special: UInt8) {
        for plain in Self.plainBytes {
            for length in 0 ... 24 {
                for offset in 0 ..< Swift.max(length, 1) {
                    var bytes = [UInt8](repeating: plain, count: length)
                    if length > 0 { bytes[offset] = special }
                    // A second special byte after the first: the borrow of
                    // the first may flag it, never a byte before.
                    if offset + 1 < length { bytes[offset + 1] = 0x00 }
                    for start in 0 ... Swift.min(length, 3) {
                        let skipped = bytes.withUnsafeBufferPointer { PlainText.skipWords(in: $0, from: start) }
                        let reference = Self.firstSpecial(in: bytes, from: start)
                        // It stops at the first special byte, or before the
                        // last (fewer than eight) bytes, never past either.
                        #expect(skipped >= start && skipped <= reference, "\(bytes) from \(start): \(skipped), byte by byte \(reference)")
                        if reference - start >= 0, length - start >= 8, reference < start + 8 {
                            #expect(skipped == reference, "\(bytes) from \(start): \(skipped), byte by byte \(reference)")
                        }
                        if reference < length, skipped != reference {
                            // Only the tail of fewer than eight bytes is left to the byte loop.
                            #expect(length - skipped < 8, "\(bytes) from \(start): stopped at \(skipped) before \(reference)")
                        }
                    }
                }
            }
        }
    }

    @Test func aPlainRunEndsWhereFewerThanEightBytesAreLeft() {
        let bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 21)
        let skipped = bytes.withUnsafeBufferPointer { PlainText.skipWords(in: $0, from: 2) }
        #expect(skipped == 18)
    }
}
