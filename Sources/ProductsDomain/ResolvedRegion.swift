public import JSONRPC

/// The country a call is answered for, and where it came from.
public struct ResolvedRegion: Sendable, Equatable {
    /// The country sent upstream and reported back.
    public let countryCode: CountryCode
    /// The resolution step that gave it.
    public let source: RegionSource

    /// - Parameters:
    ///   - countryCode: The country.
    ///   - source: The resolution step that gave it.
    public init(countryCode: CountryCode, source: RegionSource) {
        self.countryCode = countryCode
        self.source = source
    }

    /// The result's `region` member: `{"countryCode":"DE","source":"explicit"}`.
    public var jsonValue: JSONValue {
        .object(JSONObject([
            ("countryCode", .string(countryCode.text)),
            ("source", .string(source.rawValue)),
        ]))
    }

    /// Writes ``jsonValue``'s bytes without building it.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key(literal: "countryCode")
        writer.string(countryCode.text)
        writer.key(literal: "source")
        writer.string(source.rawValue)
        writer.endObject()
    }
}
