import GatewayMetrics
import MemoryTier
import RedisTier
/// Checks `Authorization: Bearer <key>` against the configured keys in
/// constant time (per key length), so timing does not reveal a prefix.
struct APIKeyAuthenticator: Sendable {
    private let keys: [[UInt8]]

    init(keys: [String]) {
        self.keys = keys.map { Array($0.utf8) }
    }

    var isEnabled: Bool { !keys.isEmpty }

    func isAuthorized(_ authorization: String?) -> Bool {
        guard isEnabled else { return true }
        guard let authorization else { return false }
        let prefix = "bearer "
        guard authorization.utf8.count > prefix.utf8.count,
              authorization.prefix(prefix.count).lowercased() == prefix else { return false }
        let presented = Array(authorization.utf8.dropFirst(prefix.utf8.count))
        var matched = false
        // Every key is compared, whatever matched before.
        for key in keys {
            matched = Self.constantTimeEquals(presented, key) || matched
        }
        return matched
    }

    static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        // Not the low byte of `lhs.count ^ rhs.count`: lengths that differ by
        // a multiple of 256 would look equal, and zero padding would then match.
        var difference: UInt8 = lhs.count == rhs.count ? 0 : 1
        let count = max(lhs.count, rhs.count)
        for index in 0..<count {
            let left = index < lhs.count ? lhs[index] : 0
            let right = index < rhs.count ? rhs[index] : 0
            difference |= left ^ right
        }
        return difference == 0
    }
}
