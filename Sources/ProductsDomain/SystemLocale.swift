/// The process's locale as POSIX reads it, reduced to what region resolution needs.
///
/// The locale name is `LC_ALL` when it is set and not empty, else `LANG`. A name
/// has the form `language[_territory][.codeset][@modifier]`; its territory is the
/// region (`de_DE.UTF-8` gives `DE`, `en_US@euro` gives `US`). `C`, `POSIX`,
/// `C.UTF-8` and a bare `en` have no territory. A set `LC_ALL` without a territory
/// is not completed from `LANG`, because POSIX gives `LC_ALL` precedence over
/// every other variable, not a per-field fallback. A territory that is not an
/// assigned ISO 3166-1 alpha-2 code (`es_419`, `xx_XX`) gives none.
public struct SystemLocale: Sendable, Equatable {
    /// The locale name that was read (`de_DE.UTF-8`), or `nil` when neither variable is set and non-empty.
    public let localeName: String?
    /// The locale's territory, when it has an assigned one.
    public let territory: CountryCode?

    /// - Parameter environment: The process environment (or a test's stand-in).
    public init(environment: [String: String]) {
        let name: String?
        if let all = environment["LC_ALL"], !all.isEmpty {
            name = all
        } else if let lang = environment["LANG"], !lang.isEmpty {
            name = lang
        } else {
            name = nil
        }
        self.localeName = name
        self.territory = name.flatMap(Self.territory(ofLocaleName:))
    }

    /// The territory of a POSIX locale name, if it has an assigned one.
    static func territory(ofLocaleName name: String) -> CountryCode? {
        // The codeset and modifier may themselves hold `_` (`@euro_x`), so cut them off first.
        let base = name.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)[0]
            .split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let parts = base.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty else { return nil }
        return CountryCode(String(parts[1]))
    }
}
