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
        return writer.takeBytes()
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

    /// The text written so far is `storage[..<length]`. The array is kept
    /// filled to its capacity, so that a token is stored through a pointer:
    /// `Array.append(contentsOf:)` costs about a hundred instructions
    /// whatever its length (its generic path, uniqueness, capacity, copy),
    /// and an answer's products make a few hundred appends.
    private var storage: [UInt8]
    private var length = 0
    private var state = State.top
    /// Bit `n` is set when the container open at depth `n` is an object.
    private var objectBits: UInt64 = 0
    private var depth = 0

    /// The most containers the token calls may have open at once. Values
    /// written whole with ``value(_:)`` do not count against it.
    public static let maxDepth = 64

    /// An empty writer whose buffer holds `capacity` bytes before it grows.
    public init(reservingCapacity capacity: Int = 0) {
        storage = []
        if capacity > 0 { fill(toCapacity: capacity) }
    }

    /// The text written so far, as a copy (``takeBytes()`` hands over the
    /// writer's own buffer instead).
    public var bytes: [UInt8] {
        Array(storage[..<length])
    }

    /// The text written, in the writer's own buffer (one allocation when the
    /// reserved capacity was enough).
    public consuming func takeBytes() -> [UInt8] {
        var text: [UInt8] = []
        swap(&text, &storage)
        text.removeLast(text.count - length)
        return text
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
        return EncodedJSON(writtenBytes: takeBytes())
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
            append(byte: UInt8(ascii: ","))
        default:
            preconditionFailure("JSONWriter.key(_:) outside an object or where a member value is due")
        }
        appendQuoted(name)
        append(byte: UInt8(ascii: ":"))
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
        // Stored at once, comma, quotes and colon included: a product's
        // encoding writes 33 member names.
        let count = text.count
        store(count + (comma ? 4 : 3)) { target in
            var target = target
            if comma {
                target.pointee = UInt8(ascii: ",")
                target += 1
            }
            target.pointee = UInt8(ascii: "\"")
            (target + 1).update(from: name.utf8Start, count: count)
            target[count + 1] = UInt8(ascii: "\"")
            target[count + 2] = UInt8(ascii: ":")
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
        append(byte: UInt8(ascii: "\""))
        appendEscaped(utf8)
        append(byte: UInt8(ascii: "\""))
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
        if integer < 0 { append(byte: UInt8(ascii: "-")) }
        var magnitude = integer.magnitude
        // At most 20 digits; written backwards into a small stack buffer.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            append(UnsafeBufferPointer(rebasing: digits[start...]))
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
        json.bytes.withUnsafeBufferPointer { append($0) }
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
        append(byte: byte)
        state = isObject ? .objectStart : .arrayStart
    }

    private mutating func close(byte: UInt8) {
        append(byte: byte)
        depth -= 1
        endValue()
    }

    /// Checks that a value may come now and writes the comma before it.
    private mutating func beginValue() {
        switch state {
        case .top, .arrayStart, .memberName:
            break
        case .arrayElement:
            append(byte: UInt8(ascii: ","))
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
            append(byte: UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { append(byte: UInt8(ascii: ",")) }
                first = false
                appendTree(element)
            }
            append(byte: UInt8(ascii: "]"))
        case .object(let object):
            append(byte: UInt8(ascii: "{"))
            var first = true
            for (key, member) in object {
                if !first { append(byte: UInt8(ascii: ",")) }
                first = false
                appendQuoted(key)
                append(byte: UInt8(ascii: ":"))
                appendTree(member)
            }
            append(byte: UInt8(ascii: "}"))
        case .encoded(let json):
            json.bytes.withUnsafeBufferPointer { append($0) }
        }
    }

    private mutating func appendNumber(_ text: String) {
        if JSONValue.isNumberText(text) {
            var text = text
            text.withUTF8 { append($0) }
        } else {
            append("null")
        }
    }

    /// `text` in double quotes, escaped.
    private mutating func appendQuoted(_ text: String) {
        append(byte: UInt8(ascii: "\""))
        // Every string hands out its UTF-8 this way: native ones in place,
        // small ones (up to 15 bytes, most identifiers, prices and codes)
        // from a stack copy. Runs that need no escape are then copied whole
        // instead of byte by byte.
        var text = text
        text.withUTF8 { appendEscaped($0) }
        append(byte: UInt8(ascii: "\""))
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
                append(UnsafeBufferPointer(rebasing: utf8[runStart ..< index]))
            }
            appendEscaped(byte)
            runStart = index + 1
        }
        if runStart < utf8.count {
            append(UnsafeBufferPointer(rebasing: utf8[runStart...]))
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
            append(byte: Self.hexDigit(byte >> 4))
            append(byte: Self.hexDigit(byte & 0x0F))
        default:
            append(byte: byte)
        }
    }

    private mutating func append(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private mutating func append(_ text: UnsafeBufferPointer<UInt8>) {
        guard let source = text.baseAddress, !text.isEmpty else { return }
        store(text.count) { $0.update(from: source, count: text.count) }
    }

    @inline(__always)
    private mutating func append(byte: UInt8) {
        store(1) { $0.pointee = byte }
    }

    /// Stores `count` bytes after the text: `body` writes them through a
    /// pointer to the first.
    @inline(__always)
    private mutating func store(_ count: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Void) {
        let start = length
        let end = start + count
        if end > storage.count { fill(toCapacity: Swift.max(end, 2 * storage.count, 64)) }
        storage.withUnsafeMutableBufferPointer { body($0.baseAddress! + start) }
        length = end
    }

    /// Moves the text into a buffer of at least `capacity` bytes, filled
    /// with zeros past the text (overwritten before they are part of it).
    ///
    /// `reserveCapacity` and `append` are specialized for `UInt8` here,
    /// where `Array(repeating:count:)` and `Array(unsafeUninitializedCapacity:)`
    /// call the standard library's generic allocation (a metadata lookup,
    /// about 500 instructions).
    @inline(never)
    private mutating func fill(toCapacity capacity: Int) {
        var larger: [UInt8] = []
        larger.reserveCapacity(capacity)
        let length = length
        storage.withUnsafeBufferPointer { larger.append(contentsOf: UnsafeBufferPointer(rebasing: $0[..<length])) }
        // Copied from a block of zeros: `repeatElement` is appended a byte
        // at a time.
        Self.zeros.withUnsafeBufferPointer { zeros in
            while larger.count < larger.capacity {
                larger.append(contentsOf: UnsafeBufferPointer(rebasing: zeros.prefix(larger.capacity - larger.count)))
            }
        }
        storage = larger
    }

    private static let zeros = [UInt8](repeating: 0, count: 4096)

    /// A lower-case hex digit for `nibble` (0 to 15).
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
