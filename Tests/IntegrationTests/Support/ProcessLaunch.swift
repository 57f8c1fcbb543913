import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs short programs (`redis-cli`, `openssl`) to their end on the calling
/// thread, with `posix_spawn`, and returns what they printed.
///
/// Not Foundation's `Process`: on Linux its `run()` crashed in `memcpy`
/// (a bad pointer) while other tests opened and closed descriptors and
/// spawned children, even with its launches serialized (seen once in ten
/// runs of the suite under load). Long-running children (`redis-server`,
/// the gateway) are ``ChildProcess``es.
enum ProcessLaunch {
    /// Runs `path` with `arguments` and `environment` (by default only
    /// `PATH`) until it exits; standard input is `/dev/null`, standard
    /// error is dropped.
    /// - Returns: its exit status (128 + a signal that ended it) and
    ///   standard output.
    static func run(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, output: String) {
        var outputPipe: [Int32] = [-1, -1]
        guard GNU.pipe2(&outputPipe, O_CLOEXEC) == 0 else { throw TestHTTPError("pipe2 failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        _ = GNU.addCloseFrom(&actions, 3)
        let environment = environment ?? ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
        var pid: pid_t = 0
        let spawned = GNU.spawn(&pid, path, arguments, environment, &actions, nil)
        close(outputPipe[1])
        guard spawned == 0 else {
            close(outputPipe[0])
            throw TestHTTPError("cannot spawn \(path): \(String(cString: strerror(spawned)))")
        }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = read(outputPipe[0], &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            output += chunk[..<count]
        }
        close(outputPipe[0])
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        let signal = raw & 0x7F
        return (signal == 0 ? (raw >> 8) & 0xFF : 128 + signal, String(decoding: output, as: UTF8.self))
    }
}
