import JSONRPC
import Synchronization
import Testing

/// Dispatch rules beyond the specification's examples: limits, notifications,
/// bodies that are not requests, context, and batch elements that answer
/// later.
@Suite("JSON-RPC server")
struct ServerTests {
    let methods = SpecMethods()

    @Test("params names that differ in bytes but are canonically equivalent reach the method as two members")
    func canonicallyEquivalentParamNames() async {
        let server = JSONRPCServer<String>(maxBatchSize: 1, methods: [
            "echo": .answering { request, _ in .success(request.params?.jsonValue ?? .null) },
        ])
        let params = #"{"\#u{E9}":1,"e\#u{301}":2}"#
        #expect(await server.replyText(to: #"{"jsonrpc":"2.0","method":"echo","params":\#(params),"id":1}"#, context: "")
            == "{\"jsonrpc\":\"2.0\",\"result\":\(params),\"id\":1}")
    }

    @Test("a batch over the limit is one error object that gives the limit")
    func batchLimit() async {
        let server = methods.server(maxBatchSize: 2)
        let call = #"{"jsonrpc":"2.0","method":"get_data","id":1}"#
        #expect(await server.replyText(to: "[\(call),\(call),\(call)]", context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: batch of 3 requests exceeds the limit of 2"},"id":null}"#)
        // Nothing of a refused batch runs.
        #expect(methods.recorder.calls.isEmpty)

        let result = #"{"jsonrpc":"2.0","result":["hello",5],"id":1}"#
        #expect(await server.replyText(to: "[\(call),\(call)]", context: "") == "[\(result),\(result)]")
    }

    @Test("an answer over the answer limit is one error object with the call's id (null for a batch) that gives the limit")
    func answerLimit() async {
        let server = JSONRPCServer<String>(maxBatchSize: 10, methods: [
            "echo": .answering { request, _ in .success(request.params?.jsonValue ?? .null) },
        ], maxAnswerBytes: 73)
        // {"jsonrpc":"2.0","result":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"id":7}: exactly 73 bytes.
        let fits = #"{"jsonrpc":"2.0","method":"echo","params":["\#(String(repeating: "a", count: 35))"],"id":7}"#
        #expect(await server.replyText(to: fits, context: "")
            == #"{"jsonrpc":"2.0","result":["\#(String(repeating: "a", count: 35))"],"id":7}"#)
        let over = #"{"jsonrpc":"2.0","method":"echo","params":["\#(String(repeating: "a", count: 36))"],"id":7}"#
        #expect(await server.replyText(to: over, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: the answer would be 74 bytes, over the limit of 73; ask for fewer identifiers, or send fewer requests in one batch"},"id":7}"#)
        let small = #"{"jsonrpc":"2.0","method":"echo","params":["a"],"id":1}"#
        #expect(await server.replyText(to: "[\(small),\(small),\(small)]", context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: the answer would be 121 bytes, over the limit of 73; ask for fewer identifiers, or send fewer requests in one batch"},"id":null}"#)
    }

    @Test("the batch limit counts elements, not requests answered")
    func batchLimitCountsNotifications() async {
        let server = methods.server(maxBatchSize: 1)
        #expect(await server.replyText(to: #"[{"jsonrpc":"2.0","method":"notify_hello"},1]"#, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: batch of 2 requests exceeds the limit of 1"},"id":null}"#)
    }

    @Test("a single notification answers no content even when its method fails or is unknown", arguments: [
        #"{"jsonrpc":"2.0","method":"nope"}"#,
        #"{"jsonrpc":"2.0","method":"fail","params":[1]}"#,
        #"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":"x"}}"#,
    ])
    func notificationFailing(body: String) async {
        #expect(await methods.server().replyText(to: body, context: "") == nil)
    }

    @Test("an invalid request without an id is answered under null, not treated as a notification")
    func invalidWithoutID() async {
        #expect(await methods.server().replyText(to: #"{"jsonrpc":"2.0","method":"sum","params":7}"#, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: \"params\" must be an object or an array"},"id":null}"#)
        #expect(methods.recorder.calls.isEmpty)
    }

    @Test("JSON that is neither an object nor an array", arguments: ["1", "null", "true", #""{}""#, " -0 "])
    func notARequest(body: String) async {
        #expect(await methods.server().replyText(to: body, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: expected a request object or a batch array"},"id":null}"#)
    }

    @Test("bodies that are not JSON", arguments: [
        ("", "unexpected end of input at byte 0, expected a value"),
        ("  \n", "unexpected end of input at byte 3, expected a value"),
        (#"{"jsonrpc":"2.0","method":"m","id":1,}"#, "unexpected character '}' at byte 37, expected a member name in double quotes"),
        (#"{"jsonrpc":"2.0","method":"m","id":01}"#, "leading zeros are not allowed in numbers at byte 35"),
        (#"{"jsonrpc":"2.0","method":"m","id":1} {}"#, "unexpected character '{' at byte 38 after the JSON value"),
    ])
    func parseErrors(body: String, detail: String) async {
        #expect(await methods.server().replyText(to: body, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: \#(detail)"},"id":null}"#)
    }

    @Test("invalid UTF-8 in a body is a parse error")
    func invalidUTF8Body() async {
        let body = Array(#"{"jsonrpc":"2.0","method":"m"#.utf8) + [0xFF] + Array(#"","id":1}"#.utf8)
        #expect(await methods.server().handle(body: body, context: "") == .json(Array(
            #"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: invalid UTF-8 at byte 28"},"id":null}"#.utf8
        )))
    }

    @Test("the parser limits of the server apply to bodies")
    func depthLimit() async {
        let server = methods.server(limits: .init(maxDepth: 2))
        #expect(await server.replyText(to: #"{"jsonrpc":"2.0","method":"sum","params":[1],"id":1}"#, context: "")
            == #"{"jsonrpc":"2.0","result":1,"id":1}"#)
        #expect(await server.replyText(to: #"{"jsonrpc":"2.0","method":"sum","params":[[1]],"id":1}"#, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: nesting deeper than 2 levels at byte 42"},"id":null}"#)
    }

    @Test("a batch element that is itself a batch is invalid; the batch goes on")
    func nestedBatch() async {
        let body = #"[[{"jsonrpc":"2.0","method":"get_data","id":1}],{"jsonrpc":"2.0","method":"notify_hello"},{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":2}]"#
        #expect(await methods.server().replyText(to: body, context: "") == """
            [{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: expected a request object"},"id":null},\
            {"jsonrpc":"2.0","result":3,"id":2}]
            """)
    }

    @Test("a method's error object passes through with its data")
    func methodError() async {
        #expect(await methods.server().replyText(to: #"{"jsonrpc":"2.0","method":"fail","id":"f"}"#, context: "")
            == #"{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: always","data":{"reason":"testing","retryable":false}},"id":"f"}"#)
    }

    @Test("every method of a body gets the transport's context")
    func context() async {
        let server = methods.server()
        #expect(await server.replyText(to: #"{"jsonrpc":"2.0","method":"context","id":1}"#, context: "req-42")
            == #"{"jsonrpc":"2.0","result":"req-42","id":1}"#)
        #expect(await server.replyText(to: #"[{"jsonrpc":"2.0","method":"context","id":1},{"jsonrpc":"2.0","method":"context","id":2}]"#, context: "req-43")
            == #"[{"jsonrpc":"2.0","result":"req-43","id":1},{"jsonrpc":"2.0","result":"req-43","id":2}]"#)
    }

    @Test("respond(to:) answers one element, nil for a notification")
    func respondToElement() async throws {
        let server = methods.server()
        func respond(_ element: JSONValue) -> JSONRPCResponse?? {
            let answer = Mutex<JSONRPCResponse??>(nil)
            server.respond(to: element, context: "") { response in answer.withLock { $0 = .some(response) } }
            return answer.withLock { $0 }
        }
        let call = try JSONParser.parse(#"{"jsonrpc":"2.0","method":"sum","params":[2,3],"id":"s"}"#.utf8)
        #expect(respond(call) == .some(JSONRPCResponse(id: .string("s"), outcome: .success(5))))
        let notification = try JSONParser.parse(#"{"jsonrpc":"2.0","method":"sum","params":[2,3]}"#.utf8)
        #expect(respond(notification) == .some(nil))
        #expect(respond(1) == .some(JSONRPCResponse(id: .null, outcome: .failure(.invalidRequest("expected a request object")))))
    }

    /// The callbacks of methods that answer later, held until the test
    /// calls them back.
    final class HeldAnswers: Sendable {
        private let answers = Mutex<[String: @Sendable (Result<JSONValue, JSONRPCError>) -> Void]>([:])
        func hold(_ name: String, _ answer: @escaping @Sendable (Result<JSONValue, JSONRPCError>) -> Void) {
            answers.withLock { $0[name] = answer }
        }
        var names: Set<String> { answers.withLock { Set($0.keys) } }
        /// When `other` is held too, answers both with their names.
        func meet(_ name: String, _ other: String) {
            guard names.contains(other) else { return }
            answer(other, .success(.string(other)))
            answer(name, .success(.string(name)))
        }
        /// Calls `name`'s answer back with `outcome`; false when none is held.
        @discardableResult
        func answer(_ name: String, _ outcome: Result<JSONValue, JSONRPCError>) -> Bool {
            guard let answer = answers.withLock({ $0.removeValue(forKey: name) }) else { return false }
            answer(outcome)
            return true
        }
    }

    @Test("batch elements are all started at once: two methods that each answer only once the other has started both answer")
    func concurrentElements() {
        // Started one after the other, each waiting for the one before to
        // answer, the first would never answer and the batch never would.
        let held = HeldAnswers()
        let server = JSONRPCServer<Void>(maxBatchSize: 10, methods: [
            "left": JSONRPCMethod { _, _ in
                .later { answer in
                    held.hold("left", answer)
                    held.meet("left", "right")
                }
            },
            "right": JSONRPCMethod { _, _ in
                .later { answer in
                    held.hold("right", answer)
                    held.meet("right", "left")
                }
            },
        ])
        #expect(server.replyNow(to: #"[{"jsonrpc":"2.0","method":"left","id":1},{"jsonrpc":"2.0","method":"right","id":2}]"#, context: ())
            == .json(Array(#"[{"jsonrpc":"2.0","result":"left","id":1},{"jsonrpc":"2.0","result":"right","id":2}]"#.utf8)))
    }

    @Test("answers come back in batch order, not in the order the methods answer")
    func batchOrder() {
        let held = HeldAnswers()
        let server = JSONRPCServer<Void>(maxBatchSize: 10, methods: [
            "step": JSONRPCMethod { request, _ in
                guard let index = request.params.flatMap({ if case .array(let values) = $0 { values.first?.intValue } else { nil } }) else {
                    return .answer(.failure(.invalidParams("step takes [index]")))
                }
                return .later { answer in held.hold("\(index)", answer) }
            },
        ])
        let replies = Mutex<[JSONRPCReply]>([])
        let body = "[" + (0 ..< 4).map { #"{"jsonrpc":"2.0","method":"step","params":[\#($0)],"id":"e\#($0)"}"# }.joined(separator: ",") + "]"
        server.handle(body: Array(body.utf8), context: ()) { reply in replies.withLock { $0.append(reply) } }
        #expect(held.names == ["0", "1", "2", "3"])
        // The last element answers first; the reply waits for the first.
        for index in (0 ..< 4).reversed() {
            #expect(replies.withLock { $0 }.isEmpty)
            held.answer("\(index)", .success(.integer(index)))
        }
        let expected = "[" + (0 ..< 4).map { #"{"jsonrpc":"2.0","result":\#($0),"id":"e\#($0)"}"# }.joined(separator: ",") + "]"
        #expect(replies.withLock { $0 } == [.json(Array(expected.utf8))])
    }
}
