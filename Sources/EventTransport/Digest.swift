import COpenSSL

/// Message digests by OpenSSL's `EVP_Digest`, as lower-case hex digits:
/// a Redis script's name (SHA-1, for `EVALSHA`), an API key's fingerprint
/// in the access log (SHA-256).
public enum Digest {
    public enum Algorithm: Sendable {
        case sha1, sha256
    }

    /// The digest of `bytes` as lower-case hex digits (40 for SHA-1, 64 for
    /// SHA-256).
    public static func hex(_ algorithm: Algorithm, of bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let (method, expected): (OpaquePointer?, UInt32) = switch algorithm {
        case .sha1: (EVP_sha1(), 20)
        case .sha256: (EVP_sha256(), 32)
        }
        let hashed = bytes.withUnsafeBytes { buffer in
            EVP_Digest(buffer.baseAddress, buffer.count, &digest, &length, method, nil)
        }
        precondition(hashed == 1 && length == expected, "EVP_Digest failed")
        let hex = Array("0123456789abcdef".utf8)
        return digest.prefix(Int(length)).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] }
    }
}
