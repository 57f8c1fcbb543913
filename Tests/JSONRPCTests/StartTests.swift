import JSONRPC
import Synchronization
import Testing

/// `start(body:context:)`: what is answered at once, what is answered
/// later by callback, what is left as a batch to answer when its turn
/// comes, and that each gives its reply and a single observation per
/// request.
@Suite struct StartTests {
    final class Observations: Sendable {
        let records = Mutex<[String]>([])
        func add(_ record: JSONRPCCallRecord) {
            records.withLock { $0.append(record.method ?? "-") }
        }
        var count: Int { records.withLock { $0.count } }
    }

    /// Holds the callback of a deferred `echo` until the test answers it.
    final class HeldAnswer: Sendable {
        let answer = Mutex<(@Sendable (Result<JSONValue, JSONRPCError>) -> Void)?>(nil)
        func answer(_ outcome: Result<JSONValue, JSONRPCError>) {
            let held = answer.withLock { held in
                defer { held = nil }
                return held
            }
            held?(outcome)
        }
    }

    /// `echo` answers at once when its param is `"now"`, and by callback
    /// when it is `"callback"` (held until the test answers).
    static func server(_ observations: Observations, held: HeldAnswer = HeldAnswer()) -> JSONRPCServer<String> {
        JSONRPCServer<String>(
            maxBatchSize: 10,
            methods: ["echo": JSONRPCMethod { request, _ in
                guard case .array(let values)? = request.params, values.first == .string("callback") else {
                    return .answer(.success(.string("now")))
                }
                return .later { answer in held.answer.withLock { $0 = answer } }
            }],
            observer: { record, _ in observations.add(record) }
        )
    }

    static func text(_ reply: JSONRPCReply) -> String? {
        if case .json(let bytes) = reply { return String(decoding: bytes, as: UTF8.self) }
        return nil
    }

