public import JSONRPC

/// A subscription or offer period: a count of one unit, as the upstream wrote it.
///
/// No conversion happens: `P7D` stays 7 days and `P12M` stays 12 months, so the
/// caller shows what the store configured.
public struct SubscriptionPeriod: Sendable, Equatable {
    /// The unit.
    public let unit: PeriodUnit
    /// How many units, 1 to 9999.
    public let numberOfUnits: Int

    /// The accepted range of `numberOfUnits`.
    public static let unitsRange = 1...9999

    /// - Returns: `nil` when `numberOfUnits` is outside 1 to 9999.
    public init?(unit: PeriodUnit, numberOfUnits: Int) {
        guard Self.unitsRange.contains(numberOfUnits) else { return nil }
        self.unit = unit
        self.numberOfUnits = numberOfUnits
    }

    /// Parses an ISO 8601 duration with exactly one component: `PnD`, `PnW`,
    /// `PnM` or `PnY`, with `n` from 1 to 9999 (leading zeros allowed, as ISO 8601
    /// allows them). Designators are upper case; time parts (`PT1H`) and several
    /// components (`P1Y2M`) are refused.
    public init?(iso8601 text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count >= 3, bytes.first == UInt8(ascii: "P") else { return nil }
        let digits = bytes[1..<(bytes.count - 1)]
        guard digits.count <= 4, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        let unit: PeriodUnit
        switch bytes[bytes.count - 1] {
        case UInt8(ascii: "D"): unit = .day
        case UInt8(ascii: "W"): unit = .week
        case UInt8(ascii: "M"): unit = .month
        case UInt8(ascii: "Y"): unit = .year
        default: return nil
        }
        let count = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        self.init(unit: unit, numberOfUnits: count)
    }

    /// The period as an ISO 8601 duration (`P1M`), as the upstream writes it.
    public var iso8601: String { "P\(numberOfUnits)\(unit.designator)" }

    /// The result's period shape: `{"unit": "month", "numberOfUnits": 1}`.
    public var jsonValue: JSONValue {
        .object(JSONObject([
            ("unit", .string(unit.rawValue)),
            ("numberOfUnits", .integer(numberOfUnits)),
        ]))
    }

    /// Writes ``jsonValue``'s bytes without building it.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("unit")
        writer.string(unit.rawValue)
        writer.key("numberOfUnits")
        writer.integer(numberOfUnits)
        writer.endObject()
    }
}
