import JSONRPC
import Testing

/// Strict RFC 8259 parsing on bytes.
@Suite("JSON parser")
struct JSONParserTests {
    private func parse(_ text: String, limits: JSONParser.Limits = .init()) throws(JSONParseError) -> JSONValue {
        try JSONParser.parse(text.utf8, limits: limits)
    }

    /// The error `text` fails with, or `nil` when it parses.
    private func error(_ bytes: [UInt8], limits: JSONParser.Limits = .init()) -> JSONParseError? {
        do {
            _ = try JSONParser.parse(bytes, limits: limits)
            return nil
        } catch {
            return error
        }
    }

    private func error(_ text: String, limits: JSONParser.Limits = .init()) -> JSONParseError? {
        error(Array(text.utf8), limits: limits)
    }

    // MARK: - Values

    @Test("scalars and containers")
    func values() throws {
        #expect(try parse("null") == .null)
        #expect(try parse("true") == .bool(true))
        #expect(try parse("false") == .bool(false))
        #expect(try parse(#""a""#) == .string("a"))
        #expect(try parse("[]") == .array([]))
        #expect(try parse("{}") == .object(JSONObject()))
        #expect(try parse(#"{"a":[1,{"b":null}],"c":"d"}"#)
            == .object(["a": .array([.number("1"), .object(["b": .null])]), "c": .string("d")]))
    }

    @Test("numbers are kept as their exact text", arguments: [
        "0", "-0", "0.0", "-0.0", "1", "-1", "12345678901234567890", "1e400", "-1e-400", "1E400",
        "1.5e3", "1.5E+3", "1.5e-3", "0e0", "9.99", "0.00", "1200", "4.990",
        "123456789012345678901234567890.123456789012345678901234567890e-999",
    ])
    func numberText(text: String) throws {
        #expect(try parse(text) == .number(text))
        #expect(try parse("[\(text)]") == .array([.number(text)]))
        #expect(try parse(" {\"n\" : \(text) } ") == .object(["n": .number(text)]))
    }

    @Test("numbers outside the RFC 8259 grammar", arguments: [
        ("01", 0, "leading zeros are not allowed in numbers at byte 0"),
        ("-01", 1, "leading zeros are not allowed in numbers at byte 1"),
        ("[1,00]", 3, "leading zeros are not allowed in numbers at byte 3"),
        ("01.5", 0, "leading zeros are not allowed in numbers at byte 0"),
        ("+1", 0, "unexpected character '+' at byte 0, expected a value"),
        (".5", 0, "unexpected character '.' at byte 0, expected a value"),
        ("1.", 2, "unexpected end of input at byte 2, expected a digit after '.'"),
        ("1.e3", 2, "unexpected character 'e' at byte 2, expected a digit after '.'"),
        ("1e", 2, "unexpected end of input at byte 2, expected a digit in the exponent"),
        ("1e+", 3, "unexpected end of input at byte 3, expected a digit in the exponent"),
        ("1E-x", 3, "unexpected character 'x' at byte 3, expected a digit in the exponent"),
        ("-", 1, "unexpected end of input at byte 1, expected a digit"),
        ("-a", 1, "unexpected character 'a' at byte 1, expected a digit"),
        ("- 1", 1, "unexpected character ' ' at byte 1, expected a digit"),
        ("NaN", 0, "unexpected character 'N' at byte 0, expected a value"),
        ("Infinity", 0, "unexpected character 'I' at byte 0, expected a value"),
        ("-Infinity", 1, "unexpected character 'I' at byte 1, expected a digit"),
        ("0x10", 1, "unexpected character 'x' at byte 1 after the JSON value"),
        ("1_000", 1, "unexpected character '_' at byte 1 after the JSON value"),
    ])
    func invalidNumbers(text: String, offset: Int, message: String) {
        #expect(error(text) == JSONParseError(offset: offset, message: message))
    }

    // MARK: - Structure

    @Test("only space, tab, line feed and carriage return are whitespace")
    func whitespace() throws {
        #expect(try parse(" \t\n\r[ \t\n\r1 \t\n\r, \t\n\r{ \t\n\r\"a\" \t\n\r: \t\n\r2 \t\n\r} \t\n\r] \t\n\r")
            == .array([.number("1"), .object(["a": .number("2")])]))
        #expect(error("\u{0C}1") == JSONParseError(offset: 0, message: "unexpected byte 0x0C at byte 0, expected a value"))
        #expect(error("[1,\u{0B}2]") == JSONParseError(offset: 3, message: "unexpected byte 0x0B at byte 3, expected a value"))
        #expect(error("\u{A0}1") == JSONParseError(offset: 0, message: "unexpected byte 0xC2 at byte 0, expected a value"))
        #expect(error([0xEF, 0xBB, 0xBF, 0x31]) == JSONParseError(offset: 0, message: "unexpected byte 0xEF at byte 0, expected a value"))
    }

    @Test("malformed structure", arguments: [
        ("", 0, "unexpected end of input at byte 0, expected a value"),
        ("   ", 3, "unexpected end of input at byte 3, expected a value"),
        ("[1,]", 3, "unexpected character ']' at byte 3, expected a value"),
        (#"{"a":1,}"#, 7, "unexpected character '}' at byte 7, expected a member name in double quotes"),
        ("[,1]", 1, "unexpected character ',' at byte 1, expected a value"),
        ("[1 2]", 3, "unexpected character '2' at byte 3, expected ',' or ']'"),
        (#"{"a" 1}"#, 5, "unexpected character '1' at byte 5, expected ':'"),
        (#"{"a":}"#, 5, "unexpected character '}' at byte 5, expected a value"),
        (#"{"a":1 "b":2}"#, 7, "unexpected character '\"' at byte 7, expected ',' or '}'"),
        ("{a:1}", 1, "unexpected character 'a' at byte 1, expected a member name in double quotes"),
        ("{'a':1}", 1, "unexpected character ''' at byte 1, expected a member name in double quotes"),
        ("['a']", 1, "unexpected character ''' at byte 1, expected a value"),
        ("[1}", 2, "unexpected character '}' at byte 2, expected ',' or ']'"),
        (#"{"a":1]"#, 6, "unexpected character ']' at byte 6, expected ',' or '}'"),
        ("[", 1, "unexpected end of input at byte 1, expected a value"),
        ("[1", 2, "unexpected end of input at byte 2, expected ',' or ']'"),
        ("{", 1, "unexpected end of input at byte 1, expected a member name in double quotes"),
        (#"{"a""#, 4, "unexpected end of input at byte 4, expected ':'"),
        ("// c\n1", 0, "unexpected character '/' at byte 0, expected a value"),
        ("/* c */ 1", 0, "unexpected character '/' at byte 0, expected a value"),
        ("[1] // c", 4, "unexpected character '/' at byte 4 after the JSON value"),
        ("[1,/*c*/2]", 3, "unexpected character '/' at byte 3, expected a value"),
        ("tru", 3, "unexpected end of input at byte 3, expected 'true'"),
        ("nul", 3, "unexpected end of input at byte 3, expected 'null'"),
        ("fals3", 4, "unexpected character '3' at byte 4, expected 'false'"),
        ("True", 0, "unexpected character 'T' at byte 0, expected a value"),
        ("undefined", 0, "unexpected character 'u' at byte 0, expected a value"),
    ])
    func malformed(text: String, offset: Int, message: String) {
        #expect(error(text) == JSONParseError(offset: offset, message: message))
    }

    @Test("exactly one value, then only whitespace", arguments: [
        ("1 2", 2, "unexpected character '2' at byte 2 after the JSON value"),
        ("{}x", 2, "unexpected character 'x' at byte 2 after the JSON value"),
        ("[]]", 2, "unexpected character ']' at byte 2 after the JSON value"),
        ("truex", 4, "unexpected character 'x' at byte 4 after the JSON value"),
        ("\"a\"\"b\"", 3, "unexpected character '\"' at byte 3 after the JSON value"),
        ("{} {}", 3, "unexpected character '{' at byte 3 after the JSON value"),
        ("null\u{0}", 4, "unexpected byte 0x00 at byte 4 after the JSON value"),
        ("1,", 1, "unexpected character ',' at byte 1 after the JSON value"),
    ])
    func trailingData(text: String, offset: Int, message: String) {
        #expect(error(text) == JSONParseError(offset: offset, message: message))
    }

    @Test("nesting up to maxDepth parses, one level more fails")
    func depthLimit() throws {
        let deepest = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(error(deepest) == nil)
        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(error(tooDeep) == JSONParseError(offset: 64, message: "nesting deeper than 64 levels at byte 64"))

        let objects = String(repeating: #"{"a":"#, count: 65) + "1" + String(repeating: "}", count: 65)
        #expect(error(objects) == JSONParseError(offset: 320, message: "nesting deeper than 64 levels at byte 320"))
        #expect(error(objects, limits: .init(maxDepth: 65)) == nil)

        #expect(error("[[1]]", limits: .init(maxDepth: 2)) == nil)
        #expect(error("[[[1]]]", limits: .init(maxDepth: 2)) == JSONParseError(offset: 2, message: "nesting deeper than 2 levels at byte 2"))
        #expect(error("1", limits: .init(maxDepth: 0)) == nil)
        #expect(error("[]", limits: .init(maxDepth: 0)) == JSONParseError(offset: 0, message: "nesting deeper than 0 levels at byte 0"))
        // The limit is on nesting, not on the number of containers.
        #expect(error("[" + Array(repeating: "[[]]", count: 1000).joined(separator: ",") + "]", limits: .init(maxDepth: 3)) == nil)
    }

    @Test("a raised depth limit is honoured without recursion")
    func raisedDepthLimit() throws {
        let depth = 2000
        let value = try parse(String(repeating: "[", count: depth) + "0" + String(repeating: "]", count: depth), limits: .init(maxDepth: depth))
        var level = 0
        var current = value
        while case .array(let elements) = current, let first = elements.first {
            level += 1
            current = first
        }
        #expect(level == depth)
        #expect(current == .number("0"))
    }

    // MARK: - Strings

    @Test("escapes decode and round trip to the serializer's canonical form")
    func escapes() throws {
        let value = try parse(#""\"\\\/\b\f\n\r\t\u0000\u001F\u0041\u00e9\u20AC\ud83d\ude00""#)
        #expect(value == .string("\"\\/\u{8}\u{C}\n\r\t\u{0}\u{1F}Aé€😀"))
        #expect(value.serializedString == #""\"\\/\b\f\n\r\t\u0000\u001fAé€😀""#)
        #expect(try parse(value.serializedString) == value)
    }

    @Test("surrogate pairs combine; lone surrogates are rejected")
    func surrogates() throws {
        #expect(try parse(#""\uD83D\uDE00""#) == .string("😀"))
        #expect(try parse(#""\uDBFF\uDFFF""#) == .string("\u{10FFFF}"))
        #expect(try parse(#""\uD800\uDC00""#) == .string("\u{10000}"))
        #expect(error(#""\uD800""#) == JSONParseError(offset: 1, message: #"lone surrogate \uD800 in a string at byte 1"#))
        #expect(error(#""a\udc00b""#) == JSONParseError(offset: 2, message: #"lone surrogate \uDC00 in a string at byte 2"#))
        #expect(error(#""\uD800\u0041""#) == JSONParseError(offset: 1, message: #"lone surrogate \uD800 in a string at byte 1"#))
        #expect(error(#""\uD800x""#) == JSONParseError(offset: 1, message: #"lone surrogate \uD800 in a string at byte 1"#))
        #expect(error(#""\uD800\uD800""#) == JSONParseError(offset: 1, message: #"lone surrogate \uD800 in a string at byte 1"#))
        #expect(error(#""\uDE00\uD83D""#) == JSONParseError(offset: 1, message: #"lone surrogate \uDE00 in a string at byte 1"#))
        #expect(error(#""\uD800\n""#) == JSONParseError(offset: 1, message: #"lone surrogate \uD800 in a string at byte 1"#))
    }

    @Test("bad escapes", arguments: [
        (#""\x""#, 1, #"invalid escape '\x' in a string at byte 1"#),
        (#""ab\'""#, 3, #"invalid escape '\'' in a string at byte 3"#),
        (#""\U0041""#, 1, #"invalid escape '\U' in a string at byte 1"#),
        (#""\u12""#, 1, #"invalid \u escape at byte 1, expected four hex digits"#),
        (#""\u12G4""#, 1, #"invalid \u escape at byte 1, expected four hex digits"#),
        (#""\u""#, 1, #"invalid \u escape at byte 1, expected four hex digits"#),
        (#""\"#, 2, #"unexpected end of input at byte 2, expected an escape sequence"#),
        (#""\u12"#, 5, #"unexpected end of input at byte 5, expected four hex digits after '\u'"#),
    ])
    func badEscapes(text: String, offset: Int, message: String) {
        #expect(error(text) == JSONParseError(offset: offset, message: message))
    }

    @Test("control characters must be escaped; strings must end")
    func controlCharacters() throws {
        #expect(error("\"a\tb\"") == JSONParseError(offset: 2, message: "unescaped control character 0x09 in a string at byte 2"))
        #expect(error("\"\n\"") == JSONParseError(offset: 1, message: "unescaped control character 0x0A in a string at byte 1"))
        #expect(error("[\"é\u{0}\"]") == JSONParseError(offset: 4, message: "unescaped control character 0x00 in a string at byte 4"))
        #expect(error("\"abc") == JSONParseError(offset: 4, message: "unexpected end of input at byte 4, expected '\"' to close the string that starts at byte 0"))
        #expect(error("[\"é") == JSONParseError(offset: 4, message: "unexpected end of input at byte 4, expected '\"' to close the string that starts at byte 1"))
        // DEL is not a control character for JSON.
        #expect(try parse("\"\u{7F}\"") == .string("\u{7F}"))
    }

    @Test("valid UTF-8 of every length is kept")
    func validUTF8() throws {
        let text = "aé€😀\u{10FFFF}\u{FFFD}\u{E000}\u{D7FF}"
        #expect(try parse("\"\(text)\"") == .string(text))
        #expect(try parse("{\"ключ\":\"значение\"}") == .object(["ключ": "значение"]))
    }

    @Test("invalid UTF-8 is rejected", arguments: [
        ([0x22, 0xFF, 0x22], 1),                         // never valid
        ([0x22, 0x80, 0x22], 1),                         // lone continuation byte
        ([0x22, 0xC0, 0x80, 0x22], 1),                   // overlong NUL
        ([0x22, 0xC1, 0xBF, 0x22], 1),                   // overlong ASCII
        ([0x22, 0xE0, 0x80, 0x80, 0x22], 1),             // overlong 3-byte
        ([0x22, 0xF0, 0x80, 0x80, 0x80, 0x22], 1),       // overlong 4-byte
        ([0x22, 0x61, 0xED, 0xA0, 0x80, 0x22], 2),       // encoded surrogate U+D800
        ([0x22, 0xED, 0xBF, 0xBF, 0x22], 1),             // encoded surrogate U+DFFF
        ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1),       // past U+10FFFF
        ([0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], 1),       // past U+10FFFF
        ([0x22, 0xC3, 0x22], 1),                         // truncated, then the quote
        ([0x22, 0xE2, 0x82, 0x22], 1),                   // truncated 3-byte
        ([0x22, 0xF0, 0x9F, 0x98, 0x22], 1),             // truncated 4-byte
        ([0x22, 0xC3], 1),                               // truncated at end of input
        ([0x22, 0xC3, 0xA9, 0xA9, 0x22], 3),             // continuation after a complete sequence
    ] as [([UInt8], Int)])
    func invalidUTF8(bytes: [UInt8], offset: Int) {
        #expect(error(bytes) == JSONParseError(offset: offset, message: "invalid UTF-8 at byte \(offset)"))
    }

    @Test("non-ASCII bytes outside strings are unexpected")
    func nonASCIIOutsideStrings() {
        #expect(error([0xFF]) == JSONParseError(offset: 0, message: "unexpected byte 0xFF at byte 0, expected a value"))
        #expect(error([0x5B, 0x31, 0xC3, 0xA9, 0x5D]) == JSONParseError(offset: 2, message: "unexpected byte 0xC3 at byte 2, expected ',' or ']'"))
    }

    // MARK: - Objects

    @Test("a repeated member keeps its first position and its last value")
    func repeatedMembers() throws {
        let object = try #require(try parse(#"{"a":1,"b":2,"a":3}"#).objectValue)
        #expect(object.keys == ["a", "b"])
        #expect(object["a"] == 3)
        #expect(JSONValue.object(object).serializedString == #"{"a":3,"b":2}"#)

        // Objects large enough to be de-duplicated through a dictionary.
        let members = (0 ..< 40).map { #""k\#($0)":\#($0)"# } + [#""k7":"last""#, #""k39":null"#]
        let large = try #require(try parse("{" + members.joined(separator: ",") + "}").objectValue)
        #expect(large.count == 40)
        #expect(large.keys == (0 ..< 40).map { "k\($0)" })
        #expect(large["k7"] == "last")
        #expect(large["k39"] == .null)
        #expect(large["k8"] == 8)
    }

    /// RFC 8259 section 8.3 compares names code unit by code unit; Swift's
    /// `String ==` compares canonical equivalence, under which `é` (U+00E9)
    /// equals `e` + U+0301 and the Kelvin sign U+212A equals `K`. Found by
    /// the fuzz target's check that equal values write equal bytes.
    @Test("names that differ in bytes but are canonically equivalent are two members")
    func canonicallyEquivalentNames() throws {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        let object = try #require(try parse(#"{"\#(composed)":1,"\#(decomposed)":2,"K":3,"\#u{212A}":4}"#).objectValue)
        #expect(object.keys.map { Array($0.utf8) } == [composed, decomposed, "K", "\u{212A}"].map { Array($0.utf8) })
        #expect(object[composed] == 1)
        #expect(object[decomposed] == 2)
        #expect(object["\u{212A}"] == 4)
        #expect(JSONValue.object(object).serialized() == Array(#"{"\#(composed)":1,"\#(decomposed)":2,"K":3,"\#u{212A}":4}"#.utf8))

        // The same through the dictionary that de-duplicates large objects.
        let padding = (0 ..< 20).map { #""k\#($0)":0"# }
        let large = try #require(try parse("{" + (padding + [#""\#(composed)":1"#, #""\#(decomposed)":2"#]).joined(separator: ",") + "}").objectValue)
        #expect(large.count == 22)
        #expect(large[decomposed] == 2)
    }

    // MARK: - Input

    @Test("any collection of bytes is accepted")
    func inputCollections() throws {
        let expected: JSONValue = ["a": [1, "é"]]
        let text = #"{"a":[1,"é"]}"#
        #expect(try JSONParser.parse(text.utf8) == expected)
        #expect(try JSONParser.parse(Array(text.utf8)) == expected)
        #expect(try JSONParser.parse(Array(("xx" + text).utf8).dropFirst(2)) == expected)
        // Not contiguous: takes the copying path.
        #expect(try JSONParser.parse(Array(text.utf8).lazy.map { $0 }) == expected)
        // Offsets count from the start of the collection (2), not of the
        // array it slices (3).
        #expect(throws: JSONParseError(offset: 2, message: "unexpected character 'x' at byte 2, expected ',' or ']'")) {
            try JSONParser.parse(Array("[[1x]".utf8).dropFirst())
        }
    }

    @Test("a 64 KiB body parses and round trips")
    func largeBody() throws {
        let element: JSONValue = [
            "productIdentifier": "premium_monthly",
            "localizedTitle": "Prämie \"plus\" 😀",
            "price": ["value": .number("4.99"), "currencyCode": "EUR"],
            "tags": [true, false, nil, .number("-1.5e-10")],
        ]
        // As many elements as fit in the default body limit of 64 KiB.
        let count = 65_536 / (element.serialized().count + 1)
        let value = JSONValue.array(Array(repeating: element, count: count))
        let bytes = value.serialized()
        #expect(bytes.count > 60_000 && bytes.count <= 65_536)
        let parsed = try JSONParser.parse(bytes)
        #expect(parsed == value)
        #expect(parsed.serialized() == bytes)
    }
}
