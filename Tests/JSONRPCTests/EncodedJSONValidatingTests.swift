@testable import JSONRPC
import Testing

/// `EncodedJSON(validating:)`: bytes from elsewhere become an encoded value
/// only when they are exactly the writer's form of one value.
@Suite("EncodedJSON validating")
struct EncodedJSONValidatingTests {
    static let trees: [JSONValue] = [
        .null, .bool(true), .bool(false), .number("0"), .number("-0"), .number("12345678901234567890"), .number("4.99"),
        .number("-1.5e-3"), .number("2E+10"), .string(""), .string("plain"), .string("quote \" backslash \\ slash /"),
        .string("controls \u{0}\u{1}\u{8}\u{9}\u{A}\u{B}\u{C}\u{D}\u{1F} end"), .string("ünïcødé € 𝄞 日本"),
        .array([]), .object(JSONObject()),
        .object(["a": .array([.number("1"), .object(["b": .null]), .string("x")]), "c": .bool(false)]),
    ]

    @Test func everythingTheWriterWritesIsAccepted() {
        for tree in Self.trees {
            let bytes = tree.serialized()
            #expect(EncodedJSON(validating: bytes)?.bytes == bytes, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }

    @Test(arguments: [
        "", " ", "nul", "tru", "01", "-", "1.", ".5", "1e", "+1", "NaN", "\"", "\"abc", "[", "[1,]", "[,1]", "{\"a\"}",
        "{\"a\":}", "{\"a\":1,}", "{a:1}", "1 ", " 1", "[1, 2]", "{\"a\": 1}", "1 2", "[1]]", "\"\\x\"", "\"\\/\"",
        "\"\\u0041\"", "\"\\u000a\"", "\"\\u001F\"", "\"\\ud834\\udd1e\"", "'a'", "[true false]", "{\"a\":1}{}",
    ])
    func whatTheWriterNeverWritesIsRefused(text: String) {
        #expect(EncodedJSON(validating: Array(text.utf8)) == nil)
    }

    @Test func malformedUTF8AndRawControlsAreRefused() {
        let cases: [[UInt8]] = [
            [0x22, 0xFF, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],
            [0x22, 0xE2, 0x82, 0x22], [0x22, 0x0A, 0x22], [0x22, 0x00, 0x22], [0x22, 0xC3],
        ]
        for bytes in cases { #expect(EncodedJSON(validating: bytes) == nil, "\(bytes)") }
        #expect(EncodedJSON(validating: [0x22, 0xC3, 0xA9, 0x22]) != nil)
    }

    /// Found by fuzzing against parsing: a product whose name appears
    /// twice reads as two products to two readers.
    @Test func repeatedMemberNamesAreRefused() {
        #expect(EncodedJSON(validating: Array(#"{"a":"b","a":"c"}"#.utf8)) == nil)
        #expect(EncodedJSON(validating: Array(#"{"productIdentifier":"x","price":{"value":1,"value":2}}"#.utf8)) == nil)
        #expect(EncodedJSON(validating: Array(#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#.utf8)) != nil)
        #expect(EncodedJSON(validating: Array(#"{"ab":1,"a":1,"b":1}"#.utf8)) != nil)
        let members = (0..<EncodedJSON.maxObjectMembers).map { "\"m\($0)\":\($0)" }
        #expect(EncodedJSON(validating: Array(("{" + members.joined(separator: ",") + "}").utf8)) != nil)
        #expect(EncodedJSON(validating: Array(("{" + (members + [#""one":1"#]).joined(separator: ",") + "}").utf8)) == nil)
    }

    @Test func nestingIsBounded() {
        let deep = Array(String(repeating: "[", count: 10).utf8) + Array(String(repeating: "]", count: 10).utf8)
        #expect(EncodedJSON(validating: deep, maxDepth: 10) != nil)
        #expect(EncodedJSON(validating: deep, maxDepth: 9) == nil)
    }

    /// Whatever is accepted parses to a value that writes back the same bytes.
    @Test func acceptedBytesAreTheWritersFormOfWhatTheyParseTo() throws {
        let samples = [#"{"k":[1,-0.5e7,"x\n\u001fy",{"":null}],"u":"\u0000é"}"#, #"[]"#, #""\\\"""#]
        for text in samples {
            let bytes = Array(text.utf8)
            #expect(EncodedJSON(validating: bytes) != nil, "\(text)")
            #expect(try JSONParser.parse(bytes).serialized() == bytes, "\(text)")
        }
    }
}

/// The validator reads plain runs of a string eight bytes at a time: a
/// byte that ends the run (a control character, a byte of 0x80 or more, a
/// quote or a backslash) is seen at every position of every word.
@Suite("EncodedJSON validation, word by word")
struct EncodedJSONWordTests {
    static func validates(_ bytes: [UInt8]) -> Bool { EncodedJSON(validating: bytes) != nil }

    @Test func aSpecialByteIsSeenAtEveryPosition() {
        for length in 1...24 {
            for position in 0..<length {
                var text = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                #expect(Self.validates([UInt8(ascii: "\"")] + text + [UInt8(ascii: "\"")]))
                for raw: UInt8 in [0x00, 0x1F, 0x7F] {
                    text[position] = raw
                    // DEL is plain text; the control characters must be escaped.
                    #expect(Self.validates([UInt8(ascii: "\"")] + text + [UInt8(ascii: "\"")]) == (raw == 0x7F), "byte \(raw) at \(position) of \(length)")
                }
                text[position] = UInt8(ascii: "\"")
                #expect(!Self.validates([UInt8(ascii: "\"")] + text + [UInt8(ascii: "\"")]), "a bare quote at \(position) of \(length)")
                text[position] = 0xC3 // a lead byte with no continuation
                #expect(!Self.validates([UInt8(ascii: "\"")] + text + [UInt8(ascii: "\"")]), "a cut UTF-8 sequence at \(position) of \(length)")
                text.replaceSubrange(position...position, with: [0xC3, 0xA9])
                #expect(Self.validates([UInt8(ascii: "\"")] + text + [UInt8(ascii: "\"")]), "é at \(position) of \(length)")
                var writer = JSONWriter()
                writer.string(String(repeating: "x", count: position) + "\n\\\"" + String(repeating: "y", count: length))
                #expect(Self.validates(writer.finish().bytes))
            }
        }
    }
}
