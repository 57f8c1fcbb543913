import JSONRPC
import Synchronization
import Testing

/// `start(body:context:)`: what is answered without a task, what is left
/// to finish in one, and that both give the same reply and the same
/// single observation.
@Suite struct ImmediateStartTests {
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

    /// `echo` answers at once when its param is `"now"`, by callback when it
    /// is `"callback"` (held until the test answers), and otherwise only as
    /// an async method.
    static func server(_ observations: Observations, held: HeldAnswer = HeldAnswer()) -> JSONRPCServer<String> {
        JSONRPCServer<String>(
            maxBatchSize: 10,
            methods: ["echo": { request, _ in .success(.string("later")) }],
            immediateMethods: ["echo": { request, _ in
                guard case .array(let values)? = request.params else { return nil }
                switch values.first {
                case .string("now"): return .answer(.success(.string("now")))
                case .string("callback"): return .later { answer in held.answer.withLock { $0 = answer } }
                default: return nil
                }
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
    func answeredWithoutATask(body: String, reply: String?) {
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

    @Test(arguments: [
        (#"{"jsonrpc":"2.0","method":"echo","params":["wait"],"id":1}"#, #"{"jsonrpc":"2.0","result":"later","id":1}"#),
        // A batch element runs as the method's immediate form when it has one.
        (#"[{"jsonrpc":"2.0","method":"echo","params":["now"],"id":1}]"#, #"[{"jsonrpc":"2.0","result":"now","id":1}]"#),
        (#"[{"jsonrpc":"2.0","method":"echo","params":["wait"],"id":1}]"#, #"[{"jsonrpc":"2.0","result":"later","id":1}]"#),
    ])
    func leftToATaskAndObservedOnce(body: String, reply: String) async {
        let observations = Observations()
        guard case .pending(let pending) = Self.server(observations).start(body: Array(body.utf8), context: "") else {
            Issue.record("\(body) was answered at once")
            return
        }
        #expect(observations.count == 0) // nothing counted for the immediate try
        #expect(Self.text(await pending.finish()) == reply)
        #expect(observations.count == 1)
    }

    /// A batch's elements answered by callback are gathered with the others,
    /// in batch order, once the last callback came.
    @Test func aBatchWaitsForItsCallbackElementsAndKeepsItsOrder() async {
        let observations = Observations()
        let held = HeldAnswer()
        let body = #"[{"jsonrpc":"2.0","method":"echo","params":["callback"],"id":"c"},{"jsonrpc":"2.0","method":"echo","params":["wait"],"id":"w"},{"jsonrpc":"2.0","method":"echo","params":["now"],"id":"n"}]"#
        guard case .pending(let pending) = Self.server(observations, held: held).start(body: Array(body.utf8), context: "") else {
            Issue.record("a batch must be left to a task")
            return
        }
        let finished = Task { Self.text(await pending.finish()) }
        let deadline = ContinuousClock.now + .seconds(20)
        // Polls for the event (the method handed over its callback), 20 s at most: the sleep is only the poll's interval.
        while held.answer.withLock({ $0 == nil }), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        guard held.answer.withLock({ $0 != nil }) else {
            Issue.record("the callback element never handed over its callback")
            return
        }
        held.answer(.success(.string("called back")))
        #expect(await finished.value == #"[{"jsonrpc":"2.0","result":"called back","id":"c"},{"jsonrpc":"2.0","result":"later","id":"w"},{"jsonrpc":"2.0","result":"now","id":"n"}]"#)
        #expect(observations.count == 3)
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

    @Test func handleWaitsForADeferredAnswer() async {
        let held = HeldAnswer()
        let server = Self.server(Observations(), held: held)
        async let reply = server.handle(body: Array(#"{"jsonrpc":"2.0","method":"echo","params":["callback"],"id":7}"#.utf8), context: "")
        while held.answer.withLock({ $0 == nil }) { await Task.yield() }
        held.answer(.success(.string("called back")))
        #expect(Self.text(await reply) == #"{"jsonrpc":"2.0","result":"called back","id":7}"#)
    }
}
