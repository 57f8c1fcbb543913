import JSONRPC
import Synchronization
import Testing

/// The observer hears of every request once: calls, notifications, unknown
/// methods, invalid elements and refused bodies.
@Suite struct ObserverTests {
    final class Records: Sendable {
        let items = Mutex<[(String?, Int?)]>([])
        func add(_ record: JSONRPCCallRecord) {
            let code: Int? = if case .failure(let error) = record.outcome { error.code } else { nil }
            items.withLock { $0.append((record.method, code)) }
        }
        var sorted: [String] {
            items.withLock { $0.map { "\($0.0 ?? "-"):\($0.1.map(String.init) ?? "ok")" }.sorted() }
        }
    }

    func server(_ records: Records) -> JSONRPCServer<Void> {
        JSONRPCServer<Void>(
            maxBatchSize: 3,
            methods: ["echo": .answering { request, _ in .success(request.params?.jsonValue ?? .null) }],
            observer: { record, _ in records.add(record) }
        )
    }

    @Test func everyBatchElementIsObservedOnce() async {
        let records = Records()
        _ = await server(records).handle(
            body: Array(#"[{"jsonrpc":"2.0","id":1,"method":"echo"},{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","id":2,"method":"nope"}]"#.utf8),
            context: ()
        )
        #expect(records.sorted == ["echo:ok", "echo:ok", "nope:-32601"])
    }

    @Test func refusedBodiesAreObservedWithoutAMethod() async {
        let records = Records()
        let server = server(records)
        _ = await server.handle(body: Array("{".utf8), context: ())
        _ = await server.handle(body: Array("[]".utf8), context: ())
        _ = await server.handle(body: Array("[1,2,3,4]".utf8), context: ())
        _ = await server.handle(body: Array(#"{"jsonrpc":"1.0","id":1,"method":"echo"}"#.utf8), context: ())
        #expect(records.sorted == ["-:-32600", "-:-32600", "-:-32600", "-:-32700"])
    }
}
