/// Which step of region resolution gave the region (sent as `region.source`).
public enum RegionSource: String, Sendable {
    /// The call's `countryCode`.
    case explicit
    /// The call's `defaultCountryCodeAssumption`, or else the configured `GATEWAY_DEFAULT_COUNTRY`.
    case defaultAssumption
    /// The territory of the process's POSIX locale (`LC_ALL`, else `LANG`).
    case systemLocale
}
