/// The bookkeeping of the upstream connection pool, with no I/O and no lock:
/// which connections exist on which loop, which are idle or leased, the cap
/// on leases in flight (`UPSTREAM_CONCURRENCY`), and the first-come,
/// first-served queue of callers waiting for a lease.
///
/// Every method returns what the owner must do (use or create a connection,
/// close some, hand a lease to a waiter); the owner does it outside its lock,
/// each action on the loop the connection belongs to. Generic over the clock
/// so tests drive idle expiry with made-up instants and never sleep.
///
/// A connection is in one of three states: idle (in its loop's idle stack,
/// since an instant), leased (one request on it), or closing: released as not
/// reusable, expired, or shut down. A closing connection has left the table
/// by the time the action that closes it is returned.
public struct ConnectionPoolStateMachine<Waiter, Clock: _Concurrency.Clock> {
    public typealias ConnectionID = Int
    public typealias WaiterID = Int

    /// How a lease gets its connection, on the lease's loop.
    public enum Lease: Equatable, Sendable {
        /// Reuse this idle connection.
        case idle(ConnectionID)
        /// Open a new connection under this id.
        case create(ConnectionID)

        /// The connection the lease is on.
        public var connectionID: ConnectionID {
            switch self {
            case .idle(let id), .create(let id): id
            }
        }
    }

    /// The answer to ``lease(_:loop:waiter:now:)``.
    public enum LeaseAction {
        /// Go ahead; first close `closing` (expired idle connections of
        /// the same loop).
        case proceed(Lease, closing: [ConnectionID])
        /// Every lease is taken: the waiter was queued. Arm its deadline;
        /// it is handed a lease by a later ``release(_:reusable:now:)``.
        case wait
        /// The pool is shut down.
        case refuse
    }

    /// The answer to ``release(_:reusable:now:)``.
    public struct ReleaseAction {
        /// Connections to close, all on the releasing connection's loop.
        public var close: [ConnectionID] = []
        /// A waiter that now holds a lease: hand it over on its own loop.
        public var grant: (waiter: Waiter, loop: Int, lease: Lease)?
    }

    /// What is left to clean up at shutdown.
    public struct ShutdownAction {
        /// Idle connections to close, by loop.
        public var close: [(loop: Int, id: ConnectionID)] = []
        /// Waiters to fail.
        public var waiters: [Waiter] = []
    }

    private enum ConnectionState {
        case idle(since: Clock.Instant)
        case leased
    }

    private struct Connection {
        let loop: Int
        var state: ConnectionState
    }

    private struct QueuedWaiter {
        let id: WaiterID
        let loop: Int
        let waiter: Waiter
    }

    /// Most leases in flight at once, over all loops.
    public let maxLeased: Int
    /// Most idle connections kept per loop; more are closed when released.
    public let maxIdlePerLoop: Int
    /// An idle connection older than this is closed instead of reused (the
    /// upstream has likely closed it already).
    public let idleTimeout: Clock.Duration

    private var connections: [ConnectionID: Connection] = [:]
    private var idle: [[ConnectionID]]
    private var waiters: [QueuedWaiter] = []
    private var nextConnectionID: ConnectionID = 0
    private var isShutDown = false

    /// Leases in flight now.
    public private(set) var leasedCount = 0

    /// - Parameters:
    ///   - loopCount: Number of event loops; loops are named by index.
    ///   - maxLeased: The cap on leases in flight, at least 1.
    ///   - maxIdlePerLoop: Idle connections kept per loop.
    ///   - idleTimeout: How long an idle connection may be reused.
    public init(loopCount: Int, maxLeased: Int, maxIdlePerLoop: Int, idleTimeout: Clock.Duration) {
        precondition(loopCount > 0 && maxLeased > 0 && maxIdlePerLoop >= 0)
        self.maxLeased = maxLeased
        self.maxIdlePerLoop = maxIdlePerLoop
        self.idleTimeout = idleTimeout
        self.idle = Array(repeating: [], count: loopCount)
    }

    /// Connections open now (idle and leased).
    public var connectionCount: Int { connections.count }
    /// Idle connections of `loop`.
    public func idleCount(loop: Int) -> Int { idle[loop].count }
    /// Callers waiting for a lease.
    public var waiterCount: Int { waiters.count }

    /// Asks for a lease on `loop`: the freshest idle connection of that loop
    /// if one is still young enough, else a new one, else a place in the queue.
    public mutating func lease(_ waiterID: WaiterID, loop: Int, waiter: Waiter, now: Clock.Instant) -> LeaseAction {
        guard !isShutDown else { return .refuse }
        guard leasedCount < maxLeased else {
            waiters.append(QueuedWaiter(id: waiterID, loop: loop, waiter: waiter))
            return .wait
        }
        leasedCount += 1
        var closing: [ConnectionID] = []
        let lease = takeConnection(loop: loop, now: now, closing: &closing)
        return .proceed(lease, closing: closing)
    }

