/// `OTEL_TRACES_SAMPLER` (with `OTEL_TRACES_SAMPLER_ARG` for the ratio):
/// whether a new span is sampled, decided once per call; its upstream
/// requests pass the decision on in their flags.
public enum Sampler: Sendable, Equatable {
    case alwaysOn
    case alwaysOff
    /// Sampled when the trace id's last 56 bits fall under the ratio, so
    /// every service with the same ratio decides the same for a trace.
    case traceIDRatio(Double)
    /// The parent's decision when the caller sent a valid `traceparent`,
    /// else the root sampler's.
    indirect case parentBased(root: Sampler)

    /// The names of `OTEL_TRACES_SAMPLER` this reads.
    public static let names = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"]

    /// The sampler of `name` and its argument; nil for a name it does not
    /// know. `argument` is the ratio of the `traceidratio` ones (default 1).
    public init?(name: String, ratio: Double) {
        switch name {
        case "always_on": self = .alwaysOn
        case "always_off": self = .alwaysOff
        case "traceidratio": self = .traceIDRatio(ratio)
        case "parentbased_always_on": self = .parentBased(root: .alwaysOn)
        case "parentbased_always_off": self = .parentBased(root: .alwaysOff)
        case "parentbased_traceidratio": self = .parentBased(root: .traceIDRatio(ratio))
        default: return nil
        }
    }

    /// Whether a span of `traceID` whose parent (nil for a root) is
    /// `parent` is sampled.
    public func isSampled(traceID: TraceID, parent: SpanContext?) -> Bool {
        switch self {
        case .alwaysOn: true
        case .alwaysOff: false
        case .traceIDRatio(let ratio): Self.underRatio(traceID, ratio)
        case .parentBased(let root): parent.map(\.flags.isSampled) ?? root.isSampled(traceID: traceID, parent: nil)
        }
    }

    private static func underRatio(_ traceID: TraceID, _ ratio: Double) -> Bool {
        if ratio >= 1 { return true }
        if ratio <= 0 { return false }
        let bound = UInt64(ratio * Double(UInt64(1) << 56))
        return traceID.low & 0x00FF_FFFF_FFFF_FFFF < bound
    }
}
