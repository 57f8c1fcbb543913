import JSONRPC
import Testing

/// JSONValue literals and accessors, JSONObject's ordered-map behaviour.
@Suite("JSON values")
struct JSONValueTests {
    @Test("literals build the expected cases")
    func literals() {
        let value: JSONValue = ["s": "x", "i": 42, "b": true, "n": nil, "a": [1, "2"], "o": ["k": false]]
        let expected = JSONValue.object(JSONObject([
            ("s", .string("x")),
            ("i", .number("42")),
            ("b", .bool(true)),
            ("n", .null),
            ("a", .array([.number("1"), .string("2")])),
            ("o", .object(JSONObject([("k", .bool(false))]))),
        ]))
        #expect(value == expected)
    }

    @Test("accessors answer only for their own case")
    func accessors() {
        let string: JSONValue = "x"
        let number: JSONValue = .number("1.50")
        let object: JSONValue = ["k": 1]
        #expect(string.stringValue == "x" && number.stringValue == nil)
        #expect(number.numberText == "1.50" && string.numberText == nil)
        #expect(object.objectValue == ["k": 1] && string.objectValue == nil)
        #expect(JSONValue.array([1]).arrayValue == [1] && object.arrayValue == nil)
        #expect(JSONValue.bool(false).boolValue == false && JSONValue.null.boolValue == nil)
        #expect(JSONValue.null.isNull && !JSONValue.bool(false).isNull)
    }

    @Test("intValue reads plain integers only")
    func intValue() {
        #expect(JSONValue.number("42").intValue == 42)
        #expect(JSONValue.number("-0").intValue == 0)
        #expect(JSONValue.number("9223372036854775807").intValue == Int.max)
        #expect(JSONValue.number("9223372036854775808").intValue == nil)
        #expect(JSONValue.number("2.0").intValue == nil)
        #expect(JSONValue.number("1e2").intValue == nil)
        #expect(JSONValue.string("42").intValue == nil)
    }

    @Test("equality is textual: number text and member order count")
    func equality() {
        #expect(JSONValue.number("1") != JSONValue.number("1.0"))
        let ab: JSONValue = ["a": 1, "b": 2]
        let ba: JSONValue = ["b": 2, "a": 1]
        #expect(ab != ba)
        #expect(ab == ["a": 1, "b": 2])
        #expect(Set([ab, ba, ["a": 1, "b": 2]]).count == 2)
    }

    @Test("equality is textual for strings too: canonically equivalent text that differs in bytes is not equal")
    func canonicallyEquivalentStrings() {
        let composed: JSONValue = "\u{E9}", decomposed: JSONValue = "e\u{301}"
        #expect(composed != decomposed)
        #expect(JSONValue.string("K") != .string("\u{212A}"))
        #expect(JSONValue.array([composed]) != .array([decomposed]))
        #expect(JSONValue.object(["\u{E9}": 1]) != .object(["e\u{301}": 1]))
        #expect(Set<JSONValue>([composed, decomposed, composed]).count == 2)
        // The promise the fuzz target checks: equal exactly when the same bytes.
        #expect((composed == decomposed) == (composed.serialized() == decomposed.serialized()))
        #expect(composed == .string("\u{E9}"))
    }

    @Test("subscript set replaces in place, appends, and removes")
    func objectSubscript() {
        var object: JSONObject = ["a": 1, "b": 2, "c": 3]
        object["b"] = "two"
        #expect(object.keys == ["a", "b", "c"])
        #expect(object["b"] == "two")
        object["d"] = nil
        #expect(object.count == 3)
        object["d"] = 4
        #expect(object.keys == ["a", "b", "c", "d"])
        object["a"] = nil
        #expect(object.keys == ["b", "c", "d"])
        #expect(object["a"] == nil)
        // null is a value, not an absence.
        object["e"] = .null
        #expect(object["e"] == .null)
        #expect(object.count == 4)
        #expect(!object.isEmpty && JSONObject().isEmpty)
    }

    @Test("the sequence yields members in order")
    func objectSequence() {
        let object = JSONObject([("z", 1), ("y", 2), ("x", 3)])
        #expect(object.map(\.key) == ["z", "y", "x"])
        #expect(object.map(\.value) == [1, 2, 3])
    }

    @Test("a repeated key keeps its first position and its last value")
    func repeatedKeys() {
        let small = JSONObject([("a", 1), ("b", 2), ("a", 3)])
        #expect(small.keys == ["a", "b"] && small["a"] == 3)
        let literal: JSONValue = ["a": 1, "b": 2, "a": 3]
        #expect(literal == .object(small))
        let large = JSONObject((0 ..< 30).map { ("k\($0 % 20)", JSONValue.integer($0)) })
        #expect(large.keys == (0 ..< 20).map { "k\($0)" })
        #expect(large["k5"] == 25 && large["k19"] == 19)

        // Keys are compared by their UTF-8, as RFC 8259 section 8.3 says.
        let equivalent = JSONObject([("\u{E9}", 1), ("e\u{301}", 2), ("\u{E9}", 3)])
        #expect(equivalent.count == 2 && equivalent["\u{E9}"] == 3 && equivalent["e\u{301}"] == 2)
        var edited = equivalent
        edited["e\u{301}"] = nil
        #expect(edited.count == 1 && edited["\u{E9}"] == 3)
    }
}
