import JSONRPC
import Testing

/// The id comes back as the same JSON text, on every path that answers.
@Suite("Request id echo")
struct IDEchoTests {
    /// Ids whose text must come back byte for byte.
    static let ids = [
        "1", #""1""#, "1.5", "-0", "12345678901234567890", "1e400", "null",
        "0", "-1.25E-7", "1E+2", "100000000000000000000000000000000000001", #""""#, #""é 😀 /""#,
    ]

    let server = SpecMethods().server()

    @Test("a result echoes the id", arguments: ids)
    func result(id: String) async {
        #expect(await server.replyText(to: #"{"jsonrpc":"2.0","method":"get_data","id":\#(id)}"#, context: "")
            == #"{"jsonrpc":"2.0","result":["hello",5],"id":\#(id)}"#)
    }

    @Test("an unknown method echoes the id", arguments: ids)
    func methodNotFound(id: String) async {
        #expect(await server.replyText(to: #"{"id":\#(id),"method":"nope","jsonrpc":"2.0"}"#, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: nope"},"id":\#(id)}"#)
    }

    @Test("an invalid request with a readable id echoes it", arguments: ids)
    func invalidRequest(id: String) async {
        #expect(await server.replyText(to: #"{"jsonrpc":"1.0","method":"get_data","id":\#(id)}"#, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: \"jsonrpc\" must be exactly \"2.0\""},"id":\#(id)}"#)
    }

    @Test("a method's error echoes the id", arguments: ids)
    func methodError(id: String) async {
        #expect(await server.replyText(to: #"{"jsonrpc":"2.0","method":"fail","id":\#(id)}"#, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: always","data":{"reason":"testing","retryable":false}},"id":\#(id)}"#)
    }

    @Test("batch elements echo their own ids")
    func batch() async {
        let body = #"[{"jsonrpc":"2.0","method":"get_data","id":1e400},{"jsonrpc":"2.0","method":"get_data","id":-0},{"jsonrpc":"2.0","method":"x","id":null}]"#
        #expect(await server.replyText(to: body, context: "") == """
            [{"jsonrpc":"2.0","result":["hello",5],"id":1e400},\
            {"jsonrpc":"2.0","result":["hello",5],"id":-0},\
            {"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: x"},"id":null}]
            """)
    }

    @Test("a string id returns as the same string, escapes written the serializer's way")
    func escapedStringID() async {
        // The id's value is what the client correlates on; \u0041 and A are
        // the same string, and "\/" the same as "/".
        #expect(await server.replyText(to: #"{"jsonrpc":"2.0","method":"get_data","id":"\u0041\/\n"}"#, context: "")
            == #"{"jsonrpc":"2.0","result":["hello",5],"id":"A/\n"}"#)
    }

    @Test("an id of the wrong type is answered under null", arguments: ["true", "false", "[1]", "{}", #"{"a":1}"#])
    func wrongTypeID(id: String) async {
        #expect(await server.replyText(to: #"{"jsonrpc":"2.0","method":"get_data","id":\#(id)}"#, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: \"id\" must be a string, a number or null"},"id":null}"#)
    }
}
