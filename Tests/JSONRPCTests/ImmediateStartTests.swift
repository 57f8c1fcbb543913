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

    /// `echo` answers at once when its param is `"now"`, and otherwise only
    /// as an async method.
    static func server(_ observations: Observations) -> JSONRPCServer<String> {
        JSONRPCServer<String>(
            maxBatchSize: 10,
            methods: ["echo": { request, _ in .success(.string("later")) }],
            immediateMethods: ["echo": { request, _ in
                guard case .array(let values)? = request.params, values.first == .string("now") else { return nil }
                return .success(.string("now"))
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
        (#"[{"jsonrpc":"2.0","method":"echo","params":["now"],"id":1}]"#, #"[{"jsonrpc":"2.0","result":"later","id":1}]"#),
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
}
