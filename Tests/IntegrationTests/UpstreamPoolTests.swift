import EventTransport
import Foundation
import MockUpstream
import MonotonicTime
import Testing

/// The upstream pool's idle connections, through a real ``HTTPSClient`` and
/// the TLS test upstream, observed in the kernel's table of this process's
/// TCP sockets: the descriptors the pool holds are bounded, given back when
/// unused, and never left in CLOSE_WAIT.
@Suite("Upstream pool", .serialized)
struct UpstreamPoolTests {
    /// One `GET` of the test upstream's products, on `client`, for `loop`;
    /// `askedFromTheLoop`: asked on `loop`'s thread, as a call asks.
    static func fetch(_ client: HTTPSClient, on loop: EventLoop, askedFromTheLoop: Bool = false) async -> Int? {
        let result = await withCheckedContinuation { continuation in
            let ask: @Sendable () -> Void = {
                client.get(
                    on: loop,
                    path: "/v1/apps/demo/products?ids=premium_monthly&country=DE",
                    headers: ["Accept": "application/json"],
                    leaseDeadline: .now + .seconds(5)
                ) { continuation.resume(returning: $0) }
            }
            if askedFromTheLoop { loop.execute(ask) } else { ask() }
        }
        return try? result.get().status
    }

    /// Fetches until the pool keeps a connection idle (one whose answer was
    /// followed by TLS bytes still buffered, such as a session ticket, is
    /// not reused, and closes).
    static func leaveOneIdleConnection(_ client: HTTPSClient, on loop: EventLoop, _ upstream: RunningUpstream) async throws {
        for _ in 0..<5 {
            #expect(await fetch(client, on: loop) == 200)
            // A connection the pool does not keep is freed (its socket
            // closed) on the loop's next turn: one trip through the loop
            // puts this read after it.
            await nextTurn(of: loop)
            if TCPSockets.toPort(upstream.port).filter({ $0.state != .other }).map(\.state) == [.established] { return }
        }
        Issue.record("no idle connection was kept: \(TCPSockets.toPort(upstream.port).map(\.state))")
    }

