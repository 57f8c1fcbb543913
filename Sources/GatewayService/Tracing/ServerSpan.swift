import JSONRPC
import Tracing

/// The SERVER span of one JSON-RPC call (OpenTelemetry's JSON-RPC
/// conventions): named by its method, child of the caller's span, with
/// `rpc.system`, `rpc.method`, `rpc.jsonrpc.version`,
/// `rpc.jsonrpc.request_id`, and on an error `rpc.jsonrpc.error_code`,
/// `rpc.jsonrpc.error_message` and status ERROR; linked to the calls whose
/// fetches it shared.
enum ServerSpan {
    /// Nil for a body that held no readable request (not JSON, not a
    /// request object): there is no method to name a span by.
    static func make(_ record: JSONRPCCallRecord, trace: CallTrace) -> SpanData? {
        guard let method = record.method else { return nil }
        let name = String(method.prefix(64))
        var attributes = [
            SpanAttribute("rpc.system", "jsonrpc"),
            SpanAttribute("rpc.method", name),
            SpanAttribute("rpc.jsonrpc.version", "2.0"),
        ]
        switch record.id {
        case .number(let text)?, .string(let text)?: attributes.append(SpanAttribute("rpc.jsonrpc.request_id", String(text.prefix(128))))
        case .null?: attributes.append(SpanAttribute("rpc.jsonrpc.request_id", "null"))
        case nil: break
        }
        var status = SpanData.Status.unset
        if case .failure(let error) = record.outcome {
            attributes.append(SpanAttribute("rpc.jsonrpc.error_code", error.code))
            attributes.append(SpanAttribute("rpc.jsonrpc.error_message", String(error.message.prefix(256))))
            status = .error(message: String(error.message.prefix(256)))
        }
        return SpanData(
            context: trace.span, parentSpanID: trace.parentSpanID, parentIsRemote: trace.parentSpanID != nil,
            traceState: trace.propagated.traceState, name: name, kind: .server,
            startUnixNanos: trace.startUnixNanos, endUnixNanos: UnixClock.nanoseconds(),
            attributes: attributes, links: trace.propagated.links?.all ?? [], status: status
        )
    }
}
