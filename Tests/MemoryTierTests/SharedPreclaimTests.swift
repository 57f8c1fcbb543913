@testable import MemoryTier
import ProductsDomain
import Testing

/// The leases a lookup took, as the fetches of its call adopt them: kept
/// as the call's list when every one was won, as a set otherwise; both
/// answer the same.
@Suite("Shared preclaim")
struct SharedPreclaimTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)
    static let identifiers = ["a_long_identifier_0001", "b", "c_another_long_identifier"]

    static func both(_ identifiers: [String]) -> [SharedPreclaim] {
        [
            SharedPreclaim(token: "t", scope: scope, wonAllOf: identifiers),
            SharedPreclaim(token: "t", scope: scope, won: Set(identifiers)),
        ]
    }

    @Test func everyLeaseWonOwnsItsListInAnyOrderAndNothingElse() {
        for preclaim in Self.both(Self.identifiers) {
            #expect(preclaim.ownsAll(of: Self.identifiers))
            #expect(preclaim.ownsAll(of: Self.identifiers.reversed()))
            #expect(!preclaim.ownsAll(of: Array(Self.identifiers.prefix(2))))
            #expect(!preclaim.ownsAll(of: Self.identifiers + ["d"]))
            #expect(!preclaim.ownsAll(of: ["a_long_identifier_0001", "b", "d"]))
            #expect(preclaim.wonCount == 3)
            #expect(Set(preclaim.wonIdentifiers) == Set(Self.identifiers))
            #expect(preclaim.won == Set(Self.identifiers))
        }
    }

    @Test func aFetchOfPartAdoptsThatPartOnly() throws {
        for preclaim in Self.both(Self.identifiers) {
            #expect(preclaim.restricted(to: Self.identifiers)?.won == Set(Self.identifiers))
            let part = try #require(preclaim.restricted(to: ["b", "z"]))
            #expect(part.won == ["b"])
            #expect(part.token == "t")
            #expect(preclaim.restricted(to: ["z"]) == nil)
        }
    }

    @Test func subtractingAdoptedLeavesTheRest() {
        for var preclaim in Self.both(Self.identifiers) {
            preclaim.won.subtract(["b"])
            #expect(preclaim.wonCount == 2)
            #expect(preclaim.ownsAll(of: ["a_long_identifier_0001", "c_another_long_identifier"]))
            #expect(!preclaim.ownsAll(of: Self.identifiers))
        }
    }
}
