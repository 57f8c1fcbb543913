extension EncodedJSON {
    /// Bytes from elsewhere (a cache shared between processes) taken as an
    /// encoded value only when they are exactly what ``JSONWriter`` writes
    /// for one complete value: compact (no whitespace outside strings),
    /// well-formed UTF-8, strings escaped as the writer escapes them
    /// (`\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r`, `\u00xx` for the other
    /// control characters, nothing else), RFC 8259 numbers, at most
    /// `maxDepth` levels of nesting, no object with two members of the same
    /// name (a reader that keeps the last would see another value than one
    /// that keeps the first) nor with more than ``maxObjectMembers``
    /// members. Anything else gives nil.
    ///
    /// Checking costs one pass over the bytes and no allocation, where
    /// parsing them into a tree and writing it again would cost both; the
    /// invariant of ``EncodedJSON`` holds either way.
    /// The most members an object may have to be validated: each is
    /// compared with those before it, from a list kept on the stack.
    public static let maxObjectMembers = 64

    public init?(validating bytes: [UInt8], maxDepth: Int = 64) {
        let valid = bytes.withUnsafeBufferPointer { buffer in
            var scanner = WriterFormScanner(input: buffer, maxDepth: maxDepth)
            return scanner.scanDocument()
        }
        guard valid else { return nil }
        self.init(writtenBytes: bytes)
    }
}

/// A one-pass check that bytes are the writer's form of one JSON value.
private struct WriterFormScanner {
    let input: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var position = 0

    init(input: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.input = input
        self.maxDepth = maxDepth
    }

    mutating func scanDocument() -> Bool {
        scanValue(depth: 0) && position == input.count
    }

    private var current: UInt8? { position < input.count ? input[position] : nil }

    private mutating func consume(_ byte: UInt8) -> Bool {
        guard current == byte else { return false }
        position += 1
        return true
    }

    private mutating func consume(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard input.count - position >= count else { return false }
        for offset in 0..<count where input[position + offset] != literal.utf8Start[offset] { return false }
        position += count
        return true
    }

    private mutating func scanValue(depth: Int) -> Bool {
        guard let byte = current else { return false }
        switch byte {
        case UInt8(ascii: "{"):
            guard depth < maxDepth else { return false }
            position += 1
            if consume(UInt8(ascii: "}")) { return true }
            return withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: EncodedJSON.maxObjectMembers) { names in
                var count = 0
                repeat {
                    let start = position
                    guard count < names.count, scanString() else { return false }
                    // In the writer's form a name has one spelling, so
                    // equal names are equal bytes.
                    let name = start..<position
                    for index in 0..<count where sameBytes(names[index], name) { return false }
                    names.initializeElement(at: count, to: name)
                    count += 1
                    guard consume(UInt8(ascii: ":")), scanValue(depth: depth + 1) else { return false }
                } while consume(UInt8(ascii: ","))
                return consume(UInt8(ascii: "}"))
            }
        case UInt8(ascii: "["):
            guard depth < maxDepth else { return false }
            position += 1
            if consume(UInt8(ascii: "]")) { return true }
            repeat {
                guard scanValue(depth: depth + 1) else { return false }
            } while consume(UInt8(ascii: ","))
            return consume(UInt8(ascii: "]"))
        case UInt8(ascii: "\""):
            return scanString()
        case UInt8(ascii: "t"):
            return consume("true")
        case UInt8(ascii: "f"):
            return consume("false")
        case UInt8(ascii: "n"):
            return consume("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return scanNumber()
        default:
            return false
        }
    }

    private func sameBytes(_ first: Range<Int>, _ second: Range<Int>) -> Bool {
        guard first.count == second.count else { return false }
        for offset in 0..<first.count where input[first.lowerBound + offset] != input[second.lowerBound + offset] { return false }
        return true
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    private mutating func scanNumber() -> Bool {
        _ = consume(UInt8(ascii: "-"))
        if consume(UInt8(ascii: "0")) {
            // No leading zeros.
        } else {
            guard scanDigits() else { return false }
        }
        if consume(UInt8(ascii: ".")) {
            guard scanDigits() else { return false }
        }
        if consume(UInt8(ascii: "e")) || consume(UInt8(ascii: "E")) {
            if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
            guard scanDigits() else { return false }
        }
        return true
    }

    private mutating func scanDigits() -> Bool {
        let start = position
        while let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { position += 1 }
        return position > start
    }

    private mutating func scanString() -> Bool {
        guard consume(UInt8(ascii: "\"")) else { return false }
        while true {
            // Runs of plain printable ASCII, most of a product's text, eight
            // bytes at a time, then byte by byte; the switch below handles
            // everything else.
            position = PlainText.skipWords(in: input, from: position)
            while position < input.count {
                let byte = input[position]
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
                position += 1
            }
            guard let byte = current else { return false }
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return true
            case UInt8(ascii: "\\"):
                position += 1
                guard let escaped = current else { return false }
                position += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "b"), UInt8(ascii: "t"),
                     UInt8(ascii: "n"), UInt8(ascii: "f"), UInt8(ascii: "r"):
                    continue
                case UInt8(ascii: "u"):
                    // The writer uses \u only for the control characters
                    // without a short form: \u0000 to \u001f, lower-case hex.
                    guard input.count - position >= 4, input[position] == UInt8(ascii: "0"), input[position + 1] == UInt8(ascii: "0")
                    else { return false }
                    let high = input[position + 2], low = input[position + 3]
                    guard high == UInt8(ascii: "0") || high == UInt8(ascii: "1"),
                          (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(low) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(low)
                    else { return false }
                    let value = (high - UInt8(ascii: "0")) << 4 | (low <= UInt8(ascii: "9") ? low - UInt8(ascii: "0") : low - UInt8(ascii: "a") + 10)
                    guard ![0x08, 0x09, 0x0A, 0x0C, 0x0D].contains(value) else { return false }
                    position += 4
                default:
                    return false
                }
            case 0x00..<0x20:
                return false
            case 0x20..<0x80:
                position += 1
            default:
                guard scanUTF8Sequence() else { return false }
            }
        }
    }

    /// One well-formed multi-byte UTF-8 sequence (no overlong forms, no
    /// surrogates, nothing past U+10FFFF).
    private mutating func scanUTF8Sequence() -> Bool {
        let lead = input[position]
        let count: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: count = 2
        case 0xE0: count = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: count = 3
        case 0xED: count = 3; high = 0x9F
        case 0xF0: count = 4; low = 0x90
        case 0xF1...0xF3: count = 4
        case 0xF4: count = 4; high = 0x8F
        default: return false
        }
        guard input.count - position >= count else { return false }
        let second = input[position + 1]
        guard second >= low, second <= high else { return false }
        for offset in 2..<count where !(0x80...0xBF).contains(input[position + offset]) { return false }
        position += count
        return true
    }
}
