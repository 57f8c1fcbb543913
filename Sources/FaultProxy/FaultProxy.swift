import Glibc
import Synchronization

/// A TCP proxy that tests put between the gateway and a real peer (a
/// redis-server, the TLS test upstream) to give the network the faults a
/// real one has: latency, partitions, resets and flows a middlebox forgot.
///
/// Why a proxy rather than faults inside the peers: the gateway must meet
/// these faults on real sockets, from a real server it cannot tell apart
/// from production, and redis-server has no switch for them. The proxy
/// only moves bytes, so TLS passes through it untouched.
///
/// One thread serves the listener and every connection with `ppoll()`
/// (its timeout in nanoseconds, so a latency below a millisecond is kept),
/// waking at least every 5 ms, so a command (partition, heal, a reset) or a
/// latency deadline is acted on within a few milliseconds. Commands that
/// close sockets (``resetAll()``, ``forgetAll()``) act before they return,
/// so a test may observe their effect right after the call.
///
/// A test-support library: only test targets and the `fault-proxy` program
/// (bench/hosts) link it, never the gateway.
public final class FaultProxy: Sendable {
    private let core: ProxyCore
    private let thread: Mutex<pthread_t?>

    /// The port the proxy listens on, on 127.0.0.1: where the gateway under
    /// test is told its peer is.
    public let port: Int

