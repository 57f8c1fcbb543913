import EventTransport
import Foundation
import Synchronization
import Testing

/// The hiredis client on an event loop, against a real `redis-server`:
/// binary-safe commands, pipelining, `AUTH` and `SELECT`, failing fast
/// while not connected, and a deadline on every command.
@Suite("RedisConnection", .serialized)
struct RedisConnectionTests {
    /// Counts the observer's calls.
    final class Events: RedisConnectionObserver {
        let connected = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        func redisConnected(loop: String) { connected.add(1, ordering: .relaxed) }
        func redisConnectionFailed(loop: String, message: String, wasReady: Bool) { failures.withLock { $0.append(message) } }
        func redisConnectionClosed(loop: String) {}
    }

    /// A loop running a connection to `port`, closed and stopped afterwards.
    static func withConnection(
        port: Int, password: String? = nil, database: Int = 0, timeout: Duration = .milliseconds(200),
        _ body: (EventLoop, RedisConnection, Events) async throws -> Void
    ) async throws {
        let loop = try EventLoop(name: "redis-test")
        loop.start()
        let events = Events()
        let endpoint = RedisEndpoint(host: "localhost", port: port, password: password, database: database, commandTimeout: timeout)
        let connection = RedisConnection(loop: loop, endpoint: endpoint, observer: events)
        loop.execute { connection.start() }
        do {
            try await body(loop, connection, events)
        } catch {
            await Self.run(on: loop) { connection.close() }
            loop.stop()
            loop.waitUntilStopped()
            throw error
        }
        await Self.run(on: loop) { connection.close() }
        loop.stop()
        loop.waitUntilStopped()
    }

