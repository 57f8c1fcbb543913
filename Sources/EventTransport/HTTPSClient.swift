import CGatewayShims
import CLibevent
import HTTPFraming
import COpenSSL
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
public import MonotonicTime
import Synchronization

/// Where and how an ``HTTPSClient`` connects.
public struct HTTPSClientConfiguration: Sendable {
    /// Host name (verified against the certificate, and sent as SNI) or address.
    public var host: String
    public var port: Int
    /// Nil for plain `http://` (a trace collector on loopback); the
    /// upstream always has one.
    public var tls: TLSClientContext?
    /// The longest one exchange may take, from sending to the last byte
    /// (`UPSTREAM_TIMEOUT_MS`); also bounds connecting and each wait.
    public var timeoutMilliseconds: Int
    /// Most exchanges in flight at once over every loop
    /// (`UPSTREAM_CONCURRENCY`); more wait their turn, first come first served.
    public var maxConcurrentExchanges: Int
    /// Idle keep-alive connections kept per event loop; nil: an equal
    /// share of `maxConcurrentExchanges` per loop
    /// (``idleConnectionsPerLoop(maxConcurrentExchanges:loops:)``).
    public var maxIdleConnectionsPerLoop: Int?
    /// An idle connection older than this is closed rather than reused.
    public var idleTimeout: Duration
    /// Largest response body read (`UPSTREAM_MAX_BODY_BYTES`); a larger one
    /// fails the exchange and closes its connection.
    public var maxResponseBytes: Int
    /// Told when an exchange starts and ends (the in-flight gauge).
    public var observer: (any HTTPSClientObserver)?
    /// What the client's messages call the server and the settings behind
    /// their limits: the upstream's by default.
    public var naming: HTTPSClientNaming = .upstream

    public init(
        host: String,
        port: Int,
        tls: TLSClientContext?,
        timeoutMilliseconds: Int,
        maxConcurrentExchanges: Int = 64,
        maxIdleConnectionsPerLoop: Int? = nil,
        idleTimeout: Duration = .seconds(30),
        maxResponseBytes: Int = 8 << 20,
        observer: (any HTTPSClientObserver)? = nil
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.timeoutMilliseconds = timeoutMilliseconds
        self.maxConcurrentExchanges = maxConcurrentExchanges
        self.maxIdleConnectionsPerLoop = maxIdleConnectionsPerLoop
        self.idleTimeout = idleTimeout
        self.maxResponseBytes = maxResponseBytes
        self.observer = observer
    }
}

extension HTTPSClientConfiguration {
    /// The default cap on idle connections per loop: an equal share of the
    /// leases, rounded up. Idle connections then number at most about
    /// `maxConcurrentExchanges` over all loops, beside as many in use, so
    /// the descriptors the upstream may hold are known in advance (the
    /// gateway keeps them aside: `DescriptorBudget`). As many per loop as
    /// may be leased would allow that many times the loops.
    public static func idleConnectionsPerLoop(maxConcurrentExchanges: Int, loops: Int) -> Int {
        let leases = max(1, maxConcurrentExchanges)
        return (leases + max(1, loops) - 1) / max(1, loops)
    }
}

/// The words of a client's error messages: what it calls its server, and
/// the settings an operator changes for each limit.
public struct HTTPSClientNaming: Sendable {
    public var server: String
    public var timeoutSetting: String
    public var maxBodySetting: String
    public var caSetting: String
    public var concurrencySetting: String

    public init(server: String, timeoutSetting: String, maxBodySetting: String, caSetting: String, concurrencySetting: String) {
        self.server = server
        self.timeoutSetting = timeoutSetting
        self.maxBodySetting = maxBodySetting
        self.caSetting = caSetting
        self.concurrencySetting = concurrencySetting
    }

    /// The Onside upstream's.
    public static let upstream = HTTPSClientNaming(
        server: "upstream", timeoutSetting: "UPSTREAM_TIMEOUT_MS", maxBodySetting: "UPSTREAM_MAX_BODY_BYTES",
        caSetting: "ONSIDE_CA_FILE", concurrencySetting: "UPSTREAM_CONCURRENCY"
    )
}

/// Hears of exchanges as they go out and end, on the loop that runs them.
public protocol HTTPSClientObserver: Sendable {
    /// A request is about to be sent (it holds a lease).
    func exchangeStarted()
    /// It ended, answered or not.
    func exchangeEnded()
}

