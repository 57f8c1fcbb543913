import COpenSSL

/// A Lua script the gateway runs in Redis, sent by its SHA-1 (`EVALSHA`):
/// the script's text crosses the connection only when the server does not
/// hold it yet (after a restart or a `SCRIPT FLUSH`), not with every call.
public struct RedisScript: Sendable {
    /// The script's text.
    public let body: [UInt8]
    /// Its SHA-1, as the 40 lower-case hex digits `EVALSHA` takes.
    public let sha1: [UInt8]

    public init(_ text: String) {
        body = Array(text.utf8)
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let hashed = body.withUnsafeBytes { bytes in
            EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, EVP_sha1(), nil)
        }
        precondition(hashed == 1 && length == 20, "SHA-1 of a Redis script failed")
        let hex = Array("0123456789abcdef".utf8)
        sha1 = digest.prefix(20).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] }
    }
}

extension RedisConnection {
    /// Runs `script` with `keys` and `arguments`: `EVALSHA`, then `EVAL`
    /// with the text if the server answers `NOSCRIPT` (which also loads it
    /// for the next calls). `completion` runs once, on the loop.
    public func eval(_ script: RedisScript, keys: [[UInt8]], arguments: [[UInt8]], completion: @escaping Completion) {
        var command: [[UInt8]] = [Array("EVALSHA".utf8), script.sha1, Array(String(keys.count).utf8)]
        command.reserveCapacity(3 + keys.count + arguments.count)
        command.append(contentsOf: keys)
        command.append(contentsOf: arguments)
        send(command) { [weak self] result in
            guard case .success(.error(let message)) = result, message.hasPrefix("NOSCRIPT"), let self else {
                completion(result)
                return
            }
            command[0] = Array("EVAL".utf8)
            command[1] = script.body
            self.send(command, completion: completion)
        }
    }
}
