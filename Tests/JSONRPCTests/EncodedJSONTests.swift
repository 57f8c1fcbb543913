import JSONRPC
import Testing

/// The token writer, pre-encoded values and responses written without a
/// tree, each against the tree serializer, byte for byte.
@Suite("Encoded JSON")
struct EncodedJSONTests {
    static let texts: [String] = [
        "", "plain", #"q"uote"#, #"back\slash"#, "/", "\u{7F}", "é€😀", "e\u{301}", "\u{2028}\u{2029}",
        "\"\"\\\\", "\n", "ends with a tab\t", "\u{0}\u{1}\u{1F} between \u{08}\u{0C}\r",
        String(repeating: "a", count: 1000) + "\"" + String(repeating: "b", count: 1000),
        String((0 ..< 0x80).map { Character(Unicode.Scalar(UInt8($0))) }),
    ]

    @Test("strings and member names escape as the tree does", arguments: texts)
    func strings(text: String) throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key(text)
        writer.string(text)
        writer.endObject()
        let tree: JSONValue = .object(JSONObject([(text, .string(text))]))
        #expect(writer.bytes == tree.serialized())
        #expect(try JSONParser.parse(writer.bytes) == tree)
    }

    @Test("integers and number text as the tree writes them")
    func numbers() {
        for integer in [0, 1, -1, 9, 10, 4_999, -5, Int.max, Int.min] {
            var writer = JSONWriter()
            writer.integer(integer)
            #expect(writer.bytes == JSONValue.integer(integer).serialized(), "\(integer)")
        }
        for text in ["4.99", "0.00", "1200", "-0", "1e400", "NaN", "", "01", "+1", " 1"] {
            var writer = JSONWriter()
            writer.number(text)
            #expect(writer.bytes == JSONValue.number(text).serialized(), "\(text)")
        }
    }

    @Test("tokens, whole values and spliced bytes make one document")
    func tokens() throws {
        let inner: JSONValue = ["x": [1, "two", nil], "y": [:]]
        let spliced = EncodedJSON(inner)
        var writer = JSONWriter(reservingCapacity: 16)
        writer.beginObject()
        writer.key("a")
        writer.beginArray()
        writer.bool(true)
        writer.bool(false)
        writer.null()
        writer.beginArray()
        writer.endArray()
        writer.beginObject()
        writer.endObject()
        writer.encoded(spliced)
        writer.value(inner)
        writer.value(.encoded(spliced))
        writer.endArray()
        writer.key("b")
        writer.integer(-12)
        writer.endObject()
        #expect(writer.isComplete)
        let expected: JSONValue = ["a": [true, false, nil, [], [:], inner, inner, inner], "b": -12]
        let bytes = writer.finish().bytes
        #expect(bytes == expected.serialized())
        #expect(try JSONParser.parse(bytes) == expected)
    }

    @Test("an encoded value is written as its bytes, inside trees too")
    func encodedValues() throws {
        let tree: JSONValue = ["products": [["id": "a\"b", "price": .number("9.99")]], "region": nil]
        let encoded = JSONValue.encoded(EncodedJSON(tree))
        #expect(encoded.serialized() == tree.serialized())
        #expect(JSONValue.array([encoded, tree]).serialized() == JSONValue.array([tree, tree]).serialized())
        #expect(encoded.description == tree.description)
        // Equality across forms is by bytes only when both are encoded.
        #expect(encoded == .encoded(EncodedJSON(tree)))
        #expect(encoded != tree)
        #expect(encoded.objectValue == nil)
        #expect(!encoded.isNull)
        #expect(JSONRPCID(jsonValue: encoded) == nil)
    }

    static let ids: [JSONRPCID] = [
        .number("1"), .number("-0"), .number("1.5"), .number("12345678901234567890"), .number("1e400"),
        .string("1"), .string(""), .string("é \"quoted\" \u{1}"), .null,
    ]

    @Test("responses are written as their trees serialize", arguments: ids)
    func responses(id: JSONRPCID) {
        let result: JSONValue = ["products": [], "invalidProductIdentifiers": ["x"]]
        let outcomes: [Result<JSONValue, JSONRPCError>] = [
            .success(result),
            .success(.encoded(EncodedJSON(result))),
            .success(nil),
            .success(.number("0.10")),
            .failure(.methodNotFound("nope")),
            .failure(.invalidParams("bad \"param\"", data: ["param": "countryCode", "requestId": "r-1"])),
            .failure(JSONRPCError(code: -32001, message: "upstream\nfailed", data: .encoded(EncodedJSON(["retryable": true])))),
        ]
        for outcome in outcomes {
            let response = JSONRPCResponse(id: id, outcome: outcome)
            #expect(response.serialized() == response.jsonValue.serialized(), "\(outcome)")
        }
        // A pre-encoded result and its tree give the same response bytes.
        #expect(JSONRPCResponse(id: id, outcome: .success(.encoded(EncodedJSON(result)))).serialized()
            == JSONRPCResponse(id: id, outcome: .success(result)).jsonValue.serialized())
    }

    /// A method answering with bytes encoded once, as `products.fetch` does.
    static func server() -> JSONRPCServer<String> {
        let result = EncodedJSON(["products": [["productIdentifier": "a", "price": ["value": .number("0.00")]]], "note": "\u{2028}"])
        return JSONRPCServer(maxBatchSize: 10, methods: [
            "encoded": .answering { _, _ in .success(.encoded(result)) },
            "tree": .answering { _, _ in .success(["tree": true]) },
        ])
    }

    @Test("the engine appends an encoded result and echoes the id", arguments: IDEchoTests.ids)
    func engineSingle(id: String) async {
        let expected = #"{"jsonrpc":"2.0","result":{"products":[{"productIdentifier":"a","price":{"value":0.00}}],"note":"\#u{2028}"},"id":\#(id)}"#
        #expect(await Self.server().replyText(to: #"{"jsonrpc":"2.0","method":"encoded","id":\#(id)}"#, context: "") == WireText(expected))
    }

    @Test("a batch mixes encoded results, tree results, errors and notifications")
    func engineBatch() async {
        let body = #"[{"jsonrpc":"2.0","method":"encoded","id":-0},{"jsonrpc":"2.0","method":"tree","id":"t"},"#
            + #"{"jsonrpc":"2.0","method":"encoded"},{"jsonrpc":"2.0","method":"nope","id":1.50},3]"#
        let expected = #"[{"jsonrpc":"2.0","result":{"products":[{"productIdentifier":"a","price":{"value":0.00}}],"note":"\#u{2028}"},"id":-0},"#
            + #"{"jsonrpc":"2.0","result":{"tree":true},"id":"t"},"#
            + #"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: nope"},"id":1.50},"#
            + #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: expected a request object"},"id":null}]"#
        #expect(await Self.server().replyText(to: body, context: "") == WireText(expected))
    }

    @Test("misuse of the writer stops the process instead of writing broken JSON")
    func misuse() async {
        await #expect(processExitsWith: .failure) {
            var writer = JSONWriter()
            writer.beginObject()
            writer.string("a value without a member name")
        }
        await #expect(processExitsWith: .failure) {
            var writer = JSONWriter()
            writer.null()
            writer.null()
        }
        await #expect(processExitsWith: .failure) {
            var writer = JSONWriter()
            writer.beginArray()
            writer.endObject()
        }
        await #expect(processExitsWith: .failure) {
            var writer = JSONWriter()
            writer.beginArray()
            _ = writer.finish()
        }
    }
}

