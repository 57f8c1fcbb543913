/// A strict RFC 8259 JSON parser that works on UTF-8 bytes and keeps numbers
/// as their exact text.
///
/// Accepted: exactly one value, optionally surrounded by space, tab, line
/// feed and carriage return. Rejected: trailing commas, comments, leading
/// zeros, leading `+`, `NaN`/`Infinity`, single quotes, a byte order mark,
/// unescaped control characters in strings, invalid UTF-8 and `\u` escapes
/// that leave a surrogate unpaired. A repeated member name keeps its first
/// position and its last value (see ``JSONObject``).
///
/// The parser itself is iterative (containers live on an explicit stack), so
/// parsing cannot overflow a thread's stack whatever ``Limits/maxDepth`` is.
/// The depth limit still matters: comparing, hashing, serializing and freeing
/// a ``JSONValue`` recurse once per level.
public struct JSONParser {
    /// Bounds on what one document may demand from the parser.
    public struct Limits: Sendable, Hashable {
        /// The most arrays and objects that may be open at once; a scalar at
        /// the top has depth 0, `[]` depth 1, `[[]]` depth 2. Deeper input
        /// is a ``JSONParseError``. Keep it in the hundreds at most: values
        /// are compared, serialized and freed recursively.
        public var maxDepth: Int

        /// Limits allowing `maxDepth` levels of nesting.
        public init(maxDepth: Int = 64) {
            self.maxDepth = maxDepth
        }
    }

    /// Parses `bytes` as one JSON document.
    ///
    /// - Throws: ``JSONParseError`` naming the first offending byte.
    public static func parse(_ bytes: some Collection<UInt8>, limits: Limits = .init()) throws(JSONParseError) -> JSONValue {
        // Typed throws do not pass through the rethrowing storage accessors,
        // so the outcome travels out as a Result.
        let run = { (buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONParseError> in
            var parser = JSONParser(input: buffer, limits: limits)
            return Result { () throws(JSONParseError) in try parser.parseDocument() }
        }
        let outcome = bytes.withContiguousStorageIfAvailable(run)
            ?? Array(bytes).withUnsafeBufferPointer(run)
        return try outcome.get()
    }

    // MARK: - State

    private let input: UnsafeBufferPointer<UInt8>
    private let limits: Limits
    private var position = 0
    /// Reused by every string that needs unescaping, to avoid an allocation
    /// per string.
    private var scratch: [UInt8] = []

    private init(input: UnsafeBufferPointer<UInt8>, limits: Limits) {
        self.input = input
        self.limits = limits
    }

    /// An array or object still being read. Its elements sit at the end of
    /// the parser's value stack from `valueStart` on (an object's as name,
    /// value, name, value, ...), so an open container costs no allocation of
    /// its own and a closed one exactly one, of its final size.
    private struct Frame {
        let isObject: Bool
        let valueStart: Int
    }

    // MARK: - Structure

    private mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        var frames: [Frame] = []
        var values: [JSONValue] = []
        // Room for a JSON-RPC request without growing.
        frames.reserveCapacity(8)
        values.reserveCapacity(24)
        while true {
            // Read one value; containers are opened here and closed below.
            skipWhitespace()
            guard position < input.count else {
                throw Self.unexpected(in: input, at: position, expected: "a value")
            }
            var value: JSONValue
            switch input[position] {
            case .openBrace, .openBracket:
                let isObject = input[position] == .openBrace
                guard frames.count < limits.maxDepth else {
                    throw JSONParseError(
                        offset: position,
                        message: "nesting deeper than \(limits.maxDepth) levels at byte \(position)"
                    )
                }
                position += 1
                skipWhitespace()
                if position < input.count, input[position] == (isObject ? .closeBrace : .closeBracket) {
                    position += 1
                    value = isObject ? .object(JSONObject()) : .array([])
                } else {
                    frames.append(Frame(isObject: isObject, valueStart: values.count))
                    if isObject {
                        values.append(.string(try parseMemberName()))
                    }
                    continue
                }
            case .quote:
                value = .string(try parseString())
            case .minus, UInt8.digitZero ... UInt8.digitNine:
                let start = position
                position = try Self.scanNumber(in: input, from: position)
                value = .number(String(decoding: UnsafeBufferPointer(rebasing: input[start ..< position]), as: UTF8.self))
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            default:
                throw Self.unexpected(in: input, at: position, expected: "a value")
            }

            // The value is complete: hand it to its container, closing every
            // container that ends right after it.
            while true {
                guard let frame = frames.last else {
                    skipWhitespace()
                    guard position == input.count else {
                        throw JSONParseError(
                            offset: position,
                            message: "unexpected \(Self.describe(input[position])) at byte \(position) after the JSON value"
                        )
                    }
                    return value
                }
                values.append(value)
                skipWhitespace()
                let isObject = frame.isObject
                guard position < input.count else {
                    throw Self.unexpected(in: input, at: position, expected: isObject ? "',' or '}'" : "',' or ']'")
                }
                if input[position] == .comma {
                    position += 1
                    if isObject {
                        skipWhitespace()
                        values.append(.string(try parseMemberName()))
                    }
                    break
                }
                guard input[position] == (isObject ? .closeBrace : .closeBracket) else {
                    throw Self.unexpected(in: input, at: position, expected: isObject ? "',' or '}'" : "',' or ']'")
                }
                position += 1
                frames.removeLast()
                let count = values.count - frame.valueStart
                if isObject {
                    var members: [JSONObject.Element] = []
                    members.reserveCapacity(count / 2)
                    for index in stride(from: frame.valueStart, to: values.count, by: 2) {
                        // Names were pushed as strings just above.
                        guard case .string(let key) = values[index] else { preconditionFailure("a member name that is not a string") }
                        members.append((key: key, value: values[index + 1]))
                    }
                    value = .object(JSONObject(takingMembers: members))
                } else {
                    value = .array(Array(values[frame.valueStart...]))
                }
                values.removeLast(count)
            }
        }
    }

