public import Tracing

/// The trace of one JSON-RPC call: its SERVER span's context (the trace
/// it continues or starts, a span id of its own, the sampled flag), the
/// caller's span and `tracestate`, and, when the span is recorded, when it
/// started and the links it gathers.
public struct CallTrace: Sendable {
    /// What the call's fetches carry upstream.
    public let propagated: PropagatedTrace
    /// The caller's span (a valid `traceparent`'s parent id); nil when the
    /// call started a new trace.
    public let parentSpanID: SpanID?
    /// The wall clock when the call began (OTLP's start time); 0 when the
    /// span is not recorded.
    public let startUnixNanos: UInt64

    init(propagated: PropagatedTrace, parentSpanID: SpanID?, startUnixNanos: UInt64) {
        self.propagated = propagated
        self.parentSpanID = parentSpanID
        self.startUnixNanos = startUnixNanos
    }

    /// The call's own span.
    public var span: SpanContext { propagated.span }

    /// Whether the call's span is exported (sampled, with an exporter):
    /// it has a start time. Read on every call, so from a number, not from
    /// the links' optional reference.
    public var isRecorded: Bool { startUnixNanos != 0 }

    /// A new sampled trace, recorded nowhere: for a context made without a
    /// tracer (tests, benchmarks).
    public static func unrecordedRoot() -> CallTrace {
        let (traceID, spanID) = TraceIDGenerator.traceAndSpanID()
        return CallTrace(
            propagated: PropagatedTrace(span: SpanContext(traceID: traceID, spanID: spanID, flags: .sampled), traceState: nil, links: nil),
            parentSpanID: nil, startUnixNanos: 0
        )
    }

    /// The same trace, parent and decision, under a span of its own: one
    /// batch element's call.
    func sibling() -> CallTrace {
        var span = propagated.span
        span.spanID = TraceIDGenerator.spanID()
        return CallTrace(
            propagated: PropagatedTrace(span: span, traceState: propagated.traceState, links: isRecorded ? SpanLinks() : nil),
            parentSpanID: parentSpanID, startUnixNanos: isRecorded ? UnixClock.nanoseconds() : 0
        )
    }
}