/// An HTTPS/1.1 client over libevent's OpenSSL bufferevents, the HTTP
/// framing its own (``HTTPResponseParser``).
///
/// A request runs on the loop of the call that sends it (the loop that
/// accepted the caller's request), from that loop's pool of keep-alive
/// connections, so its answer comes back to the caller on the thread it is
/// already on. Leases are capped over all loops by one
/// ``ConnectionPoolStateMachine`` under a mutex; a caller past the cap waits
/// in its queue until its deadline. Each exchange is bounded as a whole by
/// one loop timer, which closes its connection and frees its lease at once.
public final class HTTPSClient: Sendable {
    typealias StateMachine = ConnectionPoolStateMachine<PendingRequest, MonotonicClock>

    private let group: EventLoopGroup
    /// By loop index: where a lease given back on one loop is handed to
    /// another's waiter.
    private let pools: [HTTPSConnectionPool]
    /// Each loop's pool, in the loop's context: a request asked on its
    /// loop finds its pool by index.
    private let poolSlot = LoopSlot<HTTPSConnectionPool>()
    let state: Mutex<StateMachine>
    private let nextWaiterID = Atomic<Int>(0)
    private let shutDown = Atomic<Bool>(false)

    /// Whether ``shutdown()`` has begun: no new exchange starts, so a
    /// caller should not schedule a retry.
    public var isShutDown: Bool { shutDown.load(ordering: .acquiring) }

    public init(group: EventLoopGroup, configuration: HTTPSClientConfiguration) {
        self.group = group
        self.state = Mutex(StateMachine(
            loopCount: group.loops.count,
            maxLeased: max(1, configuration.maxConcurrentExchanges),
            maxIdlePerLoop: configuration.maxIdleConnectionsPerLoop
                ?? HTTPSClientConfiguration.idleConnectionsPerLoop(maxConcurrentExchanges: configuration.maxConcurrentExchanges, loops: group.loops.count),
            idleTimeout: configuration.idleTimeout
        ))
        var pools: [HTTPSConnectionPool] = []
        for (index, loop) in group.loops.enumerated() {
            pools.append(HTTPSConnectionPool(loop: loop, index: index, configuration: configuration))
        }
        self.pools = pools
        for pool in pools {
            pool.client = self
            poolSlot.fill(pool.loop, with: pool)
        }
    }

    /// Sends `GET path` with `headers` (Host is added) and hands the whole
    /// response, or why there is none, to `completion` once, on `loop`:
    /// the exchange runs on the pool of the loop it is asked from, passed
    /// explicitly (possibly completing before this returns, when the
    /// client is shut down). A loop outside the client's group is served by
    /// the next of its loops, round robin, and its answer comes back to
    /// `loop` through `loop`'s queue.
    /// - Parameter leaseDeadline: How long the request may wait for a lease
    ///   when `UPSTREAM_CONCURRENCY` exchanges are already in flight.
    public func get(on loop: EventLoop, path: String, headers: HTTPHeaders, leaseDeadline: MonotonicInstant, completion: @escaping @Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void) {
        send(on: loop, method: "GET", path: path, headers: headers, body: nil, leaseDeadline: leaseDeadline, completion: completion)
    }

    /// ``get(on:path:headers:leaseDeadline:completion:)`` for any method,
    /// with a body (sent with its `Content-Length`): the trace exporter's
    /// `POST`.
    public func send(on loop: EventLoop, method: String, path: String, headers: HTTPHeaders, body: [UInt8]?, leaseDeadline: MonotonicInstant, completion: @escaping @Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void) {
        if loop.inEventLoop, let pool = loop.context[poolSlot] {
            // The usual request: asked on one of the client's loops, from
            // that loop, and answered there.
            pool.start(PendingRequest(
                method: method, path: path, body: body, headers: headers, leaseDeadline: leaseDeadline,
                waiterID: nextWaiterID.add(1, ordering: .relaxed).oldValue, completion: completion
            ))
            return
        }
        // From another thread (a test), or for a loop outside the group:
        // the request goes to its pool's loop, and the answer to `loop`.
        var answer = completion
        let pool: HTTPSConnectionPool
        if let own = pools.first(where: { $0.loop === loop }) {
            pool = own
        } else {
            let next = group.next()
            pool = pools.first { $0.loop === next } ?? pools[0]
            answer = { result in
                if !loop.execute({ completion(result) }) { completion(result) }
            }
        }
        let request = PendingRequest(
            method: method, path: path, body: body, headers: headers, leaseDeadline: leaseDeadline,
            waiterID: nextWaiterID.add(1, ordering: .relaxed).oldValue, completion: answer
        )
        if !pool.loop.execute({ pool.start(request) }) {
            request.complete(.failure(HTTPClientError(kind: .connection, message: "the client is shut down")))
        }
    }

