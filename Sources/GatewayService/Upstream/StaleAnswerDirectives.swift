
/// The RFC 5861 extensions of a `200`'s `Cache-Control`: how long past
/// `max-age` a kept answer may still be used.
///
/// Both are capped by `GATEWAY_CACHE_MAX_STALE_S` where the cache stores an
/// entry; here they are what the upstream said.
struct StaleAnswerDirectives: Equatable, Sendable {
    /// `stale-if-error=M`: answer from the stale entry when the refresh
    /// fails with `connectionError` or `serviceUnavailable`.
    package var staleIfErrorSeconds: Int?
    /// `stale-while-revalidate=M`: answer from the stale entry at once while
    /// one background fetch refreshes it.
    package var staleWhileRevalidateSeconds: Int?

    package static let none = StaleAnswerDirectives()

    /// Reads both directives from every `Cache-Control` value. A directive
    /// whose value is not a non-negative integer is ignored; `no-store` and
    /// `no-cache` mean nothing is kept at all, so nothing may go stale.
    package static func parse(_ values: [String]) -> StaleAnswerDirectives {
        var directives = StaleAnswerDirectives()
        for directive in values.flatMap({ $0.split(separator: ",") }) {
            let parts = directive.split(separator: "=", maxSplits: 1).map { String($0).trimmingSpaces.lowercased() }
            switch parts.first {
            case "no-store", "no-cache":
                return .none
            case "stale-if-error":
                if parts.count == 2, let seconds = Int(parts[1].trimming("\"")), seconds >= 0 {
                    directives.staleIfErrorSeconds = seconds
                }
            case "stale-while-revalidate":
                if parts.count == 2, let seconds = Int(parts[1].trimming("\"")), seconds >= 0 {
                    directives.staleWhileRevalidateSeconds = seconds
                }
            default:
                continue
            }
        }
        return directives
    }
}