/// Objects read by the parser take the parser's member array when the keys
/// are unique, and still follow `JSON.parse` when they are not.
@Suite("Parsed objects")
struct ParsedObjectTests {
    @Test func repeatedKeysKeepTheFirstPositionAndTheLastValue() throws {
        #expect(try JSONParser.parse(#"{"a":1,"b":2,"a":3}"#.utf8).serializedString == #"{"a":3,"b":2}"#)
        let many = (0 ..< 40).map { #""k\#($0 % 20)":\#($0)"# }.joined(separator: ",")
        let expected = (0 ..< 20).map { #""k\#($0)":\#($0 + 20)"# }.joined(separator: ",")
        #expect(try JSONParser.parse("{\(many)}".utf8).serializedString == "{\(expected)}")
    }

    @Test func nestedContainersCloseInOrder() throws {
        let text = #"{"a":[1,{"b":[[],{},[{"c":null}]],"d":"e"},[2,3]],"f":{"g":{"h":[true,false]}},"i":-0}"#
        #expect(try JSONParser.parse(text.utf8).serializedString == text)
        let deep = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(try JSONParser.parse(deep.utf8).serializedString == deep)
        let wide = "[" + (0 ..< 500).map(String.init).joined(separator: ",") + "]"
        #expect(try JSONParser.parse(wide.utf8).serializedString == wide)
    }
}