    @Test(arguments: [
        (#"{"jsonrpc":"2.0","method":"echo","params":["now"],"id":1}"#, #"{"jsonrpc":"2.0","result":"now","id":1}"#),
        (#"{"jsonrpc":"2.0","method":"nope","id":2}"#, #"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: nope"},"id":2}"#),
        (#"{"jsonrpc":"1.0","method":"echo","id":3}"#, #"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: \"jsonrpc\" must be exactly \"2.0\""},"id":3}"#),
        ("{", nil),
    ])
    func answeredAtOnce(body: String, reply: String?) {
        let observations = Observations()
        guard case .answered(let answer) = Self.server(observations).start(body: Array(body.utf8), context: "") else {
            Issue.record("\(body) was not answered at once")
            return
        }
        if let reply { #expect(Self.text(answer) == reply) }
        #expect(observations.count == 1)
    }

    @Test func aNotificationAnsweredAtOnceHasNoContent() {
        let observations = Observations()
        let start = Self.server(observations).start(body: Array(#"{"jsonrpc":"2.0","method":"echo","params":["now"]}"#.utf8), context: "")
        guard case .answered(.noContent) = start else {
            Issue.record("expected no content at once, got \(start)")
            return
        }
        #expect(observations.count == 1)
    }

    /// A batch is left to answer (after its turn): nothing runs, nothing is
    /// observed, until ``JSONRPCServer/PendingBatch/answer(_:)``.
    @Test(arguments: [
        (#"[{"jsonrpc":"2.0","method":"echo","params":["now"],"id":1}]"#, #"[{"jsonrpc":"2.0","result":"now","id":1}]"#),
        (#"[{"jsonrpc":"2.0","method":"echo","params":["now"],"id":1},{"jsonrpc":"2.0","method":"nope","id":2}]"#, #"[{"jsonrpc":"2.0","result":"now","id":1},{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: nope"},"id":2}]"#),
    ])
    func aBatchIsLeftToAnswerAndObservedOncePerElement(body: String, reply: String) {
        let observations = Observations()
        guard case .batch(let batch) = Self.server(observations).start(body: Array(body.utf8), context: "") else {
            Issue.record("\(body) was answered at once")
            return
        }
        #expect(observations.count == 0)
        let replies = Mutex<[String?]>([])
        batch.answer { answer in replies.withLock { $0.append(Self.text(answer)) } }
        #expect(replies.withLock { $0 } == [reply])
        #expect(observations.count == batch.elementCount)
    }

    /// An empty batch, or one over the limit, is refused at once: it never
    /// waits for a turn.
    @Test(arguments: ["[]", " [ ] ", "[1,2,3,4,5,6,7,8,9,10,11]"])
    func aBatchRefusedAsAWholeIsAnsweredAtOnce(body: String) {
        let observations = Observations()
        guard case .answered(.json) = Self.server(observations).start(body: Array(body.utf8), context: "") else {
            Issue.record("\(body) was not refused at once")
            return
        }
        #expect(observations.count == 1)
    }

    /// A batch's elements answered by callback are gathered with the others,
    /// in batch order, once the last callback came.
    @Test func aBatchWaitsForItsCallbackElementsAndKeepsItsOrder() {
        let observations = Observations()
        let held = HeldAnswer()
        let body = #"[{"jsonrpc":"2.0","method":"echo","params":["callback"],"id":"c"},{"jsonrpc":"2.0","method":"echo","params":["now"],"id":"n"}]"#
        guard case .batch(let batch) = Self.server(observations, held: held).start(body: Array(body.utf8), context: "") else {
            Issue.record("a batch must be left to answer")
            return
        }
        let replies = Mutex<[String?]>([])
        batch.answer { answer in replies.withLock { $0.append(Self.text(answer)) } }
        #expect(replies.withLock { $0 }.isEmpty)
        #expect(observations.count == 1) // the element that answered now
        held.answer(.success(.string("called back")))
        #expect(replies.withLock { $0 } == [#"[{"jsonrpc":"2.0","result":"called back","id":"c"},{"jsonrpc":"2.0","result":"now","id":"n"}]"#])
        #expect(observations.count == 2)
    }

    @Test func aDeferredCallIsAnsweredWhenItsMethodCallsBackAndObservedOnce() {
        let observations = Observations()
        let held = HeldAnswer()
        let body = #"{"jsonrpc":"2.0","method":"echo","params":["callback"],"id":"c"}"#
        guard case .deferred(let call) = Self.server(observations, held: held).start(body: Array(body.utf8), context: "") else {
            Issue.record("\(body) was not deferred")
            return
        }
        let replies = Mutex<[String?]>([])
        call.begin { reply in replies.withLock { $0.append(Self.text(reply)) } }
        #expect(replies.withLock { $0 }.isEmpty)
        #expect(observations.count == 0)
        held.answer(.failure(.invalidParams("productIdentifiers is required")))
        #expect(replies.withLock { $0 } == [#"{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: productIdentifiers is required"},"id":"c"}"#])
        #expect(observations.count == 1)
    }

    @Test func aDeferredNotificationHasNoContent() {
        let observations = Observations()
        let held = HeldAnswer()
        let body = #"{"jsonrpc":"2.0","method":"echo","params":["callback"]}"#
        guard case .deferred(let call) = Self.server(observations, held: held).start(body: Array(body.utf8), context: "") else {
            Issue.record("\(body) was not deferred")
            return
        }
        let replies = Mutex<[JSONRPCReply]>([])
        call.begin { reply in replies.withLock { $0.append(reply) } }
        held.answer(.success(.string("done")))
        guard case [.noContent] = replies.withLock({ $0 }) else {
            Issue.record("expected one reply without content, got \(replies.withLock { $0 })")
            return
        }
        #expect(observations.count == 1)
    }

    @Test func handleAnswersADeferredCallWhenItsMethodCallsBack() {
        let held = HeldAnswer()
        let server = Self.server(Observations(), held: held)
        let replies = Mutex<[String?]>([])
        server.handle(body: Array(#"{"jsonrpc":"2.0","method":"echo","params":["callback"],"id":7}"#.utf8), context: "") { reply in
            replies.withLock { $0.append(Self.text(reply)) }
        }
        #expect(replies.withLock { $0 }.isEmpty)
        held.answer(.success(.string("called back")))
        #expect(replies.withLock { $0 } == [#"{"jsonrpc":"2.0","result":"called back","id":7}"#])
    }
}
