import JSONRPC
import Testing
import Tracing

/// The OTLP encodings of a batch, read back: protobuf by the wire format's
/// rules and the field numbers of opentelemetry-proto, JSON by the parser.
@Suite("OTLP encoding")
struct OTLPEncoderTests {
    static let resource = OTLPResource(
        attributes: [SpanAttribute("service.name", "products-gateway"), SpanAttribute("service.version", "0.1.0")],
        scopeName: "products-gateway", scopeVersion: "0.1.0"
    )
    static let link = SpanContext(traceID: TraceID(high: 7, low: 8), spanID: SpanID(9), flags: .sampled)
    static let span = SpanData(
        context: SpanContext(traceID: TraceID(high: 0x4BF9_2F35_77B3_4DA6, low: 0xA3CE_929D_0E0E_4736), spanID: SpanID(0x00F0_67AA_0BA9_02B7), flags: .sampled),
        parentSpanID: SpanID(0x1122_3344_5566_7788), parentIsRemote: true, traceState: "congo=t61rcWkgMzE",
        name: "products.fetch", kind: .server, startUnixNanos: 1_700_000_000_000_000_000, endUnixNanos: 1_700_000_000_005_000_000,
        attributes: [SpanAttribute("rpc.system", "jsonrpc"), SpanAttribute("rpc.jsonrpc.error_code", -32001)],
        links: [link], status: .error(message: "upstream unreachable")
    )

    @Test("protobuf: every field where opentelemetry-proto puts it")
    func protobuf() throws {
        let request = try #require(ProtobufMessage(OTLPProtobufEncoder.encode([Self.span, Self.span], resource: Self.resource)))
        let resourceSpans = try #require(request.message(1))
        let resource = try #require(resourceSpans.message(1))
        let attributes = resource.messages(1)
        #expect(attributes.map { $0.string(1) } == ["service.name", "service.version"])
        #expect(attributes.first?.message(2)?.string(1) == "products-gateway")
        let scopeSpans = try #require(resourceSpans.message(2))
        #expect(scopeSpans.message(1)?.string(1) == "products-gateway")
        let spans = scopeSpans.messages(2)
        #expect(spans.count == 2)
        let span = try #require(spans.first)
        #expect(span.bytes(1).map(hexString) == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(span.bytes(2).map(hexString) == "00f067aa0ba902b7")
        #expect(span.string(3) == "congo=t61rcWkgMzE")
        #expect(span.bytes(4).map(hexString) == "1122334455667788")
        #expect(span.string(5) == "products.fetch")
        #expect(span.integer(6) == 2)
        #expect(span.all(7) == [.fixed64(1_700_000_000_000_000_000)])
        #expect(span.all(8) == [.fixed64(1_700_000_000_005_000_000)])
        let spanAttributes = span.messages(9)
        #expect(spanAttributes.map { $0.string(1) } == ["rpc.system", "rpc.jsonrpc.error_code"])
        #expect(spanAttributes[1].message(2)?.integer(3).map { Int64(bitPattern: $0) } == -32001)
        let link = try #require(span.message(13))
        #expect(link.bytes(1).map(hexString) == "00000000000000070000000000000008")
        #expect(link.bytes(2).map(hexString) == "0000000000000009")
        let status = try #require(span.message(15))
        #expect(status.integer(3) == 2)
        #expect(status.string(2) == "upstream unreachable")
        #expect(span.all(16) == [.fixed32(0x301)])
    }

    @Test("JSON: hex ids, integer enums, 64-bit integers as strings")
    func json() throws {
        let document = try JSONParser.parse(OTLPJSONEncoder.encode([Self.span], resource: Self.resource))
        let resourceSpans = try #require(document.objectValue?["resourceSpans"]?.arrayValue?.first?.objectValue)
        #expect(resourceSpans["resource"]?.objectValue?["attributes"]?.arrayValue?.first?.objectValue?["key"] == "service.name")
        let span = try #require(resourceSpans["scopeSpans"]?.arrayValue?.first?.objectValue?["spans"]?.arrayValue?.first?.objectValue)
        #expect(span["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(span["spanId"] == "00f067aa0ba902b7")
        #expect(span["parentSpanId"] == "1122334455667788")
        #expect(span["kind"] == .number("2"))
        #expect(span["startTimeUnixNano"] == "1700000000000000000")
        #expect(span["attributes"]?.arrayValue?[1].objectValue?["value"]?.objectValue?["intValue"] == "-32001")
        #expect(span["links"]?.arrayValue?.first?.objectValue?["spanId"] == "0000000000000009")
        #expect(span["status"]?.objectValue?["code"] == .number("2"))
    }
}