    /// The request on `id` ended. A reusable connection goes back to its
    /// loop's idle stack (unless that is full); either way its lease passes
    /// to the first waiter, if any.
    public mutating func release(_ id: ConnectionID, reusable: Bool, now: Clock.Instant) -> ReleaseAction {
        guard let connection = connections[id], case .leased = connection.state else {
            preconditionFailure("release of connection \(id), which is not leased")
        }
        var action = ReleaseAction()
        if reusable && !isShutDown && idle[connection.loop].count < maxIdlePerLoop {
            // Replaced whole: an optional-chained update goes through the
            // dictionary's modify accessor, which allocated on every call.
            connections.updateValue(Connection(loop: connection.loop, state: .idle(since: now)), forKey: id)
            idle[connection.loop].append(id)
        } else {
            connections[id] = nil
            action.close.append(id)
        }
        leasedCount -= 1
        if !waiters.isEmpty {
            let next = waiters.removeFirst()
            leasedCount += 1
            // Expired idle connections of another loop cannot be closed from
            // here; the waiter takes the freshest one of its loop as it is.
            var ignored: [ConnectionID] = []
            let lease = takeConnection(loop: next.loop, now: nil, closing: &ignored)
            action.grant = (next.waiter, next.loop, lease)
        }
        return action
    }

    /// The leased connection `id` failed before it could serve (a stale
    /// kept-alive connection): close it and carry the same lease on a new one.
    public mutating func replace(_ id: ConnectionID) -> ConnectionID {
        guard let connection = connections[id], case .leased = connection.state else {
            preconditionFailure("replace of connection \(id), which is not leased")
        }
        connections[id] = nil
        let replacement = nextConnectionID
        nextConnectionID += 1
        connections[replacement] = Connection(loop: connection.loop, state: .leased)
        return replacement
    }

    /// Takes a waiter out of the queue (its deadline passed). `nil` when it
    /// already got a lease or was never queued: then it must not be failed.
    public mutating func cancelWaiter(_ id: WaiterID) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index).waiter
    }

    /// Idle connections of `loop` past ``idleTimeout``, taken out to close.
    public mutating func expireIdle(loop: Int, now: Clock.Instant) -> [ConnectionID] {
        var expired: [ConnectionID] = []
        var kept: [ConnectionID] = []
        for id in idle[loop] {
            if case .idle(let since)? = connections[id]?.state, since.advanced(by: idleTimeout) <= now {
                connections[id] = nil
                expired.append(id)
            } else {
                kept.append(id)
            }
        }
        idle[loop] = kept
        return expired
    }

    /// The idle connection `id` ended by itself (the upstream closed it):
    /// taken out, to be closed. False when it is not idle (it is leased,
    /// and its exchange will report the close), or not known any more.
    public mutating func removeIdle(_ id: ConnectionID) -> Bool {
        guard let connection = connections[id], case .idle = connection.state,
              let index = idle[connection.loop].firstIndex(of: id) else { return false }
        idle[connection.loop].remove(at: index)
        connections[id] = nil
        return true
    }

    /// Refuses every later lease, takes out every idle connection and every
    /// waiter. Leased connections close when released.
    public mutating func shutDown() -> ShutdownAction {
        isShutDown = true
        var action = ShutdownAction()
        for (loop, ids) in idle.enumerated() {
            for id in ids {
                connections[id] = nil
                action.close.append((loop, id))
            }
        }
        idle = Array(repeating: [], count: idle.count)
        action.waiters = waiters.map(\.waiter)
        waiters.removeAll()
        return action
    }

    /// The freshest idle connection of `loop`, skipping (and closing) ones
    /// past the idle timeout when `now` is given; else a new connection id.
    private mutating func takeConnection(loop: Int, now: Clock.Instant?, closing: inout [ConnectionID]) -> Lease {
        while let id = idle[loop].popLast() {
            guard case .idle(let since)? = connections[id]?.state else {
                preconditionFailure("idle stack holds connection \(id), which is not idle")
            }
            if let now, since.advanced(by: idleTimeout) <= now {
                connections[id] = nil
                closing.append(id)
                continue
            }
            connections.updateValue(Connection(loop: loop, state: .leased), forKey: id)
            return .idle(id)
        }
        let id = nextConnectionID
        nextConnectionID += 1
        connections[id] = Connection(loop: loop, state: .leased)
        return .create(id)
    }
}
