@testable import GatewayService
import Testing

/// RFC 5861's directives as the upstream source reads them from
/// `Cache-Control` (the cache's windows are tested in MemoryTierTests).
@Suite("Stale answer directives")
struct StaleAnswerDirectivesTests {
    @Test(arguments: [
        (["max-age=1, stale-if-error=30"], StaleAnswerDirectives(staleIfErrorSeconds: 30, staleWhileRevalidateSeconds: nil)),
        (["max-age=1", "Stale-While-Revalidate=\"7\""], StaleAnswerDirectives(staleIfErrorSeconds: nil, staleWhileRevalidateSeconds: 7)),
        (["max-age=5, stale-if-error=3, stale-while-revalidate=4"], StaleAnswerDirectives(staleIfErrorSeconds: 3, staleWhileRevalidateSeconds: 4)),
        (["max-age=5, stale-if-error=-3, stale-while-revalidate=soon"], StaleAnswerDirectives.none),
        (["max-age=5, stale-if-error=30, no-store"], StaleAnswerDirectives.none),
        (["no-cache", "stale-while-revalidate=30"], StaleAnswerDirectives.none),
        ([], StaleAnswerDirectives.none),
    ])
    func directivesAreReadFromCacheControl(values: [String], expected: StaleAnswerDirectives) {
        #expect(StaleAnswerDirectives.parse(values) == expected)
    }
}
