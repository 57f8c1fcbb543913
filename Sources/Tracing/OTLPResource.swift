/// Who exports the spans: the OTLP resource's attributes
/// (`service.name`, `service.version`, `service.instance.id`) and the
/// instrumentation scope's name and version.
public struct OTLPResource: Sendable, Equatable {
    public var attributes: [SpanAttribute]
    public var scopeName: String
    public var scopeVersion: String

    public init(attributes: [SpanAttribute], scopeName: String, scopeVersion: String) {
        self.attributes = attributes
        self.scopeName = scopeName
        self.scopeVersion = scopeVersion
    }
}

/// What a span's OTLP `flags` field holds: the trace flags in bits 0-7,
/// bit 8 set (whether the parent is remote is known), bit 9 when it is.
enum OTLPSpanFlags {
    static func of(_ flags: TraceFlags, parentIsRemote: Bool) -> UInt32 {
        UInt32(flags.rawValue) | 0x100 | (parentIsRemote ? 0x200 : 0)
    }
}
