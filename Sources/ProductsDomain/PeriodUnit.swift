/// The unit of a subscription or offer period.
public enum PeriodUnit: String, Sendable {
    case day, week, month, year

    /// The ISO 8601 duration designator (`D`, `W`, `M`, `Y`).
    var designator: Character {
        switch self {
        case .day: "D"
        case .week: "W"
        case .month: "M"
        case .year: "Y"
        }
    }
}
