import JSONRPC
import Testing

/// Compact serialization, byte for byte.
@Suite("JSON serializer")
struct JSONWriterTests {
    @Test("compact, members in order, numbers as stored")
    func compact() {
        let value: JSONValue = [
            "b": 1,
            "a": [true, false, nil, .number("1e400"), .number("-0"), .number("0.10")],
            "c": ["x": "y", "e": [:], "f": []],
        ]
        #expect(value.serializedString == #"{"b":1,"a":[true,false,null,1e400,-0,0.10],"c":{"x":"y","e":{},"f":[]}}"#)
        #expect(value.serialized() == Array(value.serializedString.utf8))
        #expect(value.description == value.serializedString)
    }

    @Test("every control character is escaped, short forms where JSON has them")
    func controlCharacters() {
        for code in UInt8(0x00) ..< 0x20 {
            let expected: String
            switch code {
            case 0x08: expected = #"\b"#
            case 0x09: expected = #"\t"#
            case 0x0A: expected = #"\n"#
            case 0x0C: expected = #"\f"#
            case 0x0D: expected = #"\r"#
            default:
                let digits = String(code, radix: 16)
                expected = #"\u00"# + (digits.count == 1 ? "0" + digits : digits)
            }
            let value = JSONValue.string(String(UnicodeScalar(code)))
            #expect(value.serialized() == Array("\"\(expected)\"".utf8), "U+\(String(code, radix: 16))")
        }
        #expect(JSONValue.string("\u{1F}").serializedString == #""\u001f""#)
        #expect(JSONValue.string("\u{0}").serializedString == #""\u0000""#)
    }

    @Test("quote and backslash are escaped; slash, DEL and non-ASCII are not")
    func otherCharacters() {
        #expect(JSONValue.string(#"a"b\c/d"#).serializedString == #""a\"b\\c/d""#)
        #expect(JSONValue.string("\u{7F}").serialized() == [0x22, 0x7F, 0x22])
        #expect(JSONValue.string("é€😀").serialized()
            == [0x22, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0x22])
        #expect(JSONValue.string("\u{2028}\u{2029}").serialized() == [0x22, 0xE2, 0x80, 0xA8, 0xE2, 0x80, 0xA9, 0x22])
        // A decomposed é stays decomposed: the serializer does not normalise.
        #expect(JSONValue.string("e\u{301}").serialized() == [0x22, 0x65, 0xCC, 0x81, 0x22])
    }

    @Test("member names are escaped like strings")
    func memberNames() {
        let value: JSONValue = ["a\"\n/é": 1]
        #expect(value.serialized() == Array(#"{"a\"\n/"#.utf8) + [0xC3, 0xA9] + Array(#"":1}"#.utf8))
    }

    @Test("number text that is not a JSON number is written as null")
    func invalidNumberText() {
        let value: JSONValue = [.number("NaN"), .number(""), .number("01"), .number("1 "), .number("+1"), .number("0x1"), .number("2")]
        #expect(value.serializedString == "[null,null,null,null,null,null,2]")
    }

    @Test("numbers built from Int and from decimal text")
    func numberConstruction() {
        #expect(JSONValue.integer(-5) == .number("-5"))
        #expect(JSONValue.integer(Int.min).serializedString == "-9223372036854775808")
        #expect(JSONValue(numberText: "9.99") == .number("9.99"))
        #expect(JSONValue(numberText: "0.00") == .number("0.00"))
        #expect(JSONValue(numberText: "-0") == .number("-0"))
        #expect(JSONValue(numberText: "1E+2") == .number("1E+2"))
        for invalid in ["", " 1", "1 ", ".5", "5.", "+1", "01", "1e", "NaN", "Infinity", "1,5", "٣"] {
            #expect(JSONValue(numberText: invalid) == nil, "\(invalid)")
        }
    }

    @Test("serializing what was parsed gives the canonical compact form")
    func roundTrip() throws {
        let input = #" { "id" : 12345678901234567890 , "s" : "\u00e9\/\u0007" , "n" : [ -0 , 1.0E-7 ] } "#
        let value = try JSONParser.parse(input.utf8)
        #expect(value.serialized() == Array(#"{"id":12345678901234567890,"s":"é/\u0007","n":[-0,1.0E-7]}"#.utf8))
        #expect(try JSONParser.parse(value.serialized()) == value)
    }
}
