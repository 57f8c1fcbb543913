import FaultProxy
import Glibc
import Synchronization
import Testing

/// FaultProxy over real sockets, in front of an echo server. No test sleeps
/// to wait for an event: every wait is a `poll()` on the socket (or on the
/// echo server's event pipe), bounded, so a broken proxy fails a test
/// rather than hanging it. Times are only ever bounded from below.
@Suite struct FaultProxyTests {
    /// The longest any expected event may take.
    static let patience: Int32 = 5000
    /// How long "nothing arrives" is watched for.
    static let quietWindow: Int32 = 200

    @Test func bytesPassUnchangedBothWays() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try FaultProxy(targetPort: echo.port)
        defer { proxy.close() }
        let client = try TestClient(port: proxy.port)

        let everyByte = (0...255).map { UInt8($0) }
        try client.send(everyByte)
        #expect(client.read(exactly: everyByte.count) == .bytes(everyByte))

        // More than one read's worth, so it crosses the proxy in chunks.
        let large = (0..<(512 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        try client.send(large)
        #expect(client.read(exactly: large.count) == .bytes(large))
        #expect(proxy.acceptedCount == 1)
        #expect(proxy.openCount == 1)
    }

    @Test func partitionHoldsBytesAndHealDeliversThemInOrder() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try FaultProxy(targetPort: echo.port)
        defer { proxy.close() }
        let client = try TestClient(port: proxy.port)
        try client.send(Array("hello".utf8))
        #expect(client.read(exactly: 5) == .bytes(Array("hello".utf8)))

        proxy.partition()
        try client.send(Array("first,".utf8))
        try client.send(Array("second".utf8))
        #expect(client.read(waitingAtMost: Self.quietWindow) == .nothing)
        // A connection opened during the partition is accepted, and never
        // answers either.
        let late = try TestClient(port: proxy.port)
        try late.send(Array("late".utf8))
        #expect(late.read(waitingAtMost: Self.quietWindow) == .nothing)
        #expect(proxy.openCount == 2)

        proxy.heal()
        #expect(client.read(exactly: 12) == .bytes(Array("first,second".utf8)))
        #expect(late.read(exactly: 4) == .bytes(Array("late".utf8)))
        // Nothing more than what was held.
        #expect(client.read(waitingAtMost: Self.quietWindow) == .nothing)
        // And new traffic flows again.
        try client.send(Array("after".utf8))
        #expect(client.read(exactly: 5) == .bytes(Array("after".utf8)))
    }

    @Test func resetAllResetsBothSides() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try FaultProxy(targetPort: echo.port)
        defer { proxy.close() }
        let client = try TestClient(port: proxy.port)
        try client.send([1, 2, 3])
        #expect(client.read(exactly: 3) == .bytes([1, 2, 3]))

        proxy.resetAll()
        #expect(proxy.openCount == 0)
        #expect(client.read(waitingAtMost: Self.patience) == .failed(ECONNRESET))
        #expect(echo.nextEvent(waitingAtMost: Self.patience) == .reset)