    /// Listens on 127.0.0.1 on `listenPort` (by default 0: a free port the
    /// kernel picks), forwarding each accepted connection to
    /// 127.0.0.1:`targetPort`.
    ///
    /// Tests keep the default, a free port chosen by the kernel, so that
    /// tests running side by side never collide. The target is connected per accepted connection, when
    /// it is accepted (or at ``heal()`` when accepted during a partition),
    /// so the target may start after the proxy. A target that refuses the
    /// connection gives the client an RST: the nearest a proxy can come to
    /// the refusal a direct connection would have seen.
    public init(targetPort: Int, listenPort: Int = 0) throws {
        precondition((0...65535).contains(listenPort), "listenPort must be from 0 to 65535")
        let (listener, port) = try ProxySocket.listenOnLoopback(port: listenPort)
        let core = ProxyCore(listener: listener, targetPort: targetPort)
        self.core = core
        self.port = port
        var thread = pthread_t()
        // The thread owns one retain of the core until its loop ends.
        let context = Unmanaged.passRetained(core).toOpaque()
        let created = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let core = Unmanaged<ProxyCore>.fromOpaque(context).takeRetainedValue()
            core.run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<ProxyCore>.fromOpaque(context).release()
            core.stop()
            throw FaultProxyError(call: "pthread_create", code: created)
        }
        self.thread = Mutex(thread)
    }

    deinit { close() }

    /// Latency added to each chunk of bytes in each direction
    /// (client→server, server→client), applied per chunk as a delivery
    /// time: a chunk read at t is written at t + latency, and chunks keep
    /// their order. Default zero.
    ///
    /// Why per chunk and not per connection: a round trip then costs
    /// `toServer + toClient`, as on a slow link, and pipelined requests
    /// are not serialised behind one another. A change applies to bytes
    /// read from then on; bytes already held keep their delivery time (and
    /// never overtake older bytes when the latency shrinks).
    public func setLatency(toServer: Duration, toClient: Duration) {
        precondition(toServer >= .zero && toClient >= .zero, "latency cannot be negative")
        core.state.withLock {
            $0.latencyToServer = toServer
            $0.latencyToClient = toClient
        }
    }

    /// Partition: from now on nothing passes in either direction and
    /// nothing is closed.
    ///
    /// Why: a partitioned peer is not a closed one. TCP gives no signal;
    /// only the gateway's own timeouts can notice, and that is what this
    /// exercises. So the proxy keeps reading what either side sends and
    /// holds it (at most 16 MiB per direction per connection; past that it
    /// stops reading from that socket, and the sender's TCP window fills as
    /// it would), writes nothing, and passes on no close (FIN) or reset: a
    /// side that closes or fails meanwhile is made known to the other only
    /// at ``heal()``.
    ///
    /// New connections during a partition are accepted but not connected
    /// onward until ``heal()``: the client sees an established TCP
    /// connection that never answers, and the target sees no connection at
    /// all (its SYN would have been lost). What the client sends meanwhile
    /// is held like any other bytes.
    public func partition() {
        core.state.withLock { $0.partitioned = true }
    }

    /// Heal: what was held passes on, in order (as TCP would resend it),
    /// then closes and resets noticed during the partition, and new traffic
    /// flows again. Connections accepted during the partition are connected
    /// onward now.
    ///
    /// Held bytes whose latency deadline has passed are delivered at once,
    /// as a burst: what a link gives back after an outage.
    public func heal() {
        core.state.withLock { $0.partitioned = false }
    }

    /// Reset every open connection: both sides get an RST (SO_LINGER
    /// {1, 0}, then close), and bytes held for them are dropped.
    ///
    /// Why: a reset is how a peer that crashed, restarted or ran out of
    /// memory, or a middlebox that gave up, ends a connection; the gateway
    /// must reconnect rather than wait. Done before this returns.
    /// Connections accepted afterwards are unaffected.
    public func resetAll() {
        core.state.withLock { $0.resetAll() }
    }

    /// Silent forgetting: what a NAT table or a load balancer does to a
    /// flow it dropped (idle too long, or its state lost in a failover).
    ///
    /// The server side of every open connection is closed now (a plain
    /// close: the server reads EOF, as when the middlebox's other half of
    /// the flow goes away). The client side is told nothing: its socket
    /// stays open and reads nothing, until it next sends — then it gets an
    /// RST and what it sent is dropped, as a middlebox answers a segment of
    /// a flow it does not know. A client that closes its side meanwhile
    /// gets an RST the same way. Bytes held for either side are dropped.
    /// A client that had already half-closed sends nothing more and so
    /// never learns; its socket stays with the proxy until ``close()``.
    ///
    /// Why: the gateway's pooled connections to Redis or the upstream are
    /// long-lived and idle between bursts; forgetting is the fault they
    /// meet in production that a reset does not model (nothing arrives
    /// until the gateway writes). Done before this returns; new connections
    /// are unaffected.
    public func forgetAll() {
        core.state.withLock { $0.forgetAll() }
    }

    /// Connections accepted so far (by the proxy's thread: a client's
    /// `connect` may return before the proxy has accepted it).
    public var acceptedCount: Int {
        core.state.withLock { $0.acceptedCount }
    }

    /// The most connections open at once on the client's side (its end not
    /// closed) since the proxy started: what a client's cap on its
    /// connections is checked against. A connection the client closed
    /// while the server keeps its end open no longer counts.
    public var peakOpenCount: Int {
        core.state.withLock { $0.peakOpenCount }
    }

    /// Connections open now: those for which the proxy still holds a
    /// socket, including forgotten ones whose client has not yet been
    /// reset.
    public var openCount: Int {
        core.state.withLock { $0.connections.count }
    }

    /// Stops listening and closes everything (a plain close of every socket
    /// the proxy holds), and waits for the proxy's thread to end, so no
    /// descriptor and no thread outlives the test. Safe to call twice; the
    /// proxy also closes itself when released.
    public func close() {
        core.stop()
        let thread = self.thread.withLock { thread -> pthread_t? in
            defer { thread = nil }
            return thread
        }
        // The loop sees `stopped` within one poll timeout (5 ms).
        if let thread { pthread_join(thread, nil) }
    }
}

/// Why a ``FaultProxy`` could not start: the call that failed and its
/// `errno`.
public struct FaultProxyError: Error, CustomStringConvertible {
    public let call: String
    public let code: Int32

    public var description: String {
        "\(call): \(String(cString: strerror(code)))"
    }
}