    /// Closes every idle connection and fails every waiting request;
    /// connections in use close when their exchange ends. Call from a thread
    /// that is not one of the loops.
    public func shutdown() {
        shutDown.store(true, ordering: .releasing)
        let action = state.withLock { $0.shutDown() }
        for waiter in action.waiters {
            let pool = pools[waiter.loopIndex]
            pool.loop.submitAndWait {
                waiter.waitTimer?.cancel()
                waiter.complete(.failure(HTTPClientError(kind: .connection, message: "the client is shut down")))
            }
        }
        for pool in pools {
            let ids = action.close.filter { $0.loop == pool.index }.map(\.id)
            pool.loop.submitAndWait {
                pool.close(ids)
                // Nobody waits for them any more (the calls were answered
                // `cancelled`); ended now, they leave no connection holding
                // its caller, and the caller holding the client, at exit.
                pool.abortExchanges()
            }
        }
    }

    fileprivate func pool(_ index: Int) -> HTTPSConnectionPool { pools[index] }
}

/// One request from the moment it asks for a lease until it is answered.
/// Loop-bound to the loop it started on; it crosses threads only inside the
/// pool's state (as a waiter) and comes back to its loop to run.
final class PendingRequest: @unchecked Sendable {
    let method: String
    let path: String
    let body: [UInt8]?
    let headers: HTTPHeaders
    let leaseDeadline: MonotonicInstant
    let waiterID: Int
    var loopIndex = 0
    var waitTimer: LoopTimer?
    /// A reused connection that fails before any answer is retried once.
    var mayRetryStale = true
    private var completion: ((Result<HTTPClientResponse, HTTPClientError>) -> Void)?

    init(method: String = "GET", path: String, body: [UInt8]? = nil, headers: HTTPHeaders, leaseDeadline: MonotonicInstant, waiterID: Int, completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void) {
        self.method = method
        self.body = body
        self.path = path
        self.headers = headers
        self.leaseDeadline = leaseDeadline
        self.waiterID = waiterID
        self.completion = completion
    }

    /// Answers the caller; exactly once, later calls are ignored.
    func complete(_ result: Result<HTTPClientResponse, HTTPClientError>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }
}

/// The connections of one loop. Loop-bound: every method runs on `loop`.
final class HTTPSConnectionPool: @unchecked Sendable {
    // @unchecked: all mutable state is touched only on `loop`; `client` is
    // set once before any request.
    let loop: EventLoop
    let index: Int
    let configuration: HTTPSClientConfiguration
    unowned(unsafe) var client: HTTPSClient!
    private var connections: [Int: HTTPSConnection] = [:]
    /// The `Host` field every request sends.
    let hostField: String
    /// Armed while this loop has idle connections: closes those past the
    /// idle timeout, so an unused pool gives its descriptors back.
    private var idleSweep: LoopTimer?
    /// `UPSTREAM_TIMEOUT_MS` as one of the loop's common timeouts: every
    /// exchange arms the same duration, which libevent then keeps in a queue
    /// (constant time) instead of its timer heap.
    let exchangeTimeout: timeval

    init(loop: EventLoop, index: Int, configuration: HTTPSClientConfiguration) {
        self.loop = loop
        self.index = index
        self.configuration = configuration
        self.hostField = configuration.port == 443 ? configuration.host : "\(configuration.host):\(configuration.port)"
        var timeout = timeval(
            tv_sec: configuration.timeoutMilliseconds / 1000,
            tv_usec: (configuration.timeoutMilliseconds % 1000) * 1000
        )
        if let common = event_base_init_common_timeout(loop.base, &timeout) { timeout = common.pointee }
        self.exchangeTimeout = timeout
    }

    /// Asks for a lease; runs the request now, or queues it with a deadline.
    func start(_ request: PendingRequest) {
        loop.preconditionInEventLoop()
        request.loopIndex = index
        let action = client.state.withLock {
            $0.lease(request.waiterID, loop: index, waiter: request, now: .now)
        }
        switch action {
        case .proceed(let lease, let closing):
            close(closing)
            run(request, on: lease)
        case .wait:
            let client = self.client!
            let naming = configuration.naming
            request.waitTimer = loop.scheduleTimer(at: request.leaseDeadline) {
                // Nil when the lease was granted meanwhile: then it runs.
                guard client.state.withLock({ $0.cancelWaiter(request.waiterID) }) != nil else { return }
                request.complete(.failure(HTTPClientError(
                    kind: .noLease,
                    message: "no \(naming.server) connection became free before the deadline (\(naming.concurrencySetting) exchanges in flight)"
                )))
            }
        case .refuse:
            request.complete(.failure(HTTPClientError(kind: .connection, message: "the client is shut down")))
        }
    }

