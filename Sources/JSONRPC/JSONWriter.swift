extension JSONValue {
    /// Compact serialization: no spaces, members in order, numbers written as
    /// their stored text, strings escaped per RFC 8259.
    ///
    /// Escaped are `"`, `\` and the control characters U+0000 to U+001F (as
    /// `\n`, `\t`, `\r`, `\b`, `\f`, or `\u00xx` with lower-case hex, as
    /// `JSON.stringify` writes them). `/` is not escaped and everything else,
    /// non-ASCII included, is written as raw UTF-8. A ``number(_:)`` whose
    /// text is not a JSON number is written as `null` so that the output is
    /// always valid JSON.
    public func serialized() -> [UInt8] {
        var writer = JSONWriter()
        writer.write(self)
        return writer.bytes
    }

    /// ``serialized()`` as a `String`.
    public var serializedString: String {
        String(decoding: serialized(), as: UTF8.self)
    }
}

/// Appends compact JSON text to a byte buffer.
struct JSONWriter {
    /// The text written so far.
    private(set) var bytes: [UInt8] = []

    mutating func write(_ value: JSONValue) {
        switch value {
        case .null:
            append("null")
        case .bool(let flag):
            append(flag ? "true" : "false")
        case .number(let text):
            if JSONValue.isNumberText(text) {
                bytes.append(contentsOf: text.utf8)
            } else {
                append("null")
            }
        case .string(let text):
            write(string: text)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            bytes.append(UInt8(ascii: "{"))
            var first = true
            for (key, member) in object {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                write(string: key)
                bytes.append(UInt8(ascii: ":"))
                write(member)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private mutating func write(string: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
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
                bytes.append(Self.hexDigits[Int(byte >> 4)])
                bytes.append(Self.hexDigits[Int(byte & 0x0F)])
            default:
                // Swift strings are valid Unicode, so raw UTF-8 is always
                // well formed here.
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func append(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
