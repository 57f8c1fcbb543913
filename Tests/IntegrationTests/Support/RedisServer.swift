import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` (Debian's package) on a free port of 127.0.0.1,
/// started by the test and killed with it: the shared tier is never tested
/// against a mock of Redis. `redis-cli` reads and writes keys around the
/// gateway (garbage, TTLs, `DEBUG SLEEP`).
final class RedisServer: Sendable {
    let port: Int
    let password: String?
    private let process = Mutex<ChildProcess?>(nil)

    private init(port: Int, password: String?) {
        self.port = port
        self.password = password
    }

    deinit {
        process.withLock { $0?.kill(SIGKILL) }
    }

    /// Starts a server and waits until it answers `PING`.
    ///
    /// The free port is found by binding port 0 and closing it, so another
    /// socket (a client's ephemeral port) can take it before redis-server
    /// binds it; a server that exits at once is started again on another
    /// port.
    static func start(password: String? = nil) async throws -> RedisServer {
        var attempt = 1
        while true {
            let server = RedisServer(port: try freePort(), password: password)
            do {
                try await server.launch()
                return server
            } catch is ExitedAtStart where attempt < 3 {
                attempt += 1
            }
        }
    }

    /// redis-server ended before answering `PING` (its port was taken).
    struct ExitedAtStart: Error, CustomStringConvertible {
        let port: Int
        var description: String { "redis-server on port \(port) exited at start" }
    }

    /// A port nothing listens on (the server is not started): for a tier
    /// that can never connect.
    static func unusedPort() throws -> Int { try freePort() }

    /// `GATEWAY_REDIS_URL` for this server; `withPassword` puts the
    /// password in the URL.
    func url(withPassword: Bool = true, database: Int = 0) -> String {
        if withPassword, let password { return "redis://:\(password)@127.0.0.1:\(port)/\(database)" }
        return "redis://127.0.0.1:\(port)/\(database)"
    }

    private func launch() async throws {
        var arguments = [
            "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--enable-debug-command", "yes", "--loglevel", "warning", "--dir", NSTemporaryDirectory(),
        ]
        if let password { arguments += ["--requirepass", password] }
        let (child, _, _) = try ChildProcess.spawn(try Self.binary("redis-server"), arguments: arguments, environment: [:])
        process.withLock { $0 = child }
        let deadline = ContinuousClock.now + .seconds(10)
        while (try? cli("PING")) != "PONG" {
            guard child.isRunning else { throw ExitedAtStart(port: port) }
            guard ContinuousClock.now < deadline else { throw TestHTTPError("redis-server on port \(port) did not start") }
            // Polls for the event (redis-server answering PING), 10 s at most: the sleep is only the poll's interval.
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Kills the server at once (SIGKILL): connections drop without a word.
    func kill() {
        let child = process.withLock { current -> ChildProcess? in
            defer { current = nil }
            return current
        }
        guard let child else { return }
        child.kill(SIGKILL)
        child.waitUntilExit()
    }

    /// Starts it again on the same port (empty: nothing is saved).
    func restart() async throws {
        kill()
        try await launch()
    }

    func stop() { kill() }

    /// Runs `redis-cli` with `arguments` and returns its output, trimmed.
    @discardableResult
    func cli(_ arguments: String...) throws -> String {
        try cli(arguments)
    }

    func cli(_ arguments: [String]) throws -> String {
        try Self.cli(port: port, password: password, arguments)
    }

    /// `redis-cli` against any server on 127.0.0.1 (one a manifest started).
    static func cli(port: Int, password: String?, _ arguments: [String]) throws -> String {
        var all = ["-h", "127.0.0.1", "-p", "\(port)"]
        if let password { all += ["-a", password, "--no-auth-warning"] }
        let output = try ProcessLaunch.run(try binary("redis-cli"), all + arguments).output
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts `redis-cli` with `arguments` without waiting for it (a
    /// `DEBUG SLEEP` that stalls the server).
    func cliInBackground(_ arguments: String...) throws -> ChildProcess {
        var all = ["-h", "127.0.0.1", "-p", "\(port)"]
        if let password { all += ["-a", password, "--no-auth-warning"] }
        return try ChildProcess.spawn(try Self.binary("redis-cli"), arguments: all + arguments, environment: [:]).0
    }

    /// Waits until the server no longer answers (polled, an event: no
    /// sleep is assumed to be long enough): a `PING` given 200 ms
    /// gets no reply (after ``cliInBackground(_:)`` started a `DEBUG
    /// SLEEP`), so what the test does next meets a stalled Redis, not one
    /// that has not begun to sleep. (KILL: the test's children inherit an
    /// ignored SIGTERM, which `timeout` sends by default.)
    func waitUntilAsleep() async throws {
        var ping = ["-s", "KILL", "0.2", try Self.binary("redis-cli"), "-h", "127.0.0.1", "-p", "\(port)"]
        if let password { ping += ["-a", password, "--no-auth-warning"] }
        ping.append("PING")
        try await UpstreamScenario.waitFor("Redis asleep") {
            let status = (try? ProcessLaunch.run("/usr/bin/timeout", ping))?.status
            return status == 124 || status == 137
        }
    }

    /// Every key under `pattern`.
    func keys(_ pattern: String) throws -> [String] {
        try cli("--scan", "--pattern", pattern).split(separator: "\n").map(String.init).filter { !$0.isEmpty }.sorted()
    }

    static func binary(_ name: String) throws -> String {
        for directory in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
            return "\(directory)/\(name)"
        }
        throw TestHTTPError("\(name) is not installed (apt-get install redis-server)")
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestHTTPError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw TestHTTPError("bind failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw TestHTTPError("getsockname failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

extension RunningGateway {
    /// Waits until every loop's Redis connection is ready
    /// (`gateway_shared_tier_connections` equals the workers).
    func waitForSharedTier(connections: Int = 2) async throws {
        try await UpstreamScenario.waitFor("the shared tier to connect") {
            (try? await metricValue("gateway_shared_tier_connections")) == Double(connections)
        }
    }
}