        let next = try TestClient(port: proxy.port)
        try next.send([4])
        #expect(next.read(exactly: 1) == .bytes([4]))
    }

    /// What really happens to the client: nothing at all until it writes
    /// (its write succeeds: the bytes reach the proxy's socket), then its
    /// next read fails with ECONNRESET; it never reads a clean EOF.
    @Test func forgetAllClosesTheServerAndResetsTheClientWhenItNextSends() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try FaultProxy(targetPort: echo.port)
        defer { proxy.close() }
        let client = try TestClient(port: proxy.port)
        try client.send([7])
        #expect(client.read(exactly: 1) == .bytes([7]))

        proxy.forgetAll()
        #expect(echo.nextEvent(waitingAtMost: Self.patience) == .endOfFile)
        #expect(client.read(waitingAtMost: Self.quietWindow) == .nothing)

        try client.send([8])
        #expect(client.read(waitingAtMost: Self.patience) == .failed(ECONNRESET))
        #expect(proxy.openCount == 0)

        let next = try TestClient(port: proxy.port)
        try next.send([9])
        #expect(next.read(exactly: 1) == .bytes([9]))
        #expect(proxy.acceptedCount == 2)
    }

    @Test func latencyDelaysEachDirection() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try FaultProxy(targetPort: echo.port)
        defer { proxy.close() }
        proxy.setLatency(toServer: .milliseconds(50), toClient: .milliseconds(50))
        let client = try TestClient(port: proxy.port)

        let clock = ContinuousClock()
        let start = clock.now
        try client.send([42])
        #expect(client.read(exactly: 1) == .bytes([42]))
        #expect(clock.now - start >= .milliseconds(100))
    }

    /// Below a millisecond (the proxy's timeout is in nanoseconds): every
    /// round trip of ten still takes at least both latencies.
    @Test func latencyBelowAMillisecondIsKept() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try FaultProxy(targetPort: echo.port)
        defer { proxy.close() }
        proxy.setLatency(toServer: .microseconds(300), toClient: .microseconds(200))
        let client = try TestClient(port: proxy.port)

        let clock = ContinuousClock()
        for round in 0..<10 {
            let start = clock.now
            try client.send([UInt8(round)])
            #expect(client.read(exactly: 1) == .bytes([UInt8(round)]))
            #expect(clock.now - start >= .microseconds(500))
        }
    }

    @Test func listensOnTheGivenPort() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        // A port that was free a moment ago: the kernel's pick, released.
        let first = try FaultProxy(targetPort: echo.port)
        let port = first.port
        first.close()
        let proxy = try FaultProxy(targetPort: echo.port, listenPort: port)
        defer { proxy.close() }
        #expect(proxy.port == port)
        let client = try TestClient(port: port)
        try client.send([5])
        #expect(client.read(exactly: 1) == .bytes([5]))
    }

    @Test func closeEndsConnectionsAndListening() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try FaultProxy(targetPort: echo.port)
        let client = try TestClient(port: proxy.port)
        try client.send([1])
        #expect(client.read(exactly: 1) == .bytes([1]))

        proxy.close()
        #expect(proxy.openCount == 0)
        #expect(client.read(waitingAtMost: Self.patience) == .closed)
        #expect(throws: TestSocketError.self) { try TestClient(port: proxy.port) }
    }

    @Test func aClientsHalfCloseReachesTheServer() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try FaultProxy(targetPort: echo.port)
        defer { proxy.close() }
        let client = try TestClient(port: proxy.port)
        try client.send(Array("last words".utf8))
        client.shutdownWrite()
        // The echo server answers, then closes on EOF: the client reads the
        // answer, then EOF.
        #expect(client.read(exactly: 10) == .bytes(Array("last words".utf8)))
        #expect(echo.nextEvent(waitingAtMost: Self.patience) == .endOfFile)
        #expect(client.read(waitingAtMost: Self.patience) == .closed)
    }
}

// MARK: - Sockets for the tests

struct TestSocketError: Error {
    let call: String
    let code: Int32
}

/// What one wait for a socket's bytes gave.
enum Reading: Equatable, CustomStringConvertible {
    case bytes([UInt8])
    /// Read returned 0: the peer's FIN.
    case closed
    /// Read failed with this errno.
    case failed(Int32)
    /// The wait ended with nothing to read.
    case nothing

    var description: String {
        switch self {
        case .bytes(let bytes): "\(bytes.count) bytes \(bytes.prefix(16))"
        case .closed: "closed"
        case .failed(let code): "failed(\(String(cString: strerror(code))))"
        case .nothing: "nothing"
        }
    }
}

