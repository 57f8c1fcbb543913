extension JSONValue {
    /// Compact serialization: no spaces, members in order, numbers written as
    /// their stored text, strings escaped per RFC 8259.
    ///
    /// Escaped are `"`, `\` and the control characters U+0000 to U+001F (as
    /// `\n`, `\t`, `\r`, `\b`, `\f`, or `\u00xx` with lower-case hex, as
    /// `JSON.stringify` writes them). `/` is not escaped and everything else,
    /// non-ASCII included, is written as raw UTF-8. A ``number(_:)`` whose
    /// text is not a JSON number is written as `null` so that the output is
    /// always valid JSON. An ``encoded(_:)`` value is written as its bytes.
    public func serialized() -> [UInt8] {
        var writer = JSONWriter()
        writer.value(self)
        return writer.bytes
    }

    /// ``serialized()`` as a `String`.
    public var serializedString: String {
        String(decoding: serialized(), as: UTF8.self)
    }
}

/// Writes compact JSON text into one growing byte buffer, token by token,
/// with the escaping rules of ``JSONValue/serialized()``.
///
/// It is the one producer of ``EncodedJSON``: the gateway writes a product
/// once with it, keeps the bytes, and later splices them into answers with
/// ``encoded(_:)`` instead of rebuilding and re-serializing a tree.
///
/// The writer checks the order of the calls (a member name before each
/// member value, containers closed in order, exactly one value at the top)
/// and stops the process on a violation: that is a bug in the caller, and
/// bytes written past it would not be JSON. Commas and colons are written
/// for the caller. Writing a token costs a few comparisons and appends; the
/// writer keeps no heap state besides the buffer, so reserving its capacity
/// up front makes a whole answer one allocation.
public struct JSONWriter: Sendable {
    /// What the next call may be.
    private enum State: UInt8, Sendable {
        /// Nothing written yet: one value.
        case top
        /// The top value is complete: nothing more.
        case done
        /// Just after `[`: a value or `]`.
        case arrayStart
        /// After an element: a value (after a comma) or `]`.
        case arrayElement
        /// Just after `{`: a member name or `}`.
        case objectStart
        /// After a member name: its value.
        case memberName
        /// After a member value: a name (after a comma) or `}`.
        case memberValue
    }

    /// The text written so far.
    public private(set) var bytes: [UInt8]
    private var state = State.top
    /// Bit `n` is set when the container open at depth `n` is an object.
    private var objectBits: UInt64 = 0
    private var depth = 0

    /// The most containers the token calls may have open at once. Values
    /// written whole with ``value(_:)`` do not count against it.
    public static let maxDepth = 64

    /// An empty writer whose buffer holds `capacity` bytes before it grows.
    public init(reservingCapacity capacity: Int = 0) {
        bytes = []
        if capacity > 0 { bytes.reserveCapacity(capacity) }
    }

    /// Whether exactly one complete value has been written.
    public var isComplete: Bool {
        state == .done
    }

    /// The value written, as ``EncodedJSON``.
    ///
    /// - Precondition: ``isComplete``.
    public consuming func finish() -> EncodedJSON {
        precondition(state == .done, "JSONWriter.finish() before a complete value was written")
        return EncodedJSON(writtenBytes: bytes)
    }

    // MARK: - Containers

    /// Opens an object, as a value.
    public mutating func beginObject() {
        open(isObject: true, byte: UInt8(ascii: "{"))
    }

    /// Closes the innermost container, which must be an object after a
    /// complete member or with none.
    public mutating func endObject() {
        precondition(state == .objectStart || state == .memberValue, "JSONWriter.endObject() outside an object or after a member name")
        close(byte: UInt8(ascii: "}"))
    }

    /// Opens an array, as a value.
    public mutating func beginArray() {
        open(isObject: false, byte: UInt8(ascii: "["))
    }

    /// Closes the innermost container, which must be an array.
    public mutating func endArray() {
        precondition(state == .arrayStart || state == .arrayElement, "JSONWriter.endArray() outside an array")
        close(byte: UInt8(ascii: "]"))
    }

    /// Writes a member name (escaped as a string) and the colon; the next
    /// call writes its value.
    public mutating func key(_ name: String) {
        switch state {
        case .objectStart:
            break
        case .memberValue:
            bytes.append(UInt8(ascii: ","))
        default:
            preconditionFailure("JSONWriter.key(_:) outside an object or where a member value is due")
        }
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
        state = .memberName
    }

