import CFaultProxyShims
import Glibc
import Synchronization

/// The proxy's state and its one thread's loop.
///
/// Every socket call happens with the state's lock held, by the loop or by
/// a command; only `ppoll()` runs unlocked. So a command may close sockets
/// directly, and the loop, when it takes the lock back after `poll()`, acts
/// only on connections still present with the same descriptor: a closed
/// descriptor's number reused meanwhile (by another thread of the test
/// process) is never read, written or closed by mistake.
final class ProxyCore: Sendable {
    let state: Mutex<ProxyState>

    init(listener: Int32, targetPort: Int) {
        state = Mutex(ProxyState(listener: listener, targetPort: targetPort))
    }

    /// Closes everything; the loop ends at its next turn.
    func stop() {
        state.withLock { $0.stop() }
    }

    /// The loop: poll (at most 5 ms, less when a delivery is due sooner),
    /// then read, connect, write and close under the lock.
    ///
    /// `ppoll` rather than `poll`: its timeout is a `timespec`, so the loop
    /// wakes when the next chunk is due to the microsecond. With `poll`'s
    /// whole milliseconds, rounded up, a latency of 0.5 ms became 1 ms.
    func run() {
        // Woken within 1 us of a deadline rather than the default 50 us:
        // each direction of a 0.5 ms latency would otherwise be up to 10 %
        // late. (Per thread; the proxy's one thread only.)
        _ = fault_proxy_set_timer_slack(1_000)
        var pollSet: [pollfd] = []
        var owners: [PollOwner] = []
        while true {
            pollSet.removeAll(keepingCapacity: true)
            owners.removeAll(keepingCapacity: true)
            let timeout = state.withLock { $0.preparePoll(&pollSet, &owners, now: .now) }
            guard let timeout else { return }
            var wait = Self.timespec(timeout)
            let ready = pollSet.withUnsafeMutableBufferPointer {
                fault_proxy_ppoll($0.baseAddress, UInt($0.count), &wait)
            }
            let stillRunning = state.withLock { state -> Bool in
                if ready > 0 { state.handle(pollSet, owners, now: .now) }
                state.countOpenClients()
                return state.serviceAll(now: .now)
            }
            if !stillRunning { return }
        }
    }

    /// A non-negative duration as a `timespec`, rounded up to the
    /// nanosecond (never 0 for a wait that is not 0).
    static func timespec(_ duration: Duration) -> Glibc.timespec {
        guard duration > .zero else { return Glibc.timespec(tv_sec: 0, tv_nsec: 0) }
        let (seconds, attoseconds) = duration.components
        var wholeSeconds = seconds
        var nanoseconds = (attoseconds + 999_999_999) / 1_000_000_000
        if nanoseconds >= 1_000_000_000 {
            wholeSeconds += 1
            nanoseconds -= 1_000_000_000
        }
        return Glibc.timespec(tv_sec: Int(wholeSeconds), tv_nsec: Int(nanoseconds))
    }
}

/// Which socket a `pollfd` entry stands for: connections are named by id,
/// so the loop never holds a connection across the unlocked `poll()`.
struct PollOwner {
    enum Side { case listener, client, server }
    let connection: Int
    let side: Side
}

/// One chunk of bytes read from one side, to be written to the other at
/// `deliverAt`.
struct Chunk {
    let deliverAt: ContinuousClock.Instant
    let bytes: [UInt8]
    var offset = 0
}

/// One direction of a connection: what was read from its source and not
/// yet written to its sink, and how far its close has gone.
struct Flow {
    var chunks: [Chunk] = []
    /// Bytes held, not yet written.
    var held = 0
    /// The source's read returned 0 (it closed or half-closed).
    var sourceEnded = false
    /// `shutdown(SHUT_WR)` was done on the sink, after the last byte.
    var sinkShut = false
    /// The last write would have blocked: wait for POLLOUT.
    var sinkBlocked = false

    var finished: Bool { sourceEnded && chunks.isEmpty && sinkShut }

    mutating func drop() {
        chunks.removeAll()
        held = 0
    }
}

/// One proxied connection: the accepted client socket and the socket to the
/// target.
final class Connection {
    enum Link {
        /// Accepted during a partition: not connected onward yet.
        case waiting
        /// A non-blocking connect is in progress.
        case connecting
        case connected
        /// Forgotten (``FaultProxy/forgetAll()``): no server side any more.
        case forgotten
    }

    var client: Int32
    var server: Int32 = -1
    var link = Link.waiting
    /// A socket failed (reset, refused) and was closed; the other side gets
    /// an RST once no partition holds it back.
    var failed = false
    var toServer = Flow()
    var toClient = Flow()
    /// Accepted in the turn now being handled: its client may have
    /// connected after the poll that turn looked at, so a close that came
    /// just before it (from the same client) is not known yet.
    var acceptedThisTurn = true

    init(client: Int32) {
        self.client = client
    }
}

