/// `ExportTraceServiceRequest` in protobuf's wire format
/// (opentelemetry-proto, `collector/trace/v1/trace_service.proto` and
/// `trace/v1/trace.proto`), written by hand: only the fields the gateway
/// sends, each with the field number of those files.
///
/// Each nested message's length is computed before it is written
/// (``ProtobufSize``), so a whole request is written into one buffer of
/// its exact size, with no buffer per nested message.
public enum OTLPProtobufEncoder {
    /// One request: one resource, one scope, `spans`.
    public static func encode(_ spans: [SpanData], resource: OTLPResource) -> [UInt8] {
        var spanSizes: [Int] = []
        spanSizes.reserveCapacity(spans.count)
        for span in spans { spanSizes.append(ProtobufSize.span(span)) }
        let resourceSize = resource.attributes.reduce(0) { $0 + ProtobufSize.delimited(1, ProtobufSize.keyValue($1)) }
        let scopeSize = ProtobufSize.string(1, resource.scopeName) + ProtobufSize.string(2, resource.scopeVersion)
        let scopeSpansSize = ProtobufSize.delimited(1, scopeSize) + spanSizes.reduce(0) { $0 + ProtobufSize.delimited(2, $1) }
        let resourceSpansSize = ProtobufSize.delimited(1, resourceSize) + ProtobufSize.delimited(2, scopeSpansSize)

        var writer = ProtobufWriter(capacity: ProtobufSize.delimited(1, resourceSpansSize))
        // ExportTraceServiceRequest.resource_spans = 1
        writer.delimited(1, length: resourceSpansSize)
        // ResourceSpans.resource = 1 (Resource.attributes = 1)
        writer.delimited(1, length: resourceSize)
        for attribute in resource.attributes {
            writer.delimited(1, length: ProtobufSize.keyValue(attribute))
            writer.keyValue(attribute)
        }
        // ResourceSpans.scope_spans = 2
        writer.delimited(2, length: scopeSpansSize)
        // ScopeSpans.scope = 1: InstrumentationScope name = 1, version = 2
        writer.delimited(1, length: scopeSize)
        writer.string(1, resource.scopeName)
        writer.string(2, resource.scopeVersion)
        // ScopeSpans.spans = 2
        for (span, size) in zip(spans, spanSizes) {
            writer.delimited(2, length: size)
            writer.span(span)
        }
        assert(writer.bytes.count == ProtobufSize.delimited(1, resourceSpansSize), "a size computed wrong")
        return writer.bytes
    }
}

/// The sizes of what ``ProtobufWriter`` writes, computed without writing.
enum ProtobufSize {
    static func varint(_ value: UInt64) -> Int {
        var size = 1
        var rest = value >> 7
        while rest != 0 {
            size += 1
            rest >>= 7
        }
        return size
    }

    static func tag(_ field: Int) -> Int { varint(UInt64(field) << 3) }

    /// A length-delimited field whose content is `length` bytes.
    static func delimited(_ field: Int, _ length: Int) -> Int { tag(field) + varint(UInt64(length)) + length }

    static func string(_ field: Int, _ text: String) -> Int { delimited(field, text.utf8.count) }

    /// KeyValue's content: key = 1, value = 2 (AnyValue).
    static func keyValue(_ attribute: SpanAttribute) -> Int {
        string(1, attribute.key) + delimited(2, anyValue(attribute.value))
    }

    /// AnyValue's content: string_value = 1 or int_value = 3.
    static func anyValue(_ value: SpanAttribute.Value) -> Int {
        switch value {
        case .string(let text): string(1, text)
        case .int(let number): tag(3) + varint(UInt64(bitPattern: number))
        }
    }

    /// Link's content: trace_id, span_id, flags.
    static let link = delimited(1, 16) + delimited(2, 8) + tag(6) + 4

    /// Status's content: message = 2, code = 3 (ERROR).
    static func status(_ message: String) -> Int {
        (message.isEmpty ? 0 : string(2, message)) + tag(3) + 1
    }

    /// Span's content, as ``ProtobufWriter/span(_:)`` writes it.
    static func span(_ span: SpanData) -> Int {
        var size = delimited(1, 16) + delimited(2, 8)
        if let state = span.traceState, !state.isEmpty { size += string(3, state) }
        if span.parentSpanID != nil { size += delimited(4, 8) }
        size += string(5, span.name)
        size += tag(6) + varint(UInt64(span.kind.rawValue))
        size += 2 * (tag(7) + 8)
        for attribute in span.attributes { size += delimited(9, keyValue(attribute)) }
        size += span.links.count * delimited(13, link)
        if case .error(let message) = span.status { size += delimited(15, status(message)) }
        size += tag(16) + 4
        return size
    }
}

/// The wire format's pieces: varints, tags, length-delimited fields.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

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

    /// The head of a length-delimited field whose `length` bytes follow.
    mutating func delimited(_ field: Int, length: Int) {
        tag(field, wireType: 2)
        varint(UInt64(length))
    }

    mutating func string(_ field: Int, _ text: String) {
        delimited(field, length: text.utf8.count)
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
        delimited(field, length: 16)
        id.appendBytes(to: &bytes)
    }

    mutating func spanID(_ field: Int, _ id: SpanID) {
        delimited(field, length: 8)
        id.appendBytes(to: &bytes)
    }

    /// KeyValue's content: key = 1, value = 2 (AnyValue: string_value = 1,
    /// int_value = 3).
    mutating func keyValue(_ attribute: SpanAttribute) {
        string(1, attribute.key)
        delimited(2, length: ProtobufSize.anyValue(attribute.value))
        switch attribute.value {
        case .string(let text): string(1, text)
        case .int(let number): int64(3, number)
        }
    }

    /// Span's content: trace_id 1, span_id 2, trace_state 3,
    /// parent_span_id 4, name 5, kind 6, start 7, end 8 (fixed64),
    /// attributes 9, links 13, status 15, flags 16 (fixed32).
    mutating func span(_ span: SpanData) {
        traceID(1, span.context.traceID)
        spanID(2, span.context.spanID)
        if let state = span.traceState, !state.isEmpty { string(3, state) }
        if let parent = span.parentSpanID { spanID(4, parent) }
        string(5, span.name)
        uint(6, UInt64(span.kind.rawValue))
        fixed64(7, span.startUnixNanos)
        fixed64(8, span.endUnixNanos)
        for attribute in span.attributes {
            delimited(9, length: ProtobufSize.keyValue(attribute))
            keyValue(attribute)
        }
        // Link: trace_id 1, span_id 2, flags 6 (fixed32).
        for link in span.links {
            delimited(13, length: ProtobufSize.link)
            traceID(1, link.traceID)
            spanID(2, link.spanID)
            fixed32(6, OTLPSpanFlags.of(link.flags, parentIsRemote: false))
        }
        // Status: message 2, code 3 (2: ERROR).
        if case .error(let text) = span.status {
            delimited(15, length: ProtobufSize.status(text))
            if !text.isEmpty { string(2, text) }
            uint(3, 2)
        }
        fixed32(16, OTLPSpanFlags.of(span.context.flags, parentIsRemote: span.parentIsRemote))
    }
}
