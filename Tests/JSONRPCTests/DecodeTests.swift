import JSONRPC
import Testing

/// `JSONRPCServer.decode`: one element judged on its own.
@Suite("Request validation")
struct DecodeTests {
    private func decode(_ text: String) throws -> Result<JSONRPCRequest, JSONRPCFailedRequest> {
        JSONRPCServer<Void>.decode(try JSONParser.parse(text.utf8))
    }

    private func failure(_ id: JSONRPCID?, _ detail: String) -> Result<JSONRPCRequest, JSONRPCFailedRequest> {
        .failure(JSONRPCFailedRequest(id: id, error: .invalidRequest(detail)))
    }

    @Test("a notification has no id; an explicit null id is a call")
    func notificationVersusNullID() throws {
        let notification = try decode(#"{"jsonrpc":"2.0","method":"m"}"#)
        #expect(notification == .success(JSONRPCRequest(id: nil, method: "m", params: nil)))
        #expect((try? notification.get())?.isNotification == true)

        let nullID = try decode(#"{"jsonrpc":"2.0","method":"m","id":null}"#)
        #expect(nullID == .success(JSONRPCRequest(id: .null, method: "m", params: nil)))
        #expect((try? nullID.get())?.isNotification == false)
    }

    @Test("params by name and by position; numbers keep their text")
    func params() throws {
        #expect(try decode(#"{"jsonrpc":"2.0","method":"m","params":{"b":1.50,"a":[]},"id":"x"}"#)
            == .success(JSONRPCRequest(id: .string("x"), method: "m", params: .object(["b": .number("1.50"), "a": []]))))
        #expect(try decode(#"{"jsonrpc":"2.0","method":"m","params":[],"id":7}"#)
            == .success(JSONRPCRequest(id: .number("7"), method: "m", params: .array([]))))
    }

    @Test("members other than the four of the specification are ignored")
    func unknownMembers() throws {
        #expect(try decode(#"{"extra":{"deep":[1]},"jsonrpc":"2.0","method":"m","id":1,"result":null}"#)
            == .success(JSONRPCRequest(id: .number("1"), method: "m")))
    }

    @Test("a repeated member counts with its last value, like JSON.parse")
    func repeatedMembers() throws {
        #expect(try decode(#"{"jsonrpc":"1.0","method":"a","id":1,"jsonrpc":"2.0","id":2,"method":"b"}"#)
            == .success(JSONRPCRequest(id: .number("2"), method: "b")))
    }

    @Test("\"jsonrpc\" must be exactly the string 2.0", arguments: [
        #"{"method":"m","id":1}"#,
        #"{"jsonrpc":"1.0","method":"m","id":1}"#,
        #"{"jsonrpc":2.0,"method":"m","id":1}"#,
        #"{"jsonrpc":"2.0 ","method":"m","id":1}"#,
        #"{"jsonrpc":"2","method":"m","id":1}"#,
        #"{"jsonrpc":null,"method":"m","id":1}"#,
        #"{"JSONRPC":"2.0","method":"m","id":1}"#,
    ])
    func version(body: String) throws {
        #expect(try decode(body) == failure(.number("1"), #""jsonrpc" must be exactly "2.0""#))
    }

    @Test("\"method\" must be a string", arguments: [
        #"{"jsonrpc":"2.0","id":"a"}"#,
        #"{"jsonrpc":"2.0","method":1,"id":"a"}"#,
        #"{"jsonrpc":"2.0","method":null,"id":"a"}"#,
        #"{"jsonrpc":"2.0","method":["m"],"id":"a"}"#,
    ])
    func method(body: String) throws {
        #expect(try decode(body) == failure(.string("a"), #""method" must be a string"#))
    }

    @Test("\"params\" must be an object or an array", arguments: ["null", "1", #""a""#, "true"])
    func paramsType(params: String) throws {
        #expect(try decode(#"{"jsonrpc":"2.0","method":"m","params":\#(params),"id":null}"#)
            == failure(.null, #""params" must be an object or an array"#))
    }

    @Test("an invalid request without an id is still answered, under null")
    func invalidWithoutID() throws {
        #expect(try decode(#"{"jsonrpc":"2.0","params":"bar"}"#) == failure(nil, #""method" must be a string"#))
    }

    @Test("an id of the wrong type is the complaint, before anything else")
    func wrongID() throws {
        #expect(try decode(#"{"jsonrpc":"1.0","method":1,"id":true}"#)
            == failure(nil, #""id" must be a string, a number or null"#))
    }

    @Test("an element that is not an object", arguments: ["1", "null", #""req""#, "[]", #"[{"jsonrpc":"2.0","method":"m"}]"#])
    func notAnObject(body: String) throws {
        #expect(try decode(body) == failure(nil, "expected a request object"))
    }

    @Test("error objects: codes, messages and data")
    func errorObjects() {
        #expect(JSONRPCError.parseError("x").jsonValue.serializedString == #"{"code":-32700,"message":"Parse error: x"}"#)
        #expect(JSONRPCError.invalidRequest("x").jsonValue.serializedString == #"{"code":-32600,"message":"Invalid request: x"}"#)
        #expect(JSONRPCError.methodNotFound("a.b").jsonValue.serializedString == #"{"code":-32601,"message":"Method not found: a.b"}"#)
        // A long name is clipped to 64 characters and its size, not echoed whole.
        let long = String(repeating: "m", count: 60_000)
        #expect(JSONRPCError.methodNotFound(long).message == "Method not found: " + String(repeating: "m", count: 64) + "… (60000 bytes)")
        #expect(JSONRPCError.methodNotFound(String(repeating: "m", count: 64)).message == "Method not found: " + String(repeating: "m", count: 64))
        #expect(JSONRPCError.invalidParams("x", data: ["reason": "r"]).jsonValue.serializedString
            == #"{"code":-32602,"message":"Invalid params: x","data":{"reason":"r"}}"#)
        #expect(JSONRPCError.internalError("x").jsonValue.serializedString == #"{"code":-32603,"message":"Internal error: x"}"#)
        #expect(JSONRPCError(code: -32001, message: "m", data: .null).jsonValue.serializedString
            == #"{"code":-32001,"message":"m","data":null}"#)
    }
}