    /// ``key(_:)`` for a name fixed in the source (`"price"`), which needs
    /// no escaping: its quotes, text and colon are appended as they are.
    ///
    /// - Precondition: `name` holds no `"`, `\\` or control character.
    public mutating func key(literal name: StaticString) {
        let comma: Bool
        switch state {
        case .objectStart:
            comma = false
        case .memberValue:
            comma = true
        default:
            preconditionFailure("JSONWriter.key(literal:) outside an object or where a member value is due")
        }
        let text = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        assert(!text.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }, "a literal member name that needs escaping")
        // Assembled on the stack and appended at once: an append costs
        // about a hundred instructions whatever its length (uniqueness,
        // capacity, copy), and a product's encoding writes 33 member names.
        let length = text.count + (comma ? 4 : 3)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length) { chunk in
            var position = 0
            if comma {
                chunk[0] = UInt8(ascii: ",")
                position = 1
            }
            chunk[position] = UInt8(ascii: "\"")
            position += 1
            for byte in text {
                chunk[position] = byte
                position += 1
            }
            chunk[position] = UInt8(ascii: "\"")
            chunk[position + 1] = UInt8(ascii: ":")
            bytes.append(contentsOf: UnsafeBufferPointer(chunk))
        }
        state = .memberName
    }

    // MARK: - Values

    /// Writes a string, escaped.
    public mutating func string(_ text: String) {
        beginValue()
        appendQuoted(text)
        endValue()
    }

    /// Writes a string given as its UTF-8, escaped as ``string(_:)``
    /// escapes: for text read from JSON input (``JSONScanner``) without
    /// making a `String` of it.
    ///
    /// - Precondition: `utf8` is well-formed UTF-8, as the text of every
    ///   `String` is.
    public mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        beginValue()
        bytes.append(UInt8(ascii: "\""))
        appendEscaped(utf8)
        bytes.append(UInt8(ascii: "\""))
        endValue()
    }

    /// Writes number text as it is when it is an RFC 8259 number (`4.99`,
    /// `0.00`, `1200`), else `null`, exactly as ``JSONValue/number(_:)``
    /// serializes.
    public mutating func number(_ text: String) {
        beginValue()
        appendNumber(text)
        endValue()
    }

    /// Writes the decimal digits of `integer`, as ``JSONValue/integer(_:)``
    /// serializes.
    public mutating func integer(_ integer: Int) {
        beginValue()
        if integer < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = integer.magnitude
        // At most 20 digits; written backwards into a small stack buffer.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
        endValue()
    }

    /// Writes `true` or `false`.
    public mutating func bool(_ flag: Bool) {
        beginValue()
        append(flag ? "true" : "false")
        endValue()
    }

    /// Writes `null`.
    public mutating func null() {
        beginValue()
        append("null")
        endValue()
    }

    /// Writes a whole value (a tree, or encoded bytes).
    public mutating func value(_ value: JSONValue) {
        beginValue()
        appendTree(value)
        endValue()
    }

    /// Splices bytes written earlier by a writer, as one value, without
    /// looking at them again.
    public mutating func encoded(_ json: EncodedJSON) {
        beginValue()
        bytes.append(contentsOf: json.bytes)
        endValue()
    }

    // MARK: - Structure

    private mutating func open(isObject: Bool, byte: UInt8) {
        beginValue()
        precondition(depth < Self.maxDepth, "JSONWriter nesting deeper than \(Self.maxDepth)")
        if isObject {
            objectBits |= 1 << UInt64(depth)
        } else {
            objectBits &= ~(1 << UInt64(depth))
        }
        depth += 1
        bytes.append(byte)
        state = isObject ? .objectStart : .arrayStart
    }

    private mutating func close(byte: UInt8) {
        bytes.append(byte)
        depth -= 1
        endValue()
    }

    /// Checks that a value may come now and writes the comma before it.
    private mutating func beginValue() {
        switch state {
        case .top, .arrayStart, .memberName:
            break
        case .arrayElement:
            bytes.append(UInt8(ascii: ","))
        case .done:
            preconditionFailure("JSONWriter: a second value after the complete top value")
        case .objectStart, .memberValue:
            preconditionFailure("JSONWriter: a value in an object without a member name")
        }
    }

    /// The value just written is complete: what may follow depends on its
    /// container.
    private mutating func endValue() {
        if depth == 0 {
            state = .done
        } else if objectBits & (1 << UInt64(depth - 1)) != 0 {
            state = .memberValue
        } else {
            state = .arrayElement
        }
    }

    // MARK: - Text

    private mutating func appendTree(_ value: JSONValue) {
        switch value {
        case .null:
            append("null")
        case .bool(let flag):
            append(flag ? "true" : "false")
        case .number(let text):
            appendNumber(text)
        case .string(let text):
            appendQuoted(text)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                appendTree(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            bytes.append(UInt8(ascii: "{"))
            var first = true
            for (key, member) in object {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                appendQuoted(key)
                bytes.append(UInt8(ascii: ":"))
                appendTree(member)
            }
            bytes.append(UInt8(ascii: "}"))
        case .encoded(let json):
            bytes.append(contentsOf: json.bytes)
        }
    }

    private mutating func appendNumber(_ text: String) {
        if JSONValue.isNumberText(text) {
            bytes.append(contentsOf: text.utf8)
        } else {
            append("null")
        }
    }

    /// `text` in double quotes, escaped.
    private mutating func appendQuoted(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        // Every string hands out its UTF-8 this way: native ones in place,
        // small ones (up to 15 bytes, most identifiers, prices and codes)
        // from a stack copy. Runs that need no escape are then copied whole
        // instead of byte by byte.
        var text = text
        text.withUTF8 { appendEscaped($0) }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        // Words of plain printable ASCII need no escape: stepped over whole.
        // (Non-ASCII stops the word test, and is then copied byte by byte.)
        let plain = PlainText.skipWords(in: utf8, from: 0)
        for index in plain ..< utf8.count {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            if runStart < index {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart ..< index]))
            }
            appendEscaped(byte)
            runStart = index + 1
        }
        if runStart < utf8.count {
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
    }

    /// One byte of a string, escaped when it must be. Swift strings are
    /// valid Unicode, so raw UTF-8 is always well formed.
    private mutating func appendEscaped(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): append("\\\"")
        case UInt8(ascii: "\\"): append("\\\\")
        case 0x08: append("\\b")
        case 0x09: append("\\t")
        case 0x0A: append("\\n")
        case 0x0C: append("\\f")
        case 0x0D: append("\\r")
        case 0x00 ..< 0x20:
            append("\\u00")
            bytes.append(Self.hexDigit(byte >> 4))
            bytes.append(Self.hexDigit(byte & 0x0F))
        default:
            bytes.append(byte)
        }
    }

    private mutating func append(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A lower-case hex digit for `nibble` (0 to 15).
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
