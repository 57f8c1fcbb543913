import Glibc

/// One finished span, as OTLP exports it.
public struct SpanData: Sendable {
    public enum Kind: Int, Sendable {
        case `internal` = 1, server = 2, client = 3
    }

    public enum Status: Sendable, Equatable {
        case unset
        case error(message: String)
    }

    public var context: SpanContext
    /// The parent's id; nil for a root span.
    public var parentSpanID: SpanID?
    /// Whether the parent is the caller's (another process's) span.
    public var parentIsRemote: Bool
    public var traceState: String?
    public var name: String
    public var kind: Kind
    public var startUnixNanos: UInt64
    public var endUnixNanos: UInt64
    public var attributes: [SpanAttribute]
    public var links: [SpanContext]
    public var status: Status

    public init(context: SpanContext, parentSpanID: SpanID?, parentIsRemote: Bool = false, traceState: String? = nil, name: String, kind: Kind, startUnixNanos: UInt64, endUnixNanos: UInt64, attributes: [SpanAttribute] = [], links: [SpanContext] = [], status: Status = .unset) {
        self.context = context
        self.parentSpanID = parentSpanID
        self.parentIsRemote = parentIsRemote
        self.traceState = traceState
        self.name = name
        self.kind = kind
        self.startUnixNanos = startUnixNanos
        self.endUnixNanos = endUnixNanos
        self.attributes = attributes
        self.links = links
        self.status = status
    }
}

/// A span or resource attribute: a string or an integer value.
public struct SpanAttribute: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        case string(String)
        case int(Int64)
    }

    public var key: String
    public var value: Value

    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = .string(value)
    }

    public init(_ key: String, _ value: Int) {
        self.key = key
        self.value = .int(Int64(value))
    }
}

/// The wall clock in nanoseconds since 1970, as OTLP times spans.
public enum UnixClock {
    public static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        // Never 0, which stands for "not recorded" in a call's trace.
        return max(UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec), 1)
    }
}