struct ProxyState {
    /// Bytes held per direction per connection before the proxy stops
    /// reading from the source (its TCP window then fills).
    static let holdLimit = 16 << 20
    /// The loop's longest sleep: how soon a command is noticed.
    static let pollTimeout = Duration.milliseconds(5)
    static let readSize = 65536

    var listener: Int32
    let targetPort: Int
    var stopped = false
    var partitioned = false
    var latencyToServer = Duration.zero
    var latencyToClient = Duration.zero
    var connections: [Int: Connection] = [:]
    var nextID = 0
    var acceptedCount = 0
    /// The most connections whose client had not closed its side, at once
    /// so far (measured after each turn of the loop, once the closes it
    /// read are known).
    var peakOpenCount = 0
    /// Where every read lands before its bytes are copied into a chunk:
    /// one buffer for the proxy's life, not 64 KiB allocated and zeroed per
    /// read (what a loaded bench proxy spent most of its time on).
    private var readBuffer = [UInt8](repeating: 0, count: readSize)

    init(listener: Int32, targetPort: Int) {
        self.listener = listener
        self.targetPort = targetPort
    }

    // MARK: Commands

    mutating func stop() {
        stopped = true
        if listener >= 0 {
            _ = Glibc.close(listener)
            listener = -1
        }
        for connection in connections.values {
            ProxySocket.close(&connection.client, reset: false)
            ProxySocket.close(&connection.server, reset: false)
        }
        connections.removeAll()
    }

    mutating func resetAll() {
        for id in Array(connections.keys) { abort(id) }
    }

    mutating func forgetAll() {
        for (id, connection) in connections {
            guard connection.link != .forgotten else { continue }
            ProxySocket.close(&connection.server, reset: false)
            connection.link = .forgotten
            connection.toServer.drop()
            connection.toClient.drop()
            if connection.client < 0 { connections[id] = nil }
        }
    }

    // MARK: The loop

    /// Fills the poll set; returns the timeout, or nil once stopped.
    func preparePoll(_ pollSet: inout [pollfd], _ owners: inout [PollOwner], now: ContinuousClock.Instant) -> Duration? {
        guard !stopped else { return nil }
        func add(_ fd: Int32, _ events: Int32, _ owner: PollOwner) {
            guard fd >= 0, events != 0 else { return }
            pollSet.append(pollfd(fd: fd, events: Int16(events), revents: 0))
            owners.append(owner)
        }
        add(listener, Int32(POLLIN), PollOwner(connection: -1, side: .listener))
        var timeout = Self.pollTimeout
        for (id, connection) in connections {
            if connection.failed { continue }
            if connection.link == .forgotten {
                // The client is reset when it next sends (or closes).
                if !partitioned && !connection.toServer.sourceEnded {
                    add(connection.client, Int32(POLLIN), PollOwner(connection: id, side: .client))
                }
                continue
            }
            var clientEvents: Int32 = 0
            var serverEvents: Int32 = 0
            if wantsRead(connection.toServer) { clientEvents |= Int32(POLLIN) }
            if connection.link == .connecting { serverEvents |= Int32(POLLOUT) }
            if connection.link == .connected {
                if wantsRead(connection.toClient) { serverEvents |= Int32(POLLIN) }
                if !partitioned {
                    if connection.toServer.sinkBlocked { serverEvents |= Int32(POLLOUT) }
                    if connection.toClient.sinkBlocked { clientEvents |= Int32(POLLOUT) }
                    timeout = min(timeout, Self.wait(until: connection.toServer, now: now))
                    timeout = min(timeout, Self.wait(until: connection.toClient, now: now))
                }
            }
            add(connection.client, clientEvents, PollOwner(connection: id, side: .client))
            add(connection.server, serverEvents, PollOwner(connection: id, side: .server))
        }
        return timeout
    }

    private func wantsRead(_ flow: Flow) -> Bool {
        !flow.sourceEnded && flow.held < Self.holdLimit
    }

    /// How long until the flow's first chunk is due (zero when it is
    /// overdue); the poll timeout when nothing is pending or the sink must
    /// first drain.
    private static func wait(until flow: Flow, now: ContinuousClock.Instant) -> Duration {
        guard let head = flow.chunks.first, !flow.sinkBlocked else { return pollTimeout }
        let wait = head.deliverAt - now
        if wait <= .zero { return .zero }
        return min(wait, pollTimeout)
    }

