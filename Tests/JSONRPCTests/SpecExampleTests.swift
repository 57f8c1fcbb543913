import JSONRPC
import Testing

/// Every example of section 7 of the JSON-RPC 2.0 specification, with the
/// request bodies exactly as the specification writes them. Replies differ
/// from the specification's only where it leaves the choice to the server:
/// no spaces, and messages that say what was wrong.
@Suite("JSON-RPC 2.0 specification, section 7")
struct SpecExampleTests {
    let methods = SpecMethods()

    private func reply(_ body: String) async -> WireText? {
        await methods.server().replyText(to: body, context: "req-1")
    }

    @Test("rpc call with positional parameters")
    func positionalParameters() async {
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}"#)
            == #"{"jsonrpc":"2.0","result":19,"id":1}"#)
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}"#)
            == #"{"jsonrpc":"2.0","result":-19,"id":2}"#)
    }

    @Test("rpc call with named parameters")
    func namedParameters() async {
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}"#)
            == #"{"jsonrpc":"2.0","result":19,"id":3}"#)
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}"#)
            == #"{"jsonrpc":"2.0","result":19,"id":4}"#)
    }

    @Test("a notification gets no response, known method or not")
    func notification() async {
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#) == nil)
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "foobar"}"#) == nil)
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}"#) == nil)
        // The method of a notification still runs; only its answer is dropped.
        #expect(methods.recorder.calls == ["notify_hello"])
    }

    @Test("rpc call of non-existent method")
    func nonExistentMethod() async {
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#)
            == #"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: foobar"},"id":"1"}"#)
    }

    @Test("rpc call with invalid JSON")
    func invalidJSON() async {
        #expect(await reply(#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#)
            == #"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: unexpected character 'p' at byte 39, expected ',' or '}'"},"id":null}"#)
    }

    @Test("rpc call with invalid Request object")
    func invalidRequestObject() async {
        #expect(await reply(#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#)
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: \"method\" must be a string"},"id":null}"#)
    }

    @Test("rpc call Batch, invalid JSON")
    func batchInvalidJSON() async {
        let body = """
            [
              {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
              {"jsonrpc": "2.0", "method"
            ]
            """
        #expect(await reply(body)
            == #"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: unexpected character ']' at byte 101, expected ':'"},"id":null}"#)
        // Nothing of a body that does not parse may run.
        #expect(methods.recorder.calls.isEmpty)
    }

    @Test("rpc call with an empty Array")
    func emptyArray() async {
        #expect(await reply("[]")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: the batch is empty"},"id":null}"#)
    }

    @Test("rpc call with an invalid Batch (but not empty)")
    func invalidBatchOfOne() async {
        #expect(await reply("[1]")
            == #"[{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: expected a request object"},"id":null}]"#)
    }

    @Test("rpc call with invalid Batch")
    func invalidBatch() async {
        let one = #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: expected a request object"},"id":null}"#
        #expect(await reply("[1,2,3]") == "[\(one),\(one),\(one)]")
    }

    @Test("rpc call Batch")
    func mixedBatch() async {
        let body = """
            [
                    {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
                    {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
                    {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
                    {"foo": "boo"},
                    {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
                    {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
                ]
            """
        let expected = [
            #"{"jsonrpc":"2.0","result":7,"id":"1"}"#,
            #"{"jsonrpc":"2.0","result":19,"id":"2"}"#,
            #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: \"jsonrpc\" must be exactly \"2.0\""},"id":null}"#,
            #"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: foo.get"},"id":"5"}"#,
            #"{"jsonrpc":"2.0","result":["hello",5],"id":"9"}"#,
        ]
        #expect(await reply(body) == WireText("[" + expected.joined(separator: ",") + "]"))
        // Elements run concurrently, so only the set of calls is fixed.
        #expect(methods.recorder.calls.sorted() == ["get_data", "notify_hello", "subtract", "sum"])
    }

    @Test("rpc call Batch (all notifications)")
    func allNotificationsBatch() async {
        let body = """
            [
                    {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
                    {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
                ]
            """
        #expect(await reply(body) == nil)
        #expect(methods.recorder.calls.sorted() == ["notify_hello", "notify_sum"])
    }
}
