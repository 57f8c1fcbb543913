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
        sha1 = Digest.hex(.sha1, of: body)
    }
}

extension RedisCommand {
    /// `EVALSHA sha keyCount`: append the keys, then the arguments, and
    /// send it with ``RedisConnection/eval(_:_:completion:)``.
    public static func evalsha(_ script: RedisScript, keyCount: Int, reservingBytes bytes: Int = 256, arguments: Int = 8) -> RedisCommand {
        var command = RedisCommand(reservingBytes: bytes, arguments: 3 + arguments)
        command.append("EVALSHA")
        command.append(script.sha1)
        command.append(Int64(keyCount))
        return command
    }
}

extension RedisConnection {
    /// Runs `script` with `keys` and `arguments`: `EVALSHA`, then `EVAL`
    /// with the text if the server answers `NOSCRIPT` (which also loads it
    /// for the next calls). `completion` runs once, on the loop. Its reply
    /// may hold `replyElements` elements at most.
    public func eval(_ script: RedisScript, keys: [[UInt8]], arguments: [[UInt8]], replyElements: Int = 0, completion: @escaping Completion) {
        var command = RedisCommand.evalsha(script, keyCount: keys.count, arguments: keys.count + arguments.count)
        command.replyElements = replyElements
        for key in keys { command.append(key) }
        for argument in arguments { command.append(argument) }
        eval(script, command, completion: completion)
    }

    /// Runs `script` as `command` (made by ``RedisCommand/evalsha(_:keyCount:reservingBytes:arguments:)``,
    /// keys and arguments appended), falling back to `EVAL` on `NOSCRIPT`.
    public func eval(_ script: RedisScript, _ command: RedisCommand, completion: @escaping Completion) {
        send(command, script: script, completion: completion)
    }
}