    /// Acts on what `poll()` reported: accepts, completes connects, reads.
    mutating func handle(_ pollSet: [pollfd], _ owners: [PollOwner], now: ContinuousClock.Instant) {
        for (entry, owner) in zip(pollSet, owners) where entry.revents != 0 {
            if owner.side == .listener {
                if entry.fd == listener { acceptAll() }
                continue
            }
            guard let connection = connections[owner.connection] else { continue }
            let revents = Int32(entry.revents)
            switch owner.side {
            case .listener:
                break
            case .client:
                guard entry.fd == connection.client else { continue }
                if connection.link == .forgotten {
                    // Whatever it sent is dropped with the socket.
                    abort(owner.connection)
                    continue
                }
                if revents & Int32(POLLOUT) != 0 { connection.toClient.sinkBlocked = false }
                if Int32(entry.events) & Int32(POLLIN) != 0 {
                    let latency = latencyToServer
                    if !Self.read(connection.client, into: &connection.toServer, buffer: &readBuffer, latency: latency, now: now) {
                        ProxySocket.close(&connection.client, reset: true)
                        connection.failed = true
                    }
                }
            case .server:
                guard entry.fd == connection.server else { continue }
                if connection.link == .connecting {
                    if ProxySocket.pendingError(connection.server) == 0 {
                        connection.link = .connected
                    } else {
                        ProxySocket.close(&connection.server, reset: false)
                        connection.failed = true
                    }
                    continue
                }
                if revents & Int32(POLLOUT) != 0 { connection.toServer.sinkBlocked = false }
                if Int32(entry.events) & Int32(POLLIN) != 0 {
                    let latency = latencyToClient
                    if !Self.read(connection.server, into: &connection.toClient, buffer: &readBuffer, latency: latency, now: now) {
                        ProxySocket.close(&connection.server, reset: true)
                        connection.failed = true
                    }
                }
            }
        }
    }

    /// Updates ``peakOpenCount`` after a turn. A connection is counted
    /// once a poll has seen what came before it: `accept` takes every
    /// connection queued, also those that arrived after this turn's poll,
    /// whose client's close of an older connection (sent before it
    /// connected) only the next poll reports.
    mutating func countOpenClients() {
        var clients = 0
        for connection in connections.values {
            if connection.acceptedThisTurn {
                connection.acceptedThisTurn = false
            } else if connection.client >= 0 && !connection.toServer.sourceEnded {
                clients += 1
            }
        }
        peakOpenCount = max(peakOpenCount, clients)
    }

    /// Reads what the socket has (up to the hold limit) into the flow;
    /// false when the socket failed.
    private static func read(_ fd: Int32, into flow: inout Flow, buffer: inout [UInt8], latency: Duration, now: ContinuousClock.Instant) -> Bool {
        while !flow.sourceEnded && flow.held < holdLimit {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                flow.chunks.append(Chunk(deliverAt: now + latency, bytes: Array(buffer[..<count])))
                flow.held += count
                if count < readSize { return true }
            } else if count == 0 {
                flow.sourceEnded = true
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return true
            } else {
                return false
            }
        }
        return true
    }

    private mutating func acceptAll() {
        while true {
            // accept4 is not in Glibc's Swift module; the flags follow.
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return  // EAGAIN, or out of descriptors: try again next turn
            }
            ProxySocket.prepareAccepted(fd)
            connections[nextID] = Connection(client: fd)
            nextID += 1
            acceptedCount += 1
        }
    }

    /// Connects, writes what is due, passes closes on, and ends finished
    /// connections; returns false once stopped.
    mutating func serviceAll(now: ContinuousClock.Instant) -> Bool {
        guard !stopped else { return false }
        for (id, connection) in connections {
            service(id, connection, now: now)
        }
        return true
    }

    private mutating func service(_ id: Int, _ connection: Connection, now: ContinuousClock.Instant) {
        guard connection.link != .forgotten, !partitioned else { return }
        if connection.failed { return abort(id) }
        if connection.link == .waiting {
            switch ProxySocket.connectToLoopback(port: targetPort) {
            case .connected(let fd):
                connection.server = fd
                connection.link = .connected
            case .connecting(let fd):
                connection.server = fd
                connection.link = .connecting
            case .failed:
                return abort(id)
            }
        }
        guard connection.link == .connected else { return }
        guard Self.pass(&connection.toServer, to: connection.server, now: now),
              Self.pass(&connection.toClient, to: connection.client, now: now)
        else { return abort(id) }
        if connection.toServer.finished && connection.toClient.finished {
            ProxySocket.close(&connection.client, reset: false)
            ProxySocket.close(&connection.server, reset: false)
            connections[id] = nil
        }
    }

    /// Writes the flow's due chunks, in order, then half-closes the sink
    /// once the source has ended and nothing is left; false when the sink
    /// failed.
    private static func pass(_ flow: inout Flow, to fd: Int32, now: ContinuousClock.Instant) -> Bool {
        while !flow.sinkBlocked, let head = flow.chunks.first, head.deliverAt <= now {
            let sent = head.bytes[head.offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                flow.held -= sent
                flow.chunks[0].offset += sent
                if flow.chunks[0].offset == head.bytes.count { flow.chunks.removeFirst() }
            } else if errno == EINTR {
                continue
            } else if sent == 0 || errno == EAGAIN || errno == EWOULDBLOCK {
                flow.sinkBlocked = true
            } else {
                return false
            }
        }
        if flow.sourceEnded && flow.chunks.isEmpty && !flow.sinkShut {
            _ = shutdown(fd, Int32(SHUT_WR))
            flow.sinkShut = true
        }
        return true
    }

    /// Both sides get an RST; the connection is gone.
    private mutating func abort(_ id: Int) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        ProxySocket.close(&connection.client, reset: true)
        ProxySocket.close(&connection.server, reset: true)
    }
}
