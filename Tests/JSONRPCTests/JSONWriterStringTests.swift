import JSONRPC
import Testing

/// Strings of every length, small (inline) and native, with and without
/// escapes at every position: the writer's bytes equal a plain reference
/// escaping, byte for byte, from a `String` and from its UTF-8. Literal
/// member names write as escaped ones do.
@Suite("JSON writer strings")
struct JSONWriterStringTests {
    /// The escaping rules of `JSONValue.serialized()`, one scalar at a time.
    static func reference(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{08}": out += "\\b"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\u{0C}": out += "\\f"
            case "\r": out += "\\r"
            case "\u{00}"..."\u{1F}":
                let hex = String(scalar.value, radix: 16)
                out += "\\u00" + (hex.count == 1 ? "0" + hex : hex)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// The string written by `string(_:)`, when `string(utf8:)` writes the
    /// same bytes (else a marker no reference equals).
    static func written(_ text: String) -> String {
        var writer = JSONWriter()
        writer.string(text)
        let bytes = writer.finish().bytes
        var fromUTF8 = JSONWriter()
        var copy = text
        copy.withUTF8 { fromUTF8.string(utf8: $0) }
        guard fromUTF8.finish().bytes == bytes else { return "string(utf8:) wrote other bytes" }
        return String(decoding: bytes, as: UTF8.self)
    }

    static let specials: [String] = ["\"", "\\", "\n", "\u{01}", "\u{1F}", "é", "€", "😀", "\u{2028}", "/"]

    @Test func everyLengthWithEveryEscapeAtEveryPosition() {
        for length in 0...40 {
            let plain = String(repeating: "a", count: length)
            #expect(Self.written(plain) == Self.reference(plain), "length \(length)")
            for special in Self.specials {
                for position in [0, length / 2, length] {
                    var text = plain
                    text.insert(contentsOf: special, at: text.index(text.startIndex, offsetBy: position))
                    #expect(Self.written(text) == Self.reference(text), "\(special.debugDescription) at \(position) of \(length)")
                }
            }
        }
    }

    @Test func seededRandomStrings() {
        var state: UInt64 = 0x5EED
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        let pool: [Character] = ["a", "Z", "0", " ", "\"", "\\", "\n", "\t", "\u{0}", "\u{7F}", "ß", "中", "😀", "\u{2029}"]
        for _ in 0..<500 {
            let length = Int(next() % 48)
            let text = String((0..<length).map { _ in pool[Int(next() % UInt64(pool.count))] })
            #expect(Self.written(text) == Self.reference(text))
        }
    }

    @Test func literalMemberNamesWriteAsEscapedOnesDo() {
        var byLiteral = JSONWriter()
        byLiteral.beginObject()
        byLiteral.key(literal: "productIdentifier")
        byLiteral.string("a")
        byLiteral.key(literal: "price")
        byLiteral.null()
        byLiteral.endObject()
        var byString = JSONWriter()
        byString.beginObject()
        byString.key("productIdentifier")
        byString.string("a")
        byString.key("price")
        byString.null()
        byString.endObject()
        #expect(byLiteral.finish().bytes == byString.finish().bytes)
        #expect(String(decoding: byLiteral.bytes, as: UTF8.self) == #"{"productIdentifier":"a","price":null}"#)
    }
}
