/// Reads one JSON document straight from its bytes, value by value, for a
/// caller that knows the shape it wants and builds its own values from it:
/// no ``JSONValue`` tree is made, and members the caller does not want are
/// checked and stepped over without being kept.
///
/// It accepts exactly the documents ``JSONParser`` accepts with the same
/// ``JSONParser/Limits``: the same grammar, escapes, UTF-8 rules and depth
/// limit, and nothing but whitespace after the value. It does not say why it
/// stops. A caller that must explain a refusal parses the same bytes again
/// with ``JSONParser``, whose messages name the offending byte; refusals
/// come from a broken peer, so the second pass costs nothing on the usual
/// path, and the scanner needs no message text, no offsets and no
/// allocation for them.
///
/// The caller drives it. ``peek()`` says what the next value is. A
/// container is entered with ``beginObject()`` or ``beginArray()`` and
/// walked with ``nextMember()`` or ``nextElement()`` until they report its
/// end, reading exactly one value per member or element in between (with
/// ``string()``, ``skipValue()`` or a nested container). ``end()`` checks
/// that nothing follows the document.
package struct JSONScanner {
    /// The input is not JSON that ``JSONParser`` accepts, or not the shape
    /// the caller wants (callers throw it for their own refusals too).
    package struct Refusal: Error {
        package init() {}
    }

    /// What a value is, from its first byte.
    package enum Kind {
        case object, array, string, number, bool, null
    }

    /// A string's content as it stands in the input, between its quotes,
    /// already checked; ``text(of:)`` and ``index(of:in:)`` read it.
    package struct StringToken {
        fileprivate let start: Int
        fileprivate let end: Int
        /// No escapes: the bytes are the text.
        fileprivate let isVerbatim: Bool

        /// At least the number of UTF-8 bytes of the text (its length in
        /// the input, escapes included), for sizing buffers.
        package var utf8CountBound: Int {
            end - start
        }
    }

    private let input: UnsafeBufferPointer<UInt8>
    private let maxDepth: Int
    private var position = 0
    /// How many containers are open.
    private var depth = 0
    /// Bit `n` is set when the container open at depth `n` is an object.
    private var objectBits: UInt64 = 0
    /// Whether the innermost container was just opened: its first member or
    /// element has no comma before it.
    private var atContainerStart = false
    /// Where escaped strings are decoded; untouched (and never allocated)
    /// while strings have no escapes.
    private var scratch: [UInt8] = []

    /// A scanner at the start of `input`.
    ///
    /// - Precondition: `limits.maxDepth` is at most 64, the bits the
    ///   scanner keeps for its open containers (the default is 64).
    package init(_ input: UnsafeBufferPointer<UInt8>, limits: JSONParser.Limits = .init()) {
        precondition(limits.maxDepth <= 64, "JSONScanner keeps at most 64 open containers")
        self.input = input
        self.maxDepth = limits.maxDepth
    }

    // MARK: - Values

    /// What the next value is, after any whitespace; nothing is consumed.
    /// Refuses at the end of the input or at a byte that starts no value.
    /// A `.bool` or `.null` is only checked when it is read (skipped).
    package mutating func peek() throws(Refusal) -> Kind {
        skipWhitespace()
        guard position < input.count else { throw Refusal() }
        switch input[position] {
        case .openBrace: return .object
        case .openBracket: return .array
        case .quote: return .string
        case .minus, UInt8.digitZero ... UInt8.digitNine: return .number
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        default: throw Refusal()
        }
    }

    /// Reads a string value.
    package mutating func string() throws(Refusal) -> StringToken {
        skipWhitespace()
        guard position < input.count, input[position] == .quote else { throw Refusal() }
        let token = try scanString()
        atContainerStart = false
        return token
    }

    /// Reads and checks one whole value of any kind, keeping nothing.
    package mutating func skipValue() throws(Refusal) {
        let base = depth
        while true {
            // One value; containers are opened here and closed below.
            skipWhitespace()
            guard position < input.count else { throw Refusal() }
            switch input[position] {
            case .openBrace, .openBracket:
                let isObject = input[position] == .openBrace
                try open(isObject: isObject)
                skipWhitespace()
                if position < input.count, input[position] == (isObject ? .closeBrace : .closeBracket) {
                    close()
                } else {
                    if isObject {
                        _ = try memberName()
                    }
                    continue
                }
            case .quote:
                _ = try scanString()
            case .minus, UInt8.digitZero ... UInt8.digitNine:
                guard let end = try? JSONParser.scanNumber(in: input, from: position) else { throw Refusal() }
                position = end
            case UInt8(ascii: "t"):
                try expectLiteral("true")
            case UInt8(ascii: "f"):
                try expectLiteral("false")
            case UInt8(ascii: "n"):
                try expectLiteral("null")
            default:
                throw Refusal()
            }

            // The value is complete: close every container opened here that
            // ends right after it.
            while true {
                guard depth > base else {
                    atContainerStart = false
                    return
                }
                skipWhitespace()
                guard position < input.count else { throw Refusal() }
                let isObject = innermostIsObject
                if input[position] == .comma {
                    position += 1
                    if isObject {
                        skipWhitespace()
                        _ = try memberName()
                    }
                    break
                }
                guard input[position] == (isObject ? .closeBrace : .closeBracket) else { throw Refusal() }
                close()
            }
        }
    }

    /// Where the next value starts, after any whitespace (nothing is
    /// consumed): with ``offset`` after reading it, the value's bytes.
    package mutating func valueStart() -> Int {
        skipWhitespace()
        return position
    }

    /// The offset of the next byte to read.
    package var offset: Int { position }

    /// The input's bytes at `range` (a value read, from ``valueStart()`` to
    /// ``offset``), valid while the input is.
    package func bytes(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> {
        precondition(range.lowerBound >= 0 && range.upperBound <= position, "bytes already read")
        return UnsafeBufferPointer(rebasing: input[range])
    }

    /// Checks that only whitespace follows the document.
    package mutating func end() throws(Refusal) {
        precondition(depth == 0, "JSONScanner.end() inside a container")
        skipWhitespace()
        guard position == input.count else { throw Refusal() }
    }

    // MARK: - Containers

    /// Enters the object that is the next value.
    package mutating func beginObject() throws(Refusal) {
        skipWhitespace()
        guard position < input.count, input[position] == .openBrace else { throw Refusal() }
        try open(isObject: true)
    }

    /// The name of the innermost object's next member, with its colon
    /// read, or `nil` when the object has ended (then it is closed).
    package mutating func nextMember() throws(Refusal) -> StringToken? {
        precondition(depth > 0 && innermostIsObject, "JSONScanner.nextMember() outside an object")
        guard try moveToNext(closer: .closeBrace) else { return nil }
        return try memberName()
    }

    /// Enters the array that is the next value.
    package mutating func beginArray() throws(Refusal) {
        skipWhitespace()
        guard position < input.count, input[position] == .openBracket else { throw Refusal() }
        try open(isObject: false)
    }

    /// Whether the innermost array has another element (read it next);
    /// `false` when the array has ended (then it is closed).
    package mutating func nextElement() throws(Refusal) -> Bool {
        precondition(depth > 0 && !innermostIsObject, "JSONScanner.nextElement() outside an array")
        return try moveToNext(closer: .closeBracket)
    }

    /// Steps over the comma before the next member or element, or closes
    /// the container at `closer`; `false` when it closed.
    private mutating func moveToNext(closer: UInt8) throws(Refusal) -> Bool {
        skipWhitespace()
        guard position < input.count else { throw Refusal() }
        if input[position] == closer {
            close()
            return false
        }
        if atContainerStart {
            atContainerStart = false
        } else {
            guard input[position] == .comma else { throw Refusal() }
            position += 1
            skipWhitespace()
        }
        return true
    }

    private var innermostIsObject: Bool {
        objectBits & (1 << UInt64(depth - 1)) != 0
    }

    /// Opens the container whose bracket is at `position`, within the
    /// depth limit.
    private mutating func open(isObject: Bool) throws(Refusal) {
        guard depth < maxDepth else { throw Refusal() }
        if isObject {
            objectBits |= 1 << UInt64(depth)
        } else {
            objectBits &= ~(1 << UInt64(depth))
        }
        depth += 1
        position += 1
        atContainerStart = true
    }

    /// Closes the innermost container, whose closing bracket is at
    /// `position`.
    private mutating func close() {
        position += 1
        depth -= 1
        atContainerStart = false
    }

    /// Reads `"name"` and the `:` after it.
    private mutating func memberName() throws(Refusal) -> StringToken {
        guard position < input.count, input[position] == .quote else { throw Refusal() }
        let name = try scanString()
        skipWhitespace()
        guard position < input.count, input[position] == .colon else { throw Refusal() }
        position += 1
        return name
    }

    private mutating func skipWhitespace() {
        var index = position
        while index < input.count {
            switch input[index] {
            case .space, .tab, .lineFeed, .carriageReturn:
                index += 1
            default:
                position = index
                return
            }
        }
        position = index
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(Refusal) {
        let text = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard input.count - position >= text.count else { throw Refusal() }
        for (offset, expected) in text.enumerated() where input[position + offset] != expected {
            throw Refusal()
        }
        position += text.count
    }

    // MARK: - Strings

    /// The text of a string read earlier, as ``JSONParser`` would make it.
    package mutating func text(of token: StringToken) -> String {
        if token.isVerbatim {
            return String(decoding: UnsafeBufferPointer(rebasing: input[token.start ..< token.end]), as: UTF8.self)
        }
        decode(token)
        return String(decoding: scratch, as: UTF8.self)
    }

    /// Calls `body` with the UTF-8 of a string read earlier, unescaped: the
    /// bytes of ``text(of:)``, without making a `String`. A string without
    /// escapes is handed out in place; an escaped one is decoded first, so
    /// the buffer lives only until the next call that reads a string.
    package mutating func withUTF8<Result>(of token: StringToken, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if token.isVerbatim {
            return body(UnsafeBufferPointer(rebasing: input[token.start ..< token.end]))
        }
        decode(token)
        return scratch.withUnsafeBufferPointer(body)
    }

    /// The position in `names` of the first literal that a string read
    /// earlier equals once unescaped (member names are compared by their
    /// UTF-8 bytes), or `nil` when it equals none.
    ///
    /// One call per member name, whatever the number of names it is
    /// compared with, and an escaped name is decoded once.
    package mutating func index(of token: StringToken, in names: [StaticString]) -> Int? {
        if token.isVerbatim {
            return Self.index(of: UnsafeBufferPointer(rebasing: input[token.start ..< token.end]), in: names)
        }
        decode(token)
        return scratch.withUnsafeBufferPointer { Self.index(of: $0, in: names) }
    }

    private static func index(of text: UnsafeBufferPointer<UInt8>, in names: [StaticString]) -> Int? {
        let count = text.count
        guard let bytes = text.baseAddress, count > 0 else {
            return names.firstIndex { $0.utf8CodeUnitCount == 0 }
        }
        let first = bytes.pointee
        return names.withUnsafeBufferPointer { names -> Int? in
            // Length and first byte rule out most names; plain loops, as
            // `elementsEqual` is not specialized into one for buffers.
            search: for position in names.indices {
                let name = names[position]
                guard name.utf8CodeUnitCount == count else { continue }
                let expected = name.utf8Start
                guard expected.pointee == first else { continue }
                for index in 1 ..< count where bytes[index] != expected[index] {
                    continue search
                }
                return position
            }
            return nil
        }
    }

    /// Checks the string whose opening quote is at `position` and steps
    /// past its closing quote, with ``JSONParser``'s rules: no unescaped
    /// control characters, valid escapes with paired surrogates, valid
    /// UTF-8.
    private mutating func scanString() throws(Refusal) -> StringToken {
        position += 1
        let start = position
        var isVerbatim = true
        while position < input.count {
            // Most bytes are printable ASCII other than `"` and `\`: whole
            // words of them are stepped over, then a tight loop on a local
            // index steps over the rest.
            var index = PlainText.skipWords(in: input, from: position)
            while index < input.count {
                let byte = input[index]
                guard byte >= 0x20, byte < 0x80, byte != .quote, byte != .backslash else { break }
                index += 1
            }
            position = index
            guard position < input.count else { break }
            let byte = input[position]
            switch byte {
            case .quote:
                let token = StringToken(start: start, end: position, isVerbatim: isVerbatim)
                position += 1
                return token
            case .backslash:
                isVerbatim = false
                try skipEscape()
            case 0 ..< 0x20:
                throw Refusal()
            default:
                guard let length = try? JSONParser.validUTF8Length(in: input, at: position) else { throw Refusal() }
                position += length
            }
        }
        throw Refusal()
    }

    /// Checks the escape sequence whose backslash is at `position` and
    /// steps past it.
    private mutating func skipEscape() throws(Refusal) {
        guard position + 1 < input.count else { throw Refusal() }
        let letter = input[position + 1]
        position += 2
        switch letter {
        case .quote, .backslash, .slash, UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return
        case UInt8(ascii: "u"):
            guard let unit = Self.hexQuad(in: input, at: position) else { throw Refusal() }
            position += 4
            switch unit {
            case 0xD800 ... 0xDBFF:
                // A high surrogate is only text together with the low
                // surrogate escape that must follow it.
                guard position + 1 < input.count, input[position] == .backslash, input[position + 1] == UInt8(ascii: "u"),
                      let low = Self.hexQuad(in: input, at: position + 2), (0xDC00 ... 0xDFFF).contains(low)
                else { throw Refusal() }
                position += 6
            case 0xDC00 ... 0xDFFF:
                throw Refusal()
            default:
                return
            }
        default:
            throw Refusal()
        }
    }

    /// Unescapes a checked string into `scratch`.
    private mutating func decode(_ token: StringToken) {
        scratch.removeAll(keepingCapacity: true)
        var index = token.start
        while index < token.end {
            let byte = input[index]
            guard byte == .backslash else {
                scratch.append(byte)
                index += 1
                continue
            }
            let letter = input[index + 1]
            index += 2
            switch letter {
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                // Checked by `skipEscape()`: four hex digits, and a high
                // surrogate is followed by `\u` and a low one.
                var scalarValue = Self.hexQuad(in: input, at: index) ?? 0xFFFD
                index += 4
                if (0xD800 ... 0xDBFF).contains(scalarValue) {
                    let low = Self.hexQuad(in: input, at: index + 2) ?? 0xDC00
                    scalarValue = 0x10000 + ((scalarValue - 0xD800) << 10) + (low - 0xDC00)
                    index += 6
                }
                let scalar = Unicode.Scalar(scalarValue) ?? "\u{FFFD}"
                UTF8.encode(scalar) { scratch.append($0) }
            default:
                // `"`, `\` and `/` stand for themselves.
                scratch.append(letter)
            }
        }
    }

    /// The value of the four hex digits at `index`, or `nil` when there are
    /// not four.
    private static func hexQuad(in input: UnsafeBufferPointer<UInt8>, at index: Int) -> UInt32? {
        guard input.count - index >= 4 else { return nil }
        var unit: UInt32 = 0
        for byte in input[index ..< index + 4] {
            let digit: UInt8
            switch byte {
            case UInt8.digitZero ... UInt8.digitNine: digit = byte - .digitZero
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            unit = unit << 4 | UInt32(digit)
        }
        return unit
    }
}