/// A blocking client socket to 127.0.0.1 whose waits are bounded polls.
final class TestClient {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSocketError(call: "socket", code: errno) }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            // No close here: deinit runs for a class whose init throws after
            // every property is set, and closes it. A second close would
            // close whatever another test opened under that number meanwhile.
            throw TestSocketError(call: "connect", code: errno)
        }
    }

    deinit { Glibc.close(fd) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw TestSocketError(call: "send", code: errno) }
            offset += sent
        }
    }

    func shutdownWrite() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// One read, after waiting at most `milliseconds` for something to read.
    func read(waitingAtMost milliseconds: Int32) -> Reading {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, milliseconds) > 0 else { return .nothing }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 { return .bytes(Array(buffer[..<count])) }
        return count == 0 ? .closed : .failed(errno)
    }

    /// Reads until `count` bytes have arrived, within five seconds in all;
    /// whatever ended the wait early otherwise (with the bytes so far
    /// dropped: a test comparing with the expected bytes fails either way).
    func read(exactly count: Int) -> Reading {
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(FaultProxyTests.patience)
        var bytes: [UInt8] = []
        while bytes.count < count {
            let left = deadline - clock.now
            guard left > .zero else { return .nothing }
            let milliseconds = Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000) + 1
            switch read(waitingAtMost: milliseconds) {
            case .bytes(let more): bytes += more
            case .nothing: continue
            case let ending: return ending
            }
        }
        return .bytes(bytes)
    }
}

private func loopback(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
    address.sin_addr.s_addr = in_addr_t(UInt32(0x7f00_0001).bigEndian)
    return address
}

/// An echo server on 127.0.0.1: one thread polling its listener and
/// connections. How each connection ended is written to a pipe, which a
/// test waits on with `poll()`.
final class EchoServer: Sendable {
    enum Event: Equatable {
        case endOfFile, reset, other(Int32)
        case none
    }

    let port: Int
    private let listener: Int32
    private let events: (read: Int32, write: Int32)
    private let stopped = Atomic<Bool>(false)
    private let thread = Mutex<pthread_t?>(nil)

    init() throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw TestSocketError(call: "socket", code: errno) }
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listener = listener
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        guard bound == 0, named == 0, listen(listener, 16) == 0 else {
            let error = TestSocketError(call: "bind/listen", code: errno)
            Glibc.close(listener)
            throw error
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            Glibc.close(listener)
            throw TestSocketError(call: "pipe2", code: errno)
        }
        events = (ends[0], ends[1])
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        guard pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            Unmanaged<EchoServer>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context) == 0 else {
            Unmanaged<EchoServer>.fromOpaque(context).release()
            throw TestSocketError(call: "pthread_create", code: errno)
        }
        self.thread.withLock { $0 = thread }
    }

    /// Stops the thread (within one 10 ms poll) and closes everything.
    func stop() {
        stopped.store(true, ordering: .relaxed)
        if let thread = thread.withLock({ thread -> pthread_t? in defer { thread = nil }; return thread }) {
            pthread_join(thread, nil)
            Glibc.close(listener)
            Glibc.close(events.read)
            Glibc.close(events.write)
        }
    }

    /// How the next connection ended, waiting at most `milliseconds`.
    func nextEvent(waitingAtMost milliseconds: Int32) -> Event {
        var entry = pollfd(fd: events.read, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, milliseconds) > 0 else { return .none }
        var code: Int32 = 0
        guard Glibc.read(events.read, &code, MemoryLayout<Int32>.size) == MemoryLayout<Int32>.size else { return .none }
        switch code {
        case 0: return .endOfFile
        case ECONNRESET: return .reset
        default: return .other(code)
        }
    }

    private func run() {
        var connections: [Int32] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !stopped.load(ordering: .relaxed) {
            var entries = ([listener] + connections).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&entries, nfds_t(entries.count), 10) > 0 else { continue }
            if entries[0].revents != 0 {
                let fd = accept(listener, nil, nil)
                if fd >= 0 { connections.append(fd) }
            }
            for entry in entries.dropFirst() where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { recv(entry.fd, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    var offset = 0
                    while offset < count {
                        let sent = buffer[offset..<count].withUnsafeBytes {
                            Glibc.send(entry.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                        }
                        guard sent > 0 else { break }
                        offset += sent
                    }
                    continue
                }
                var code: Int32 = count == 0 ? 0 : errno
                _ = Glibc.write(events.write, &code, MemoryLayout<Int32>.size)
                Glibc.close(entry.fd)
                connections.removeAll { $0 == entry.fd }
            }
        }
        connections.forEach { Glibc.close($0) }
    }
}
