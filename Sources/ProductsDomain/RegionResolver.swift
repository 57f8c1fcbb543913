/// Picks the country a `products.fetch` call is answered for.
///
/// The first step that gives a value wins:
/// 1. the call's `countryCode` (source `explicit`);
/// 2. the call's `defaultCountryCodeAssumption`, then the configured default
///    (`GATEWAY_DEFAULT_COUNTRY`) (source `defaultAssumption`);
/// 3. the territory of the system locale (source `systemLocale`).
public struct RegionResolver: Sendable {
    /// The configured `GATEWAY_DEFAULT_COUNTRY`, if any.
    public let configuredDefault: CountryCode?
    /// The process locale, read once at start-up.
    public let systemLocale: SystemLocale

    /// - Parameters:
    ///   - configuredDefault: The configured `GATEWAY_DEFAULT_COUNTRY`, if any.
    ///   - systemLocale: The process locale.
    public init(configuredDefault: CountryCode?, systemLocale: SystemLocale) {
        self.configuredDefault = configuredDefault
        self.systemLocale = systemLocale
    }

    /// The region for a call.
    /// - Throws: `ParamsError` with reason `regionUnresolved` when no step gives a country.
    public func resolve(_ params: FetchProductsParams) throws(ParamsError) -> ResolvedRegion {
        if let code = params.countryCode {
            return ResolvedRegion(countryCode: code, source: .explicit)
        }
        if let code = params.defaultCountryCodeAssumption ?? configuredDefault {
            return ResolvedRegion(countryCode: code, source: .defaultAssumption)
        }
        if let code = systemLocale.territory {
            return ResolvedRegion(countryCode: code, source: .systemLocale)
        }
        throw ParamsError(
            param: "countryCode",
            reason: ParamsError.regionUnresolvedReason,
            message: "countryCode is needed: no region could be resolved; pass countryCode or defaultCountryCodeAssumption, "
                + "or configure GATEWAY_DEFAULT_COUNTRY or a LANG/LC_ALL locale with a territory (such as de_DE.UTF-8)"
        )
    }
}