    /// Runs the request on its leased connection.
    func run(_ request: PendingRequest, on lease: ConnectionPoolStateMachine<PendingRequest, MonotonicClock>.Lease) {
        loop.preconditionInEventLoop()
        request.waitTimer?.cancel()
        request.waitTimer = nil
        let connection: HTTPSConnection
        switch lease {
        case .idle(let id):
            guard let existing = connections[id] else { preconditionFailure("leased idle connection \(id) is unknown on \(loop.name)") }
            connection = existing
        case .create(let id):
            do {
                connection = try HTTPSConnection(pool: self, id: id, dnsBase: try loop.resolver())
            } catch {
                end(id, reusable: false)
                request.complete(.failure(HTTPClientError(kind: .tls, message: error.description)))
                return
            }
            connections[id] = connection
        }
        let wasReused = connection.completedExchanges > 0
        configuration.observer?.exchangeStarted()
        connection.send(method: request.method, path: request.path, headers: request.headers, body: request.body) { [self] result in
            configuration.observer?.exchangeEnded()
            // A kept-alive connection the server closed while it sat idle
            // fails before any answer: try once more on a fresh one, under
            // the same lease.
            if case .failure(let error) = result, wasReused, request.mayRetryStale, error.kind == .connection, !client.isShutDown {
                request.mayRetryStale = false
                let replacement = client.state.withLock { $0.replace(connection.id) }
                retire(connection)
                run(request, on: .create(replacement))
                return
            }
            end(connection.id, reusable: !connection.isClosed)
            request.complete(result)
        }
    }

    /// Gives the lease back; performs what the state machine says.
    private func end(_ id: Int, reusable: Bool) {
        let action = client.state.withLock { $0.release(id, reusable: reusable, now: .now) }
        for closing in action.close {
            if let connection = connections[closing] { retire(connection) }
        }
        if reusable && !action.close.contains(id) { armIdleSweep() }
        if let grant = action.grant {
            let target = client.pool(grant.loop)
            // On the waiter's own loop, after this callback has returned.
            let request = grant.waiter
            let lease = grant.lease
            target.loop.execute { target.run(request, on: lease) }
        }
    }

    /// Closes this loop's idle connections past the idle timeout one idle
    /// timeout from now, and again while any is left.
    private func armIdleSweep() {
        // None after the shutdown: its close cancelled the last, and an
        // exchange ending after it must not arm another that outlives the
        // loops.
        guard idleSweep == nil, !client.isShutDown else { return }
        // The pool is held by the timer until it fires or the shutdown
        // cancels it (a weak capture's side table is reported by
        // LeakSanitizer when the process ends with the pool alive).
        idleSweep = loop.scheduleTimer(after: configuration.idleTimeout) { [self] in
            self.idleSweep = nil
            let index = self.index
            let (expired, left) = self.client.state.withLock { state in
                (state.expireIdle(loop: index, now: .now), state.idleCount(loop: index))
            }
            self.close(expired)
            if left > 0 { self.armIdleSweep() }
        }
    }

    /// An idle connection ended by itself (the upstream closed it, or sent
    /// bytes nobody asked for): closed now, not left in CLOSE_WAIT until a
    /// request would find it dead.
    func idleConnectionEnded(_ connection: HTTPSConnection) {
        loop.preconditionInEventLoop()
        guard connections[connection.id] === connection else { return }
        let id = connection.id
        if client.state.withLock({ $0.removeIdle(id) }) { retire(connection) }
    }

    /// Ends every exchange in progress with "the client is shut down".
    func abortExchanges() {
        loop.preconditionInEventLoop()
        for connection in Array(connections.values) {
            connection.abort(HTTPClientError(kind: .connection, message: "the client is shut down"))
        }
    }

    func close(_ ids: [Int]) {
        loop.preconditionInEventLoop()
        for id in ids {
            if let connection = connections[id] { retire(connection) }
        }
        if client.isShutDown {
            idleSweep?.cancel()
            idleSweep = nil
        }
    }

    /// Frees a connection on the next loop turn: its bufferevent may still be on
    /// the stack of the callback that reported its end.
    func retire(_ connection: HTTPSConnection) {
        connections[connection.id] = nil
        connection.markClosed()
        loop.execute { connection.free() }
    }
}

