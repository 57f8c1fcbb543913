import Foundation
import JSONRPC
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The real `products-gateway` executable, run as a child process with an
/// environment of the test's choosing. Its standard error is read line by
/// line on a thread of its own; the process is killed when the value goes.
///
/// SwiftPM builds executables beside the test bundle, so the binary is found
/// next to `/proc/self/exe` (`swift build --build-tests` builds both).
final class GatewayProcess: Sendable {
    /// The port the gateway serves on.
    let port: Int
    private let child: ChildProcess
    private let stderr: LineCollector

    private init(child: ChildProcess, port: Int, stderr: LineCollector) {
        self.child = child
        self.port = port
        self.stderr = stderr
    }

    deinit {
        child.kill(SIGKILL)
    }

    /// `products-gateway` in the directory of the running test binary.
    static var executablePath: String {
        get throws {
            let testBinary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
            let path = URL(fileURLWithPath: testBinary).deletingLastPathComponent().appendingPathComponent("products-gateway").path
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw TestHTTPError("no products-gateway beside the test binary at \(path); run swift build --build-tests")
            }
            return path
        }
    }

    /// The environment every child starts from: nothing of the test
    /// process leaks in but `PATH` and the sanitizers' options, so that a
    /// sanitized gateway (`.ci/sanitizers`) reports where the tests do.
    static func baseEnvironment() -> [String: String] {
        var environment = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "GATEWAY_WORKERS": "2",
        ]
        for name in ["TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"] {
            environment[name] = ProcessInfo.processInfo.environment[name]
        }
        return environment
    }

    /// Starts a gateway and waits until it serves.
    ///
    /// Without `GATEWAY_LISTEN` in `environment` the gateway binds port 0 and
    /// the port is read from its `listening` log line (JSON or text). With
    /// it (needed when that line is filtered out by `LOG_LEVEL`), the port is
    /// taken from the variable and the gateway is polled until it answers.
    ///
    /// With `openFileLimit`, the gateway runs under that hard and soft
    /// `RLIMIT_NOFILE` (set by bash's `ulimit` before it `exec`s it), and
    /// with `heldDescriptors` descriptors (`/dev/null`, from 10 up) already
    /// open: something else holding the process's descriptors.
    static func start(_ environment: [String: String] = [:], arguments: [String] = [], openFileLimit: Int? = nil, heldDescriptors: Int = 0) async throws -> GatewayProcess {
        var settings = baseEnvironment()
        settings["GATEWAY_LISTEN"] = "127.0.0.1:0"
        settings.merge(environment) { _, new in new }
        let (child, stderr, _) = try spawn(arguments: arguments, environment: settings, openFileLimit: openFileLimit, heldDescriptors: heldDescriptors)
        let port: Int
        if settings["GATEWAY_LISTEN"] == "127.0.0.1:0" {
            guard let line = await stderr.waitForLine(where: { listeningPort(in: $0) != nil }),
                  let found = listeningPort(in: line) else {
                child.kill(SIGKILL)
                throw TestHTTPError("the gateway never logged its port; stderr:\n\(stderr.lines.joined(separator: "\n"))")
            }
            port = found
        } else {
            guard let text = settings["GATEWAY_LISTEN"], let last = text.split(separator: ":").last, let given = Int(last) else {
                child.kill(SIGKILL)
                throw TestHTTPError("cannot read the port of GATEWAY_LISTEN")
            }
            port = given
            do {
                try await waitUntilServing(port: port, child: child, stderr: stderr)
            } catch {
                child.kill(SIGKILL)
                throw error
            }
        }
        return GatewayProcess(child: child, port: port, stderr: stderr)
    }

    /// Runs the executable to its end (for `--help`, `--version`, and
    /// configuration errors): exit status, standard output, standard error.
    /// A run that has not ended after a generous limit is killed.
    static func run(_ environment: [String: String] = [:], arguments: [String] = [], openFileLimit: Int? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
        var settings = baseEnvironment()
        settings.merge(environment) { _, new in new }
        let (child, stderr, stdout) = try spawn(arguments: arguments, environment: settings, openFileLimit: openFileLimit, heldDescriptors: 0)
        let watchdog = Task {
            // Wall clock: a watchdog's bound on a real process, never a wait for an event (cancelled when the run ends).
            try await Task.sleep(for: .seconds(30))
            child.kill(SIGKILL)
        }
        let status = await child.exitStatus()
        watchdog.cancel()
        await stderr.waitForEnd()
        await stdout.waitForEnd()
        return (status, stdout.lines.joined(separator: "\n"), stderr.lines.joined(separator: "\n"))
    }

    /// The gateway, directly or under bash with a lowered open-file limit
    /// and descriptors held open.
    private static func spawn(arguments: [String], environment: [String: String], openFileLimit: Int?, heldDescriptors: Int) throws -> (ChildProcess, LineCollector, LineCollector) {
        guard let openFileLimit else {
            return try ChildProcess.spawn(try executablePath, arguments: arguments, environment: environment)
        }
        let script = "ulimit -n \(openFileLimit) && for ((fd = 10; fd < \(10 + heldDescriptors); fd++)); do eval \"exec $fd</dev/null\"; done; exec \"$0\" \"$@\""
        return try ChildProcess.spawn("/bin/bash", arguments: ["-c", script, try executablePath] + arguments, environment: environment)
    }

    /// A port that is free now, chosen outside the ephemeral range.
    static func freePort() throws -> Int {
        // Outside the kernel's ephemeral range (32768-60999 by default):
        // every other server in the tests binds port 0, and a port handed out
        // here must not be given to one of them before the gateway binds it
        // (with SO_REUSEPORT the two would share it, same user).
        for _ in 0..<50 {
            let port = Int.random(in: 20000..<32000)
            if try probe(port: port) { return port }
        }
        throw TestHTTPError("no free port found in 20000-31999")
    }

    /// True when `port` can be bound on 127.0.0.1 right now.
    private static func probe(port: Int) throws -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestHTTPError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    // MARK: Observing and steering

    /// Every standard-error line so far.
    var stderrLines: [String] { stderr.lines }

    /// Every standard-error line so far that parses as a JSON object.
    var jsonLines: [JSONObject] { stderr.lines.compactMap(Self.jsonObject) }

    /// Waits until a standard-error line satisfies `predicate` (or the
    /// process closed standard error); returns that line.
    @discardableResult
    func waitForLine(where predicate: @escaping @Sendable (String) -> Bool) async -> String? {
        await stderr.waitForLine(where: predicate)
    }

    func sendSignal(_ signal: Int32) {
        child.kill(signal)
    }

    /// Waits for the process to end and for its last standard-error line;
    /// returns its exit status, or 128 + the signal that ended it.
    func waitForExit() async -> Int32 {
        let status = await child.exitStatus()
        await stderr.waitForEnd()
        return status
    }

    /// Like ``waitForExit()``, but a process still running after `limit` is
    /// killed (status 137). The limit is a generous bound, never a
    /// measurement: it turns "the gateway waits for something it should not"
    /// into a wrong exit status instead of a test that never ends.
    func waitForExit(killingAfter limit: Duration) async -> Int32 {
        let child = self.child
        let watchdog = Task {
            // Wall clock: a watchdog's bound on a real process, never a wait for an event (cancelled when it exits).
            try await Task.sleep(for: limit)
            child.kill(SIGKILL)
        }
        let status = await waitForExit()
        watchdog.cancel()
        return status
    }

    var isRunning: Bool { child.isRunning }

    /// POSTs a JSON-RPC body to `/rpc`.
    func rpc(_ json: String, headers: [(String, String)] = []) async throws -> RawHTTPResponse {
        try await TestHTTP.post(port: port, json: json, headers: headers)
    }

    func get(_ path: String, headers: [(String, String)] = []) async throws -> RawHTTPResponse {
        try await TestHTTP.get(port: port, path: path, headers: headers)
    }

    // MARK: Helpers

    static func jsonObject(_ line: String) -> JSONObject? {
        guard let value = try? JSONParser.parse(Array(line.utf8)) else { return nil }
        return value.objectValue
    }

    /// The `port` of a `listening` line, JSON (`"port":8080`) or text (`port=8080`).
    static func listeningPort(in line: String) -> Int? {
        if let object = jsonObject(line) {
            guard object["msg"]?.stringValue == "listening" else { return nil }
            return object["port"]?.intValue
        }
        guard line.contains(" listening") else { return nil }
        for field in line.split(separator: " ") where field.hasPrefix("port=") {
            return Int(field.dropFirst("port=".count))
        }
        return nil
    }

    private static func waitUntilServing(port: Int, child: ChildProcess, stderr: LineCollector) async throws {
        for _ in 0..<1500 {
            guard child.isRunning else {
                throw TestHTTPError("the gateway exited during start-up; stderr:\n\(stderr.lines.joined(separator: "\n"))")
            }
            if let response = try? await TestHTTP.get(port: port, path: "/healthz"), response.status == 200 { return }
            // Polls for the event (/healthz answering 200), 30 s at most: the sleep is only the poll's interval.
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestHTTPError("the gateway never served on port \(port)")
    }
}

