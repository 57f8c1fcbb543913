import Synchronization

/// The trace a call carries into the fetches it starts: its own span (the
/// parent of each upstream attempt's span), the caller's `tracestate`, and
/// where the links of its span gather while it is recorded.
public struct PropagatedTrace: Sendable {
    /// The call's span: its trace id, its span id, its sampled flag.
    public var span: SpanContext
    /// The caller's valid `tracestate`, passed on unchanged.
    public var traceState: String?
    /// The call's span links, when the span is recorded (sampled, with an
    /// exporter); nil otherwise, so an unrecorded call allocates nothing.
    public var links: SpanLinks?

    /// The call's span when it is recorded: what the fetches it starts
    /// carry for the links of the calls that join them.
    public var recordedSpan: SpanContext? { links == nil ? nil : span }

    public init(span: SpanContext, traceState: String?, links: SpanLinks?) {
        self.span = span
        self.traceState = traceState
        self.links = links
    }
}

/// The links one span gathers while its call runs: the spans of the
/// fetches it shared with calls of other traces (OpenTelemetry span
/// links). A call's links may be added from the loop of another call
/// (a merged upstream call), hence the lock.
public final class SpanLinks: Sendable {
    private let links = Mutex<[SpanContext]>([])

    public init() {}

    /// Adds `link`, unless it is already there.
    public func add(_ link: SpanContext) {
        links.withLock { links in
            if !links.contains(link) { links.append(link) }
        }
    }

    public var all: [SpanContext] { links.withLock { $0 } }
}
