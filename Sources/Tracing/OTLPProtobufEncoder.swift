/// `ExportTraceServiceRequest` in protobuf's wire format
/// (opentelemetry-proto, `collector/trace/v1/trace_service.proto` and
/// `trace/v1/trace.proto`), written by hand: only the fields the gateway
/// sends, each with the field number of those files.
public enum OTLPProtobufEncoder {
    /// One request: one resource, one scope, `spans`.
    public static func encode(_ spans: [SpanData], resource: OTLPResource) -> [UInt8] {
        var writer = ProtobufWriter()
        // ExportTraceServiceRequest.resource_spans = 1
        writer.message(1) { resourceSpans in
            // ResourceSpans.resource = 1
            resourceSpans.message(1) { resourceMessage in
                for attribute in resource.attributes { resourceMessage.message(1) { $0.keyValue(attribute) } }
            }
            // ResourceSpans.scope_spans = 2
            resourceSpans.message(2) { scopeSpans in
                // ScopeSpans.scope = 1: InstrumentationScope name = 1, version = 2
                scopeSpans.message(1) { scope in
                    scope.string(1, resource.scopeName)
                    scope.string(2, resource.scopeVersion)
                }
                // ScopeSpans.spans = 2
                for span in spans { scopeSpans.message(2) { $0.span(span) } }
            }
        }
        return writer.bytes
    }
}

/// The wire format's pieces: varints, tags, length-delimited fields.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    mutating func tag(_ field: Int, wireType: UInt64) {
        varint(UInt64(field) << 3 | wireType)
    }

    mutating func string(_ field: Int, _ text: String) {
        tag(field, wireType: 2)
        varint(UInt64(text.utf8.count))
        bytes.append(contentsOf: text.utf8)
    }

    mutating func uint(_ field: Int, _ value: UInt64) {
        tag(field, wireType: 0)
        varint(value)
    }

    mutating func int64(_ field: Int, _ value: Int64) {
        tag(field, wireType: 0)
        varint(UInt64(bitPattern: value))
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, wireType: 1)
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(8 * index))) }
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        tag(field, wireType: 5)
        for index in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(8 * index))) }
    }

    mutating func traceID(_ field: Int, _ id: TraceID) {
        tag(field, wireType: 2)
        varint(16)
        id.appendBytes(to: &bytes)
    }

    mutating func spanID(_ field: Int, _ id: SpanID) {
        tag(field, wireType: 2)
        varint(8)
        id.appendBytes(to: &bytes)
    }

    /// A nested message: written apart, then its length and bytes.
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        var nested = ProtobufWriter()
        body(&nested)
        tag(field, wireType: 2)
        varint(UInt64(nested.bytes.count))
        bytes.append(contentsOf: nested.bytes)
    }

    /// KeyValue: key = 1, value = 2 (AnyValue: string_value = 1, int_value = 3).
    mutating func keyValue(_ attribute: SpanAttribute) {
        string(1, attribute.key)
        message(2) { value in
            switch attribute.value {
            case .string(let text): value.string(1, text)
            case .int(let number): value.int64(3, number)
            }
        }
    }

    /// Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4,
    /// name 5, kind 6, start 7, end 8 (fixed64), attributes 9, links 13,
    /// status 15, flags 16 (fixed32).
    mutating func span(_ span: SpanData) {
        traceID(1, span.context.traceID)
        spanID(2, span.context.spanID)
        if let state = span.traceState, !state.isEmpty { string(3, state) }
        if let parent = span.parentSpanID { spanID(4, parent) }
        string(5, span.name)
        uint(6, UInt64(span.kind.rawValue))
        fixed64(7, span.startUnixNanos)
        fixed64(8, span.endUnixNanos)
        for attribute in span.attributes { message(9) { $0.keyValue(attribute) } }
        // Link: trace_id 1, span_id 2, flags 6 (fixed32).
        for link in span.links {
            message(13) { linked in
                linked.traceID(1, link.traceID)
                linked.spanID(2, link.spanID)
                linked.fixed32(6, OTLPSpanFlags.of(link.flags, parentIsRemote: false))
            }
        }
        // Status: message 2, code 3 (2: ERROR).
        if case .error(let text) = span.status {
            message(15) { status in
                if !text.isEmpty { status.string(2, text) }
                status.uint(3, 2)
            }
        }
        fixed32(16, OTLPSpanFlags.of(span.context.flags, parentIsRemote: span.parentIsRemote))
    }
}
