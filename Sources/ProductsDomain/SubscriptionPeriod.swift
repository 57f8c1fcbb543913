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
        // Read in place: no copy of the bytes for each period of a body.
        let utf8 = text.utf8
        // `P`, one to four digits, the designator.
        guard (3...6).contains(utf8.count), utf8.first == UInt8(ascii: "P"), let designator = utf8.last else { return nil }
        let unit: PeriodUnit
        switch designator {
        case UInt8(ascii: "D"): unit = .day
        case UInt8(ascii: "W"): unit = .week
        case UInt8(ascii: "M"): unit = .month
        case UInt8(ascii: "Y"): unit = .year
        default: return nil
        }
        var count = 0
        for byte in utf8.dropFirst().dropLast() {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            count = count * 10 + Int(byte - UInt8(ascii: "0"))
        }
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
        writer.key(literal: "unit")
        writer.string(unit.rawValue)
        writer.key(literal: "numberOfUnits")
        writer.integer(numberOfUnits)
        writer.endObject()
    }
}
