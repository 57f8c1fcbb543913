import EventTransport
import Tracing

/// Where a call's trace comes from and where finished spans go: the
/// sampler (`OTEL_TRACES_SAMPLER`) and, with an endpoint, the export queue.
/// Without one, calls still continue or start traces and pass them on;
/// nothing is recorded.
public final class Tracer: Sendable {
    public let sampler: Sampler
    /// The batch span processor; nil: nothing is exported.
    let exporter: SpanExporter?

    init(sampler: Sampler, exporter: SpanExporter?) {
        self.sampler = sampler
        self.exporter = exporter
    }

    /// Propagation only, the default sampler.
    public convenience init(sampler: Sampler = .parentBased(root: .alwaysOn)) {
        self.init(sampler: sampler, exporter: nil)
    }

    /// The trace of a call whose request sent these headers: a valid
    /// `traceparent` is continued (with a valid `tracestate`), anything
    /// else starts a new trace. The span is recorded when it is sampled
    /// and spans are exported.
    public func begin(traceparent: String?, tracestate: String?) -> CallTrace {
        let incoming = IncomingTrace.read(traceparent: traceparent, tracestate: tracestate)
        let traceID = incoming?.parent.traceID ?? TraceIDGenerator.traceID()
        let sampled = sampler.isSampled(traceID: traceID, parent: incoming?.parent)
        let recorded = sampled && exporter != nil
        return CallTrace(
            propagated: PropagatedTrace(
                span: SpanContext(traceID: traceID, spanID: TraceIDGenerator.spanID(), flags: sampled ? .sampled : .none),
                traceState: incoming?.traceState, links: recorded ? SpanLinks() : nil
            ),
            parentSpanID: incoming?.parent.spanID,
            startUnixNanos: recorded ? UnixClock.nanoseconds() : 0
        )
    }

    /// Whether spans of sampled calls are exported.
    public var isExporting: Bool { exporter != nil }

    /// Queues a finished span for export; dropped (and counted) when the
    /// queue is full. Never blocks.
    func record(_ span: SpanData) {
        exporter?.enqueue(span)
    }
}
