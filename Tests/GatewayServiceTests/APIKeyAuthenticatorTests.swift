@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
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

/// Which key asked, for the access log: the key's fingerprint, never the key.
@Suite("APIKeyAuthenticator: callers")
struct APIKeyCallerTests {
    /// The first 12 hex digits of each key's SHA-256
    /// (`printf %s key-0123456789abcdef | sha256sum | cut -c1-12`).
    @Test func aKeyIsNamedByTheStartOfItsSHA256() {
        #expect(APIKeyAuthenticator.fingerprint(of: APIKeyAuthenticatorTests.first) == "97b2173c4f5d")
        #expect(APIKeyAuthenticator.fingerprint(of: APIKeyAuthenticatorTests.second) == "dec036f50c8f")
    }

    @Test func eachCallerIsToldApart() {
        let authenticator = APIKeyAuthenticatorTests.authenticator
        #expect(authenticator.identify("Bearer \(APIKeyAuthenticatorTests.first)").logValue == "97b2173c4f5d")
        #expect(authenticator.identify("bearer \(APIKeyAuthenticatorTests.second)").logValue == "dec036f50c8f")
        #expect(authenticator.identify("Bearer \(APIKeyAuthenticatorTests.first)") == .key(AccessNote(apiKey: "97b2173c4f5d")))
        #expect(authenticator.identify(nil) == .missing)
        #expect(authenticator.identify("Bearer key-0123456789abcdeX") == .refused)
        #expect(authenticator.identify("Basic \(APIKeyAuthenticatorTests.first)") == .refused)
        #expect(APIKeyAuthenticator(keys: []).identify("Bearer anything") == .open)
    }

    @Test func theLogValueNeverHoldsTheKey() {
        #expect(APIKeyAuthenticator.Caller.open.logValue == nil)
        #expect(APIKeyAuthenticator.Caller.key(AccessNote(apiKey: "97b2173c4f5d")).logValue == "97b2173c4f5d")
        #expect(APIKeyAuthenticator.Caller.missing.logValue == "none")
        #expect(APIKeyAuthenticator.Caller.refused.logValue == "unknown")
        #expect(APIKeyAuthenticator.Caller.missing.isAuthorized == false)
        #expect(APIKeyAuthenticator.Caller.refused.isAuthorized == false)
        #expect(APIKeyAuthenticator.Caller.open.isAuthorized)
    }
}