    /// Reads `"name"` and the `:` after it.
    private mutating func parseMemberName() throws(JSONParseError) -> String {
        guard position < input.count, input[position] == .quote else {
            throw Self.unexpected(in: input, at: position, expected: "a member name in double quotes")
        }
        let name = try parseString()
        skipWhitespace()
        guard position < input.count, input[position] == .colon else {
            throw Self.unexpected(in: input, at: position, expected: "':'")
        }
        position += 1
        return name
    }

    private mutating func skipWhitespace() {
        while position < input.count {
            switch input[position] {
            case .space, .tab, .lineFeed, .carriageReturn:
                position += 1
            default:
                return
            }
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let text = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for expected in text {
            guard position < input.count, input[position] == expected else {
                throw Self.unexpected(in: input, at: position, expected: "'\(literal)'")
            }
            position += 1
        }
    }

    // MARK: - Strings

    /// Reads a string whose opening quote is at `position`.
    private mutating func parseString() throws(JSONParseError) -> String {
        let open = position
        position += 1
        let start = position
        // Most strings are plain ASCII without escapes: take them straight
        // from the input.
        while position < input.count {
            let byte = input[position]
            if byte == .quote {
                let text = String(decoding: UnsafeBufferPointer(rebasing: input[start ..< position]), as: UTF8.self)
                position += 1
                return text
            }
            if byte == .backslash || byte < 0x20 || byte >= 0x80 {
                break
            }
            position += 1
        }

        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[start ..< position]))
        while position < input.count {
            let byte = input[position]
            switch byte {
            case .quote:
                position += 1
                // Every byte was validated, so decoding repairs nothing.
                return String(decoding: scratch, as: UTF8.self)
            case .backslash:
                try parseEscape()
            case 0 ..< 0x20:
                throw JSONParseError(
                    offset: position,
                    message: "unescaped control character \(Self.hex(byte, digits: 2)) in a string at byte \(position)"
                )
            case 0x20 ..< 0x80:
                scratch.append(byte)
                position += 1
            default:
                let length = try Self.validUTF8Length(in: input, at: position)
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[position ..< position + length]))
                position += length
            }
        }
        throw JSONParseError(
            offset: position,
            message: "unexpected end of input at byte \(position), expected '\"' to close the string that starts at byte \(open)"
        )
    }

    /// Reads the escape sequence whose backslash is at `position` into
    /// `scratch`.
    private mutating func parseEscape() throws(JSONParseError) {
        let escapeStart = position
        guard position + 1 < input.count else {
            throw Self.unexpected(in: input, at: position + 1, expected: "an escape sequence")
        }
        let letter = input[position + 1]
        position += 2
        switch letter {
        case .quote, .backslash, .slash:
            scratch.append(letter)
        case UInt8(ascii: "b"):
            scratch.append(0x08)
        case UInt8(ascii: "f"):
            scratch.append(0x0C)
        case UInt8(ascii: "n"):
            scratch.append(0x0A)
        case UInt8(ascii: "r"):
            scratch.append(0x0D)
        case UInt8(ascii: "t"):
            scratch.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try readHexQuad(escapeStart: escapeStart)
            let scalarValue: UInt32
            switch unit {
            case 0xD800 ... 0xDBFF:
                // A high surrogate is only text together with the low
                // surrogate escape that must follow it.
                let lowStart = position
                guard position + 1 < input.count, input[position] == .backslash, input[position + 1] == UInt8(ascii: "u") else {
                    throw Self.loneSurrogate(unit, at: escapeStart)
                }
                position += 2
                let low = try readHexQuad(escapeStart: lowStart)
                guard (0xDC00 ... 0xDFFF).contains(low) else {
                    throw Self.loneSurrogate(unit, at: escapeStart)
                }
                scalarValue = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
            case 0xDC00 ... 0xDFFF:
                throw Self.loneSurrogate(unit, at: escapeStart)
            default:
                scalarValue = unit
            }
            // Surrogates were excluded above, so the scalar always exists.
            let scalar = Unicode.Scalar(scalarValue) ?? "\u{FFFD}"
            UTF8.encode(scalar) { scratch.append($0) }
        default:
            let shown = (0x20 ..< 0x7F).contains(letter) ? "'\\\(Character(Unicode.Scalar(letter)))'" : "sequence"
            throw JSONParseError(offset: escapeStart, message: "invalid escape \(shown) in a string at byte \(escapeStart)")
        }
    }

    /// Reads the four hex digits of a `\u` escape at `position`.
    private mutating func readHexQuad(escapeStart: Int) throws(JSONParseError) -> UInt32 {
        var unit: UInt32 = 0
        for _ in 0 ..< 4 {
            guard position < input.count else {
                throw Self.unexpected(in: input, at: position, expected: "four hex digits after '\\u'")
            }
            let byte = input[position]
            let digit: UInt8
            switch byte {
            case UInt8.digitZero ... UInt8.digitNine: digit = byte - .digitZero
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default:
                throw JSONParseError(
                    offset: escapeStart,
                    message: "invalid \\u escape at byte \(escapeStart), expected four hex digits"
                )
            }
            unit = unit << 4 | UInt32(digit)
            position += 1
        }
        return unit
    }

    /// The length of the valid UTF-8 sequence whose first byte is at
    /// `index` (at least 0x80), per the well-formed table of Unicode 15
    /// section 3.9: no overlong forms, no encoded surrogates, nothing past
    /// U+10FFFF.
    static func validUTF8Length(in input: UnsafeBufferPointer<UInt8>, at index: Int) throws(JSONParseError) -> Int {
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80 ... 0xBF
        switch input[index] {
        case 0xC2 ... 0xDF: length = 2
        case 0xE0: length = 3; secondRange = 0xA0 ... 0xBF
        case 0xE1 ... 0xEC, 0xEE ... 0xEF: length = 3
        case 0xED: length = 3; secondRange = 0x80 ... 0x9F
        case 0xF0: length = 4; secondRange = 0x90 ... 0xBF
        case 0xF1 ... 0xF3: length = 4
        case 0xF4: length = 4; secondRange = 0x80 ... 0x8F
        default: throw invalidUTF8(at: index)
        }
        guard index + length <= input.count, secondRange.contains(input[index + 1]) else {
            throw invalidUTF8(at: index)
        }
        for offset in 2 ..< length where !(0x80 ... 0xBF).contains(input[index + offset]) {
            throw invalidUTF8(at: index)
        }
        return length
    }

    // MARK: - Numbers

    /// The index just past the number that starts at `start`, checked
    /// against `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    ///
    /// What follows the number is left to the caller: in `1x` the number is
    /// `1` and the `x` is the caller's problem.
    static func scanNumber(in input: UnsafeBufferPointer<UInt8>, from start: Int) throws(JSONParseError) -> Int {
        var index = start
        func isDigit(_ index: Int) -> Bool {
            index < input.count && (UInt8.digitZero ... UInt8.digitNine).contains(input[index])
        }
        if index < input.count, input[index] == .minus {
            index += 1
        }
        if index < input.count, input[index] == .digitZero {
            index += 1
            if isDigit(index) {
                throw JSONParseError(offset: index - 1, message: "leading zeros are not allowed in numbers at byte \(index - 1)")
            }
        } else if isDigit(index) {
            while isDigit(index) { index += 1 }
        } else {
            throw unexpected(in: input, at: index, expected: "a digit")
        }
        if index < input.count, input[index] == .period {
            index += 1
            guard isDigit(index) else {
                throw unexpected(in: input, at: index, expected: "a digit after '.'")
            }
            while isDigit(index) { index += 1 }
        }
        if index < input.count, input[index] == UInt8(ascii: "e") || input[index] == UInt8(ascii: "E") {
            index += 1
            if index < input.count, input[index] == .plus || input[index] == .minus {
                index += 1
            }
            guard isDigit(index) else {
                throw unexpected(in: input, at: index, expected: "a digit in the exponent")
            }
            while isDigit(index) { index += 1 }
        }
        return index
    }

    // MARK: - Messages

    private static func unexpected(in input: UnsafeBufferPointer<UInt8>, at index: Int, expected: String) -> JSONParseError {
        guard index < input.count else {
            return JSONParseError(offset: input.count, message: "unexpected end of input at byte \(input.count), expected \(expected)")
        }
        return JSONParseError(offset: index, message: "unexpected \(describe(input[index])) at byte \(index), expected \(expected)")
    }

    private static func invalidUTF8(at index: Int) -> JSONParseError {
        JSONParseError(offset: index, message: "invalid UTF-8 at byte \(index)")
    }

    private static func loneSurrogate(_ unit: UInt32, at index: Int) -> JSONParseError {
        JSONParseError(offset: index, message: "lone surrogate \\u\(hex(unit, digits: 4).dropFirst(2)) in a string at byte \(index)")
    }

    /// `character 'x'` for printable ASCII, else `byte 0xNN`, so messages
    /// never carry raw control bytes or broken UTF-8.
    private static func describe(_ byte: UInt8) -> String {
        (0x20 ..< 0x7F).contains(byte) ? "character '\(Character(Unicode.Scalar(byte)))'" : "byte \(hex(byte, digits: 2))"
    }

    /// `0x` and `value` in upper-case hex, zero-padded to `digits`.
    private static func hex(_ value: some BinaryInteger, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

/// The bytes of JSON's grammar, shared by ``JSONParser`` and ``JSONScanner``.
extension UInt8 {
    static let tab = UInt8(ascii: "\t")
    static let lineFeed = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")
    static let space = UInt8(ascii: " ")
    static let quote = UInt8(ascii: "\"")
    static let plus = UInt8(ascii: "+")
    static let comma = UInt8(ascii: ",")
    static let minus = UInt8(ascii: "-")
    static let period = UInt8(ascii: ".")
    static let slash = UInt8(ascii: "/")
    static let digitZero = UInt8(ascii: "0")
    static let digitNine = UInt8(ascii: "9")
    static let colon = UInt8(ascii: ":")
    static let openBracket = UInt8(ascii: "[")
    static let backslash = UInt8(ascii: "\\")
    static let closeBracket = UInt8(ascii: "]")
    static let openBrace = UInt8(ascii: "{")
    static let closeBrace = UInt8(ascii: "}")
}
