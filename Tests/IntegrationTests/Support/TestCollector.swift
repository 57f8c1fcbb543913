import EventTransport
import EvhttpTestServer
import JSONRPC
import Synchronization
import Tracing

/// An OTLP/HTTP trace receiver for tests: a plain (or TLS) HTTP listener
/// that keeps every export it receives and answers as told (accept,
/// refuse with a status, or never answer). Its spans are decoded from
/// protobuf by the wire format's rules and opentelemetry-proto's field
/// numbers (``ProtobufMessage``), or from OTLP/JSON.
final class TestCollector: Sendable {
    enum Mode: Sendable, Equatable {
        case accept
        case refuse(Int)
        case hang
    }

    struct Export: Sendable {
        let path: String
        let headers: HTTPHeaders
        let body: [UInt8]
    }

    /// One span as received.
    struct Span: Sendable {
        var traceID: String
        var spanID: String
        var parentSpanID: String
        var name: String
        var kind: Int
        var attributes: [String: String]
        var links: [(traceID: String, spanID: String)]
        var statusCode: Int
        var resource: [String: String]
    }

    private let group: EventLoopGroup
    private let server: EvhttpServer
    /// What the handler and the test share.
    private final class Recorded: Sendable {
        let state = Mutex<(mode: Mode, exports: [Export])>((.accept, []))
    }

    private let recorded = Recorded()
    let port: Int

    init(tls: TLSServerContext? = nil) throws {
        let group = try EventLoopGroup(count: 1, namePrefix: "test-collector")
        self.group = group
        let recorded = self.recorded
        server = EvhttpServer(
            group: group,
            configuration: EvhttpServerConfiguration(host: "127.0.0.1", port: 0, maxBodyBytes: 8 << 20, tls: tls),
            handler: { request, responder in
                let mode = recorded.state.withLock { state in
                    state.exports.append(Export(path: request.path, headers: request.headers, body: request.body))
                    return state.mode
                }
                switch mode {
                case .accept: responder.send(HTTPResponse(status: 200, headers: ["Content-Type": "application/x-protobuf"], body: []))
                case .refuse(let status): responder.send(HTTPResponse(status: status, headers: ["Content-Type": "text/plain"], body: []))
                case .hang: responder.abandon()
                }
            }
        )
        port = try server.start()
    }

    func setMode(_ mode: Mode) { recorded.state.withLock { $0.mode = mode } }

    var exports: [Export] { recorded.state.withLock { $0.exports } }

    var endpoint: String { "http://127.0.0.1:\(port)" }

    /// Every span of every export so far.
    var spans: [Span] {
        exports.flatMap { export in
            export.headers["Content-Type"] == "application/json" ? Self.decodeJSON(export.body) : Self.decodeProtobuf(export.body)
        }
    }

    /// Waits (polling, with a limit) until `condition` holds for the spans.
    func waitForSpans(_ what: String, _ condition: @escaping @Sendable ([Span]) -> Bool) async throws -> [Span] {
        try await waitForEvent(what) { condition(self.spans) }
        return spans
    }

    func stop() {
        server.beginDraining()
        server.stop()
        group.shutdown()
    }

    static func decodeProtobuf(_ body: [UInt8]) -> [Span] {
        guard let request = ProtobufMessage(body) else { return [] }
        var spans: [Span] = []
        for resourceSpans in request.messages(1) {
            let resource = attributes(resourceSpans.message(1)?.messages(1) ?? [])
            for scopeSpans in resourceSpans.messages(2) {
                for span in scopeSpans.messages(2) {
                    spans.append(Span(
                        traceID: span.bytes(1).map(hexString) ?? "", spanID: span.bytes(2).map(hexString) ?? "",
                        parentSpanID: span.bytes(4).map(hexString) ?? "", name: span.string(5) ?? "",
                        kind: Int(span.integer(6) ?? 0), attributes: attributes(span.messages(9)),
                        links: span.messages(13).map { (hexString($0.bytes(1) ?? []), hexString($0.bytes(2) ?? [])) },
                        statusCode: Int(span.message(15)?.integer(3) ?? 0), resource: resource
                    ))
                }
            }
        }
        return spans
    }

    /// KeyValues as text: a string value, or an int value's decimal.
    private static func attributes(_ keyValues: [ProtobufMessage]) -> [String: String] {
        var result: [String: String] = [:]
        for keyValue in keyValues {
            guard let key = keyValue.string(1), let value = keyValue.message(2) else { continue }
            result[key] = value.string(1) ?? value.integer(3).map { String(Int64(bitPattern: $0)) } ?? ""
        }
        return result
    }

    static func decodeJSON(_ body: [UInt8]) -> [Span] {
        guard let document = try? JSONParser.parse(body) else { return [] }
        func attributes(_ value: JSONValue?) -> [String: String] {
            var result: [String: String] = [:]
            for item in value?.arrayValue ?? [] {
                guard let key = item.objectValue?["key"]?.stringValue, let value = item.objectValue?["value"]?.objectValue else { continue }
                result[key] = value["stringValue"]?.stringValue ?? value["intValue"]?.stringValue ?? ""
            }
            return result
        }
        var spans: [Span] = []
        for resourceSpans in document.objectValue?["resourceSpans"]?.arrayValue ?? [] {
            let resource = attributes(resourceSpans.objectValue?["resource"]?.objectValue?["attributes"])
            for scopeSpans in resourceSpans.objectValue?["scopeSpans"]?.arrayValue ?? [] {
                for value in scopeSpans.objectValue?["spans"]?.arrayValue ?? [] {
                    guard let span = value.objectValue else { continue }
                    spans.append(Span(
                        traceID: span["traceId"]?.stringValue ?? "", spanID: span["spanId"]?.stringValue ?? "",
                        parentSpanID: span["parentSpanId"]?.stringValue ?? "", name: span["name"]?.stringValue ?? "",
                        kind: span["kind"]?.intValue ?? 0, attributes: attributes(span["attributes"]),
                        links: (span["links"]?.arrayValue ?? []).map { ($0.objectValue?["traceId"]?.stringValue ?? "", $0.objectValue?["spanId"]?.stringValue ?? "") },
                        statusCode: span["status"]?.objectValue?["code"]?.intValue ?? 0, resource: resource
                    ))
                }
            }
        }
        return spans
    }
}