    /// Returns after `loop` has run everything queued on it so far.
    static func nextTurn(of loop: EventLoop) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if !loop.execute({ continuation.resume() }) { continuation.resume() }
        }
    }

    /// Polls `condition` until it holds or `limit` has passed: waits for an
    /// event (the kernel's socket table), the sleep is the poll's interval.
    static func eventually(within limit: Duration, _ condition: () -> Bool) async -> Bool {
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end {
            if condition() { return true }
            // Polls for the event (`condition`), `limit` at most: the sleep is only the poll's interval.
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    static func client(_ upstream: RunningUpstream, loops: Int = 1, idleTimeout: Duration = .seconds(30)) throws -> (EventLoopGroup, HTTPSClient) {
        let group = try EventLoopGroup(count: loops, namePrefix: "pool-test")
        let client = HTTPSClient(group: group, configuration: HTTPSClientConfiguration(
            host: "localhost",
            port: upstream.port,
            tls: try TLSClientContext(caFile: upstream.certificates.caFile),
            timeoutMilliseconds: 5000,
            idleTimeout: idleTimeout
        ))
        return (group, client)
    }

    /// An idle connection the upstream closes is closed on the gateway's
    /// side at once: it does not sit in CLOSE_WAIT, holding a descriptor,
    /// until a request finds it dead.
    @Test func anIdleConnectionTheUpstreamClosesIsClosedAtOnce() async throws {
        let upstream = try RunningUpstream.start()
        let (group, client) = try Self.client(upstream)
        defer {
            client.shutdown()
            group.shutdown()
        }
        try await Self.leaveOneIdleConnection(client, on: group.loops[0], upstream)
        let idle = try #require(TCPSockets.toPort(upstream.port).first { $0.state == .established })
        #expect(TCPSockets.heldByThisProcess().contains(idle.inode))
        upstream.stop()
        // At once: well before the pool's idle timeout (30 s) would close
        // it. Not only out of the socket table (the test upstream's close
        // may end in a reset, which takes it out whoever holds it): its
        // descriptor is given back.
        #expect(await Self.eventually(within: .seconds(10)) { !TCPSockets.toPort(upstream.port).contains { $0.state == .closeWait || $0.state == .established } })
        #expect(await Self.eventually(within: .seconds(10)) { !TCPSockets.heldByThisProcess().contains(idle.inode) })
    }

    /// Idle connections past the idle timeout are closed by the pool itself,
    /// with no request needed to find them.
    @Test func idleConnectionsPastTheIdleTimeoutAreClosedUnasked() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let (group, client) = try Self.client(upstream, idleTimeout: .milliseconds(300))
        defer {
            client.shutdown()
            group.shutdown()
        }
        try await Self.leaveOneIdleConnection(client, on: group.loops[0], upstream)
        #expect(await Self.eventually(within: .seconds(10)) { !TCPSockets.toPort(upstream.port).contains { $0.state == .established } })
        // A later request opens a new one.
        #expect(await Self.fetch(client, on: group.loops[0]) == 200)
    }

    /// An exchange is answered on the loop it was asked for, always: one of
    /// the client's loops asked from its own thread or from another, and a
    /// loop outside the client's group (served by one of its loops, its
    /// answer brought back through the asking loop's queue).
    @Test(.timeLimit(.minutes(1))) func theAnswerComesOnTheLoopItWasAskedFor() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let (group, client) = try Self.client(upstream)
        let outside = try EventLoopGroup(count: 1, namePrefix: "pool-outside")
        defer {
            client.shutdown()
            group.shutdown()
            outside.shutdown()
        }
        /// The status, and whether the answer ran on `loop` (and not on
        /// the client's own loop, when `loop` is not it).
        func ask(on loop: EventLoop, fromItsThread: Bool) async -> (Int?, Bool) {
            await withCheckedContinuation { (done: CheckedContinuation<(Int?, Bool), Never>) in
                let own = group.loops[0]
                let send: @Sendable () -> Void = {
                    client.get(on: loop, path: "/v1/apps/demo/products?ids=premium_monthly&country=DE", headers: ["Accept": "application/json"], leaseDeadline: .now + .seconds(5)) { result in
                        done.resume(returning: (try? result.get().status, loop.inEventLoop && (loop === own || !own.inEventLoop)))
                    }
                }
                if fromItsThread { loop.execute(send) } else { send() }
            }
        }
        let (ownStatus, ownOnLoop) = await ask(on: group.loops[0], fromItsThread: true)
        #expect(ownStatus == 200 && ownOnLoop)
        let (offStatus, offOnLoop) = await ask(on: group.loops[0], fromItsThread: false)
        #expect(offStatus == 200 && offOnLoop)
        let (outsideStatus, outsideOnLoop) = await ask(on: outside.loops[0], fromItsThread: true)
        #expect(outsideStatus == 200 && outsideOnLoop)
    }

    /// Each loop keeps at most its share of `UPSTREAM_CONCURRENCY` idle, so
    /// the idle ones number about `UPSTREAM_CONCURRENCY` over all loops, not
    /// that many times the loops.
    @Test func eachLoopKeepsItsShareOfTheLeasesIdle() async throws {
        #expect(HTTPSClientConfiguration.idleConnectionsPerLoop(maxConcurrentExchanges: 64, loops: 2) == 32)
        #expect(HTTPSClientConfiguration.idleConnectionsPerLoop(maxConcurrentExchanges: 64, loops: 3) == 22)
        #expect(HTTPSClientConfiguration.idleConnectionsPerLoop(maxConcurrentExchanges: 1, loops: 4) == 1)

        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let group = try EventLoopGroup(count: 2, namePrefix: "pool-test")
        let client = HTTPSClient(group: group, configuration: HTTPSClientConfiguration(
            host: "localhost", port: upstream.port, tls: try TLSClientContext(caFile: upstream.certificates.caFile),
            timeoutMilliseconds: 5000, maxConcurrentExchanges: 4
        ))
        defer {
            client.shutdown()
            group.shutdown()
        }
        // Four exchanges at once, all from the first loop: four connections.
        upstream.upstream.setStandingFault(.delay(milliseconds: 300))
        let loop = group.loops[0]
        let statuses = await withTaskGroup(of: Int?.self) { tasks in
            for _ in 0..<4 {
                // Asked from the loop itself, as a call asks.
                tasks.addTask { await Self.fetch(client, on: loop, askedFromTheLoop: true) }
            }
            return await tasks.reduce(into: [Int?]()) { $0.append($1) }
        }
        #expect(statuses == [200, 200, 200, 200])
        // Two of them (4 leases over 2 loops) stay idle; the others close.
        #expect(await Self.eventually(within: .seconds(5)) { TCPSockets.toPort(upstream.port).filter { $0.state == .established }.count == 2 })
    }
}

/// The TCP sockets of this network namespace, read from `/proc/net/tcp`
/// and `tcp6`; the test upstream's ephemeral port singles out its clients.
enum TCPSockets {
    enum State: String { case established = "01", closeWait = "08", other }

    struct Socket {
        let state: State
        /// The socket's inode: what `/proc/self/fd` links to while a
        /// descriptor of this process holds it.
        var inode: String = ""
    }

    /// The inodes of the sockets this process holds a descriptor of.
    static func heldByThisProcess() -> Set<String> {
        let links = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(links.compactMap { fd -> String? in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
                  target.hasPrefix("socket:[") else { return nil }
            return String(target.dropFirst("socket:[".count).dropLast())
        })
    }

    /// The sockets whose remote port is `port` (client sides only).
    static func toPort(_ port: Int) -> [Socket] {
        var sockets: [Socket] = []
        for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
            // Read to the end: a proc file reports no size, and one read of
            // a size guess can stop after the first page of a long table.
            guard let handle = FileHandle(forReadingAtPath: file), let data = try? handle.readToEnd() else { continue }
            try? handle.close()
            let text = String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                guard fields.count > 3, let remotePort = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }) else { continue }
                guard remotePort == port else { continue }
                sockets.append(Socket(state: State(rawValue: String(fields[3])) ?? .other, inode: fields.count > 9 ? String(fields[9]) : ""))
            }
        }
        return sockets
    }
}
