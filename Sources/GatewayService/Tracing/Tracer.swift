import EventTransport
public import Tracing

/// Where a call's trace comes from and where finished spans go: the
/// sampler (`OTEL_TRACES_SAMPLER`) and, with an endpoint, the export queue.
/// Without one, calls still continue or start traces and pass them on;
/// nothing is recorded.
public final class Tracer: Sendable {
    public let sampler: Sampler
    /// The batch span processor; nil: nothing is exported.
    let exporter: SpanExporter?
    /// The sampler's rule as plain values, read per call: a parent-based
    /// sampler is an indirect case, whose box cost a reference count on
    /// every call.
    private let followsParent: Bool
    private let root: Sampler

    init(sampler: Sampler, exporter: SpanExporter?) {
        self.sampler = sampler
        self.exporter = exporter
        if case .parentBased(let root) = sampler {
            self.followsParent = true
            self.root = root
        } else {
            self.followsParent = false
            self.root = sampler
        }
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
        guard let incoming = IncomingTrace.read(traceparent: traceparent, tracestate: tracestate) else {
            // A new trace (the usual call without a caller's trace): both
            // ids from one draw of the thread's generator.
            let (traceID, spanID) = TraceIDGenerator.traceAndSpanID()
            return trace(span: SpanContext(traceID: traceID, spanID: spanID, flags: .none), sampled: root.isSampled(traceID: traceID, parent: nil), incoming: nil)
        }
        let span = SpanContext(traceID: incoming.parent.traceID, spanID: TraceIDGenerator.spanID(), flags: .none)
        let sampled = followsParent ? incoming.parent.flags.isSampled : root.isSampled(traceID: span.traceID, parent: incoming.parent)
        return trace(span: span, sampled: sampled, incoming: incoming)
    }

    private func trace(span: SpanContext, sampled: Bool, incoming: IncomingTrace?) -> CallTrace {
        var span = span
        span.flags = sampled ? .sampled : .none
        let recorded = sampled && exporter != nil
        return CallTrace(
            propagated: PropagatedTrace(span: span, traceState: incoming?.traceState, links: recorded ? SpanLinks() : nil),
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