    static func run(on loop: EventLoop, _ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute {
                work()
                continuation.resume()
            }
        }
    }

    /// Sends `commands` in one loop turn (pipelined) and returns the replies in order.
    /// Sends `commands`, pipelined; an `MGET`'s reply may hold as many
    /// elements as it names keys (`replyElements` overrides that).
    static func send(_ commands: [[[UInt8]]], on loop: EventLoop, _ connection: RedisConnection, replyElements: Int? = nil) async -> [Result<RedisValue, RedisError>] {
        await withCheckedContinuation { continuation in
            loop.execute {
                let results = Results(count: commands.count)
                for (index, arguments) in commands.enumerated() {
                    var command = RedisCommand(arguments)
                    command.replyElements = replyElements ?? (arguments.first == bytes("MGET") ? arguments.count - 1 : 0)
                    connection.send(command) { result in
                        if results.set(result, at: index) { continuation.resume(returning: results.all) }
                    }
                }
            }
        }
    }

    final class Results: @unchecked Sendable {
        // @unchecked: used on one loop only.
        var all: [Result<RedisValue, RedisError>]
        var left: Int
        init(count: Int) {
            all = Array(repeating: .success(.null), count: count)
            left = count
        }
        func set(_ result: Result<RedisValue, RedisError>, at index: Int) -> Bool {
            all[index] = result
            left -= 1
            return left == 0
        }
    }

    static func isReady(_ connection: RedisConnection, on loop: EventLoop) async -> Bool {
        await withCheckedContinuation { continuation in
            loop.execute { continuation.resume(returning: connection.isReady) }
        }
    }

    static func waitReady(_ connection: RedisConnection, on loop: EventLoop) async throws {
        try await UpstreamScenario.waitFor("the connection to be ready") { await isReady(connection, on: loop) }
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func commandsAreBinarySafeAndPipelinedInOrder() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        try await Self.withConnection(port: redis.port) { loop, connection, events in
            try await Self.waitReady(connection, on: loop)
            let value = (0...255).map(UInt8.init) + [0, 13, 10]
            var commands: [[[UInt8]]] = [[Self.bytes("SET"), Self.bytes("binary\u{0}key"), value], [Self.bytes("GET"), Self.bytes("binary\u{0}key")]]
            for _ in 0..<100 { commands.append([Self.bytes("INCR"), Self.bytes("counter")]) }
            commands.append([Self.bytes("GET"), Self.bytes("missing")])
            commands.append([Self.bytes("NOSUCHCOMMAND")])
            commands.append([Self.bytes("MGET"), Self.bytes("counter"), Self.bytes("missing")])
            let replies = await Self.send(commands, on: loop, connection)
            #expect(try replies[0].get() == .status("OK"))
            #expect(try replies[1].get() == .bulk(value))
            #expect(try (2..<102).map { try replies[$0].get() } == (1...100).map { RedisValue.integer($0) })
            #expect(try replies[102].get() == .null)
            guard case .error(let message) = try replies[103].get() else { Issue.record("not an error reply"); return }
            #expect(message.hasPrefix("ERR unknown command"))
            #expect(try replies[104].get() == .array([.bulk(Self.bytes("100")), .null]))
            #expect(events.connected.load(ordering: .relaxed) == 1)
        }
    }

    /// A reply holds no more elements than its command asked for: one with
    /// more is refused from its header (the connection is dropped, every
    /// command on it fails) and the connection is made again.
    @Test func aReplyOfMoreElementsThanAskedDropsTheConnection() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        try await Self.withConnection(port: redis.port) { loop, connection, events in
            try await Self.waitReady(connection, on: loop)
            let keys = (0..<3).map { Self.bytes("k\($0)") }
            let replies = await Self.send([[Self.bytes("MGET")] + keys, [Self.bytes("PING")]], on: loop, connection, replyElements: 2)
            guard case .failure(let error) = replies[0], case .failure = replies[1] else {
                Issue.record("a reply of 3 elements was read for a command that asked for 2: \(replies)")
                return
            }
            #expect(error.kind == .disconnected)
            // Made again (a second connection), and a reply of what was asked is read.
            try await Self.waitReady(connection, on: loop)
            #expect(events.connected.load(ordering: .relaxed) == 2)
            let again = await Self.send([[Self.bytes("MGET")] + keys], on: loop, connection)
            #expect(try again[0].get() == .array([.null, .null, .null]))
        }
    }

    @Test func passwordAndDatabaseAreSetOnConnect() async throws {
        let redis = try await RedisServer.start(password: "conn-secret-1")
        defer { redis.stop() }
        try await Self.withConnection(port: redis.port, password: "conn-secret-1", database: 3) { loop, connection, _ in
            try await Self.waitReady(connection, on: loop)
            let replies = await Self.send([[Self.bytes("SET"), Self.bytes("in-db-3"), Self.bytes("yes")]], on: loop, connection)
            #expect(try replies[0].get() == .status("OK"))
            #expect(try redis.cli("-n", "3", "GET", "in-db-3") == "yes")
            #expect(try redis.cli("-n", "0", "EXISTS", "in-db-3") == "0")
        }
    }

    @Test func aWrongPasswordNeverBecomesReadyAndIsNotRepeated() async throws {
        let redis = try await RedisServer.start(password: "conn-secret-2")
        defer { redis.stop() }
        try await Self.withConnection(port: redis.port, password: "not-the-password") { loop, connection, events in
            try await UpstreamScenario.waitFor("the refusal") { !events.failures.withLock { $0.isEmpty } }
            #expect(!(await Self.isReady(connection, on: loop)))
            let messages = events.failures.withLock { $0 }
            #expect(messages.allSatisfy { !$0.contains("not-the-password") && !$0.contains("conn-secret-2") })
            #expect(messages.first?.contains("AUTH") == true)
        }
    }

    /// Not connected: a command fails at once (its completion runs before
    /// `send` returns), never waits for a connect.
    @Test func aCommandWhileNotConnectedFailsAtOnce() async throws {
        try await Self.withConnection(port: try RedisServer.unusedPort()) { loop, connection, events in
            try await UpstreamScenario.waitFor("the first failure") { !events.failures.withLock { $0.isEmpty } }
            let outcome: RedisError.Kind? = await withCheckedContinuation { continuation in
                loop.execute {
                    var kind: RedisError.Kind?
                    connection.send([Self.bytes("PING")]) { result in
                        if case .failure(let error) = result { kind = error.kind }
                    }
                    // Read right after `send` returned: set only if the
                    // completion already ran.
                    continuation.resume(returning: kind)
                }
            }
            #expect(outcome == .notConnected)
        }
    }

    /// A stalled server: the outstanding commands fail as timeouts once the
    /// oldest passes its deadline; the connection is made again afterwards.
    @Test func aStalledServerTimesOutAndTheConnectionRecovers() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        try await Self.withConnection(port: redis.port, timeout: .milliseconds(100)) { loop, connection, _ in
            try await Self.waitReady(connection, on: loop)
            let sleeper = try redis.cliInBackground("DEBUG", "SLEEP", "3")
            try await redis.waitUntilAsleep()
            let replies = await Self.send([[Self.bytes("PING")], [Self.bytes("PING")]], on: loop, connection)
            // Answered while Redis still sleeps: the deadline, not the reply.
            #expect(sleeper.isRunning)
            for reply in replies {
                guard case .failure(let error) = reply else { Issue.record("answered"); continue }
                #expect(error.kind == .timeout)
            }
            sleeper.waitUntilExit()
            try await Self.waitReady(connection, on: loop)
            #expect(try await Self.send([[Self.bytes("PING")]], on: loop, connection)[0].get() == .status("PONG"))
        }
    }
}
