@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import RedisTier
import Testing

/// `Authorization: Bearer <key>` on `/rpc` when API keys are configured.
@Suite("APIKeyAuthenticator")
struct APIKeyAuthenticatorTests {
    static let first = "key-0123456789abcdef"
    static let second = "key-fedcba9876543210"
    static let authenticator = APIKeyAuthenticator(keys: [first, second])

    @Test func withoutKeysEverythingIsAllowed() {
        let open = APIKeyAuthenticator(keys: [])
        #expect(!open.isEnabled)
        #expect(open.isAuthorized(nil))
        #expect(open.isAuthorized("Bearer anything"))
    }

    @Test func eachConfiguredKeyIsAccepted() {
        #expect(Self.authenticator.isEnabled)
        #expect(Self.authenticator.isAuthorized("Bearer \(Self.first)"))
        #expect(Self.authenticator.isAuthorized("Bearer \(Self.second)"))
        // The scheme name is case-insensitive (RFC 9110).
        #expect(Self.authenticator.isAuthorized("bearer \(Self.first)"))
        #expect(Self.authenticator.isAuthorized("BEARER \(Self.second)"))
    }

    @Test(arguments: [
        nil,
        "",
        "Bearer",
        "Bearer ",
        "Bearer key-0123456789abcdeX",
        "Bearer key-0123456789abcde",
        "Bearer key-0123456789abcdefg",
        "Bearer  key-0123456789abcdef",
        "Basic key-0123456789abcdef",
        "key-0123456789abcdef",
        "Bearer key-0123456789abcdef,key-fedcba9876543210",
    ] as [String?])
    func anythingElseIsRefused(authorization: String?) {
        #expect(!Self.authenticator.isAuthorized(authorization))
    }

    @Test func constantTimeEqualityComparesLengthsToo() {
        #expect(APIKeyAuthenticator.constantTimeEquals(Array("abc".utf8), Array("abc".utf8)))
        #expect(!APIKeyAuthenticator.constantTimeEquals(Array("abc".utf8), Array("abd".utf8)))
        #expect(!APIKeyAuthenticator.constantTimeEquals(Array("abc".utf8), Array("ab".utf8)))
        #expect(!APIKeyAuthenticator.constantTimeEquals([], [0]))
        // Lengths that differ by a multiple of 256, padded with zero bytes.
        #expect(!APIKeyAuthenticator.constantTimeEquals([UInt8](repeating: 0, count: 256), []))
        let key = Array(Self.first.utf8)
        #expect(!APIKeyAuthenticator.constantTimeEquals(key + [UInt8](repeating: 0, count: 256), key))
    }
}
