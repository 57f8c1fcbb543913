import JSONRPC

/// `ExportTraceServiceRequest` as OTLP/JSON (`http/json`): protobuf's JSON
/// mapping with the OTLP exceptions: trace and span ids as lower-case hex,
/// not base64; enums as integers; 64-bit integers as strings.
public enum OTLPJSONEncoder {
    public static func encode(_ spans: [SpanData], resource: OTLPResource) -> [UInt8] {
        let request: JSONValue = .object(["resourceSpans": .array([.object([
            "resource": .object(["attributes": .array(resource.attributes.map(keyValue))]),
            "scopeSpans": .array([.object([
                "scope": .object(["name": .string(resource.scopeName), "version": .string(resource.scopeVersion)]),
                "spans": .array(spans.map(span)),
            ])]),
        ])])])
        return request.serialized()
    }

    private static func keyValue(_ attribute: SpanAttribute) -> JSONValue {
        let value: JSONValue = switch attribute.value {
        case .string(let text): .object(["stringValue": .string(text)])
        case .int(let number): .object(["intValue": .string(String(number))])
        }
        return .object(["key": .string(attribute.key), "value": value])
    }

    private static func span(_ span: SpanData) -> JSONValue {
        var object = JSONObject()
        object["traceId"] = .string(span.context.traceID.hex)
        object["spanId"] = .string(span.context.spanID.hex)
        if let state = span.traceState, !state.isEmpty { object["traceState"] = .string(state) }
        if let parent = span.parentSpanID { object["parentSpanId"] = .string(parent.hex) }
        object["flags"] = .integer(Int(OTLPSpanFlags.of(span.context.flags, parentIsRemote: span.parentIsRemote)))
        object["name"] = .string(span.name)
        object["kind"] = .integer(span.kind.rawValue)
        object["startTimeUnixNano"] = .string(String(span.startUnixNanos))
        object["endTimeUnixNano"] = .string(String(span.endUnixNanos))
        if !span.attributes.isEmpty { object["attributes"] = .array(span.attributes.map(keyValue)) }
        if !span.links.isEmpty {
            object["links"] = .array(span.links.map { link in
                .object([
                    "traceId": .string(link.traceID.hex), "spanId": .string(link.spanID.hex),
                    "flags": .integer(Int(OTLPSpanFlags.of(link.flags, parentIsRemote: false))),
                ])
            })
        }
        if case .error(let message) = span.status {
            object["status"] = message.isEmpty ? .object(["code": .integer(2)]) : .object(["message": .string(message), "code": .integer(2)])
        }
        return .object(object)
    }
}