/// A child process started with `posix_spawn` and reaped with a blocking
/// `waitpid` on a thread of its own.
///
/// Not Foundation's `Process`: on Linux it learns of a child's end through a
/// socket the child inherits, and when a concurrently spawned process
/// inherits that socket too, `waitUntilExit` never returns (seen here with
/// tests running in parallel). Our pipes are close-on-exec and the child
/// closes every descriptor above 2, so nothing leaks between children.
final class ChildProcess: Sendable {
    let pid: pid_t
    private struct State {
        var status: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    private let state = Mutex(State())
    /// Signalled once the child has been reaped (``waitUntilExit()``).
    private let reaped = DispatchSemaphore(value: 0)

    private init(pid: pid_t) {
        self.pid = pid
        let thread = Thread { [self] in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            let signal = raw & 0x7F
            let status = signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
            let waiters = state.withLock { state in
                state.status = status
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: status) }
            reaped.signal()
        }
        thread.start()
    }

    /// Blocks the calling thread until the child has been reaped (for the
    /// `defer`s that stop a server: a child's end is quick once killed).
    func waitUntilExit() {
        guard isRunning else { return }
        reaped.wait()
        reaped.signal()
    }

    /// Spawns `path` with exactly `environment`; returns the child and
    /// collectors of its standard error and standard output.
    static func spawn(_ path: String, arguments: [String], environment: [String: String]) throws -> (ChildProcess, LineCollector, LineCollector) {
        var errorPipe: [Int32] = [-1, -1]
        var outputPipe: [Int32] = [-1, -1]
        guard GNU.pipe2(&errorPipe, O_CLOEXEC) == 0 else { throw TestHTTPError("pipe2 failed") }
        guard GNU.pipe2(&outputPipe, O_CLOEXEC) == 0 else {
            errorPipe.forEach { close($0) }
            throw TestHTTPError("pipe2 failed")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        _ = GNU.addCloseFrom(&actions, 3)

        // A clean signal state: the test process's threads may block or
        // ignore signals the gateway must receive.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var pid: pid_t = 0
        let result = GNU.spawn(&pid, path, arguments, environment, &actions, &attributes)
        close(errorPipe[1])
        close(outputPipe[1])
        guard result == 0 else {
            close(errorPipe[0])
            close(outputPipe[0])
            throw TestHTTPError("cannot spawn \(path): \(String(cString: strerror(result)))")
        }
        return (ChildProcess(pid: pid), LineCollector(reading: errorPipe[0]), LineCollector(reading: outputPipe[0]))
    }

    var isRunning: Bool { state.withLock { $0.status == nil } }

    /// Sends `signal` unless the child has been reaped (its pid could be
    /// another process's by then).
    func kill(_ signal: Int32) {
        state.withLock { state in
            if state.status == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// The exit status, or 128 + the signal that ended the child.
    func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = state.withLock { state -> Int32? in
                if state.status == nil { state.waiters.append(continuation) }
                return state.status
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}

/// glibc functions the Swift Glibc module does not show (they need
/// `_GNU_SOURCE`), looked up at run time.
enum GNU {
    typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    static let pipe2: Pipe2 = unsafeBitCast(symbol("pipe2"), to: Pipe2.self)

    /// `posix_spawn` of `path` with `arguments` and exactly `environment`
    /// (C strings made and freed here); its result, 0 or an errno.
    static func spawn(
        _ pid: inout pid_t, _ path: String, _ arguments: [String], _ environment: [String: String],
        _ actions: inout posix_spawn_file_actions_t, _ attributes: UnsafePointer<posix_spawnattr_t>?
    ) -> Int32 {
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        return posix_spawn(&pid, path, &actions, attributes, argv, envp)
    }
    static let addCloseFrom: AddCloseFrom = unsafeBitCast(symbol("posix_spawn_file_actions_addclosefrom_np"), to: AddCloseFrom.self)

    private static func symbol(_ name: String) -> UnsafeMutableRawPointer {
        guard let pointer = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
            fatalError("glibc has no \(name) (glibc 2.34 or later is needed)")
        }
        return pointer
    }
}

/// Reads a descriptor to its end on a thread of its own, keeping whole lines.
final class LineCollector: Sendable {
    private struct State {
        var lines: [String] = []
        var ended = false
    }

    private let state = Mutex(State())

    /// Takes ownership of `fd`.
    init(reading fd: Int32) {
        let thread = Thread { [self] in
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16384)
            while true {
                let count = read(fd, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                pending += chunk[..<count]
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeFirst(newline + 1)
                    state.withLock { $0.lines.append(line) }
                }
            }
            close(fd)
            let rest = pending.isEmpty ? nil : String(decoding: pending, as: UTF8.self)
            state.withLock {
                if let rest { $0.lines.append(rest) }
                $0.ended = true
            }
        }
        thread.start()
    }

    var lines: [String] { state.withLock { $0.lines } }

    /// Polls (only to order events; the limit is generous) until a line
    /// satisfies `predicate` or the stream ends (the process exited).
    func waitForLine(where predicate: (String) -> Bool) async -> String? {
        for _ in 0..<1500 {
            let (lines, ended) = state.withLock { ($0.lines, $0.ended) }
            if let line = lines.first(where: predicate) { return line }
            if ended { return nil }
            // Polls for the event (the line, or the stream's end), 30 s at most: the sleep is only the poll's interval.
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Waits until the writer closed the stream.
    func waitForEnd() async {
        for _ in 0..<1500 {
            if state.withLock({ $0.ended }) { return }
            // Polls for the event (the stream's end), 30 s at most: the sleep is only the poll's interval.
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// Polls `condition` to order events (never to measure time); fails after a
/// generous limit.
func waitForEvent(_ what: String, _ condition: @Sendable () -> Bool) async throws {
    for _ in 0..<1500 {
        if condition() { return }
        // Polls for the event (`condition`), 15 s at most: the sleep is only the poll's interval.
        try await Task.sleep(for: .milliseconds(10))
    }
    throw TestHTTPError("timed out waiting for \(what)")
}
