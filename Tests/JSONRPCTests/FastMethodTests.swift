@testable import JSONRPC
import Testing

/// A method's fast form answers only what the tree's way answers: the same
/// reply bytes and the same observer records for every body, whether the
/// envelope is read from bytes or not.
@Suite("Fast methods", .serialized)
struct FastMethodTests {
    /// Records what the observer saw.
    final class Records: @unchecked Sendable {
        var lines: [String] = []
    }

    /// `echo` answers its params as the tree has them, re-serialized; its
    /// fast form answers the same from the bytes, and gives up on params
    /// holding `"giveUp"`.
    static func server(fast: Bool, records: Records) -> JSONRPCServer<Int> {
        let call: JSONRPCMethod<Int>.Call = { request, _ in
            switch request.params {
            case .object(let members)?: .answer(.success(.string(String(decoding: JSONValue.object(members).serialized(), as: UTF8.self))))
            default: .answer(.failure(.invalidParams("params must be an object")))
            }
        }
        let fastForm: JSONRPCMethod<Int>.Fast = { bytes, _ in
            guard let value = try? JSONParser.parse(Array(bytes)), case .object(let members) = value,
                  members["giveUp"] == nil else { return nil }
            return .answer(.success(.string(String(decoding: JSONValue.object(members).serialized(), as: UTF8.self))))
        }
        return JSONRPCServer<Int>(
            maxBatchSize: 4,
            methods: ["echo": JSONRPCMethod(call, fast: fast ? fastForm : nil)],
            observer: { record, _ in records.lines.append("\(record.method ?? "-") \(record.isNotification) \(record.outcome)") }
        )
    }

    static let bodies: [String] = [
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}"#,
        #"{"params":{"a":[1,{"b":null}]},"method":"echo","id":"x","jsonrpc":"2.0"}"#,
        #" { "jsonrpc" : "2.0" , "id" : -1.5e3 , "method" : "echo" , "params" : { } } "#,
        #"{"jsonrpc":"2.0","id":"\u0041\n","method":"ech\u006f","params":{"s":"\ud83d\ude00"}}"#,
        #"{"jsonrpc":"2.0","id":null,"method":"echo","params":{"a":1}}"#,
        #"{"jsonrpc":"2.0","method":"echo","params":{"a":1}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"giveUp":true}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo"}"#,
        #"{"jsonrpc":"2.0","id":1,"id":2,"method":"echo","params":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":{},"extra":0}"#,
        #"{"jsonrpc":"1.0","id":1,"method":"echo","params":{}}"#,
        #"{"jsonrpc":"2.0","id":true,"method":"echo","params":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"other","params":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":{}} x"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":}}"#,
        #"[{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}]"#,
        "",
    ]

    static func answer(_ body: String, fast: Bool) async -> (String, [String]) {
        let records = Records()
        let reply = await server(fast: fast, records: records).handle(body: Array(body.utf8), context: 0)
        let text: String = switch reply {
        case .noContent: "no content"
        case .json(let bytes): String(decoding: bytes, as: UTF8.self)
        }
        return (text, records.lines)
    }

    @Test(arguments: bodies)
    func theFastFormAnswersAsTheTreesWay(_ body: String) async {
        let fast = await Self.answer(body, fast: true)
        let tree = await Self.answer(body, fast: false)
        #expect(fast.0 == tree.0)
        #expect(fast.1 == tree.1)
    }

    @Test func theEnvelopeIsReadOnlyWhenItIsTheUsualOne() {
        func scan(_ body: String) -> JSONRPCEnvelope? {
            Array(body.utf8).withUnsafeBufferPointer { JSONRPCEnvelope.scan($0, limits: .init()) }
        }
        let read = scan(Self.bodies[2])
        #expect(read?.id == .number("-1.5e3"))
        #expect(read?.method == "echo")
        let usual = Array(Self.bodies[1].utf8)
        if let envelope = scan(Self.bodies[1]) {
            #expect(String(decoding: usual[envelope.params], as: UTF8.self) == #"{"a":[1,{"b":null}]}"#)
            #expect(envelope.id == .string("x"))
        } else {
            Issue.record("the usual envelope was not read")
        }
        for body in Self.bodies[4...] { #expect(scan(body) == nil || body.contains("giveUp") || body.contains("other"), "\(body)") }
    }
}
