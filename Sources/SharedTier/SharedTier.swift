package import GatewayMetrics
import Dispatch
package import EventTransport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import Logging
import Synchronization

/// The shared tier: one Redis that the replicas of a deployment share, so
/// that what one fetched the others answer from (contract section "Many
/// replicas: the shared tier").
///
/// One ``RedisConnection`` per event loop, run by that loop; a call uses
/// its own loop's connection, so no call changes threads for Redis. Redis
/// never decides an answer's success: whatever fails (no connection, a
/// timeout, garbage) counts in `gateway_shared_cache_errors_total`, is
/// logged at most once per 10 s, and the call carries on as without Redis.
package final class SharedTier: Sendable {
    /// Each loop's connection, in the loop's context: a call reads its
    /// own loop's by index.
    let connections = LoopSlot<RedisConnection>()
    let ordered: [RedisConnection]
    /// Each loop's lookups of the current turn, sent together.
    let lookupBatches = LoopSlot<LoopTurnBatch<AskedLookup>>()
    /// Each loop's releases of the current turn, sent together.
    let releaseBatches = LoopSlot<LoopTurnBatch<ReleaseGroup>>()
    /// Each loop's fetches holding leases, renewed together.
    let renewals = LoopSlot<SharedLeaseRenewals>()
    package let keys: SharedTierKeys
    package let metrics: GatewayMetrics
    package let log: RateLimitedLog
    package let maxTTLSeconds: Int
    let maxStaleSeconds: Int
    /// The replica's subscriber connection (on the first loop), for the
    /// outcomes of fetches claimed by other replicas.
    let subscriber: RedisConnection?
    package let subscriberReady: ReadyFlag
    /// The drivers waiting for other replicas' outcomes.
    package let waiters: SharedOutcomeWaiters
    /// The outcomes channel: `{prefix}v1:outcomes`.
    package let channel: String
    /// ``channel``'s bytes, for the publishes of releases.
    package let channelBytes: [UInt8]
    /// Whether fetches coalesce across replicas (claims, the outcomes
    /// channel), besides sharing the cache.
    package let coalesces: Bool
    /// Whether the replica uses Redis now (`gateway_shared_tier_up`).
    package let circuit: SharedTierCircuit
    /// How long a fetch waits on another replica's lease before fetching
    /// on its own (`UPSTREAM_TIMEOUT_MS`); nil: until its deadline.
    package let waitPatience: Duration?
    /// How long a claim lives unless renewed: a replica that dies mid-fetch
    /// holds its identifiers at most this long.
    package static let lease = Duration.seconds(1)
    /// How often a renewal goes out while a claimed fetch runs.
    package static let renewal = Duration.milliseconds(300)
    /// How long a waiter waits before looking at the entries and the claims
    /// again: a lost message costs at most this.
    package static let poll = Duration.milliseconds(250)
    /// This replica's part of every claim token (random per process).
    package let replicaToken: String
    /// What entries' fresh-until (wall time, read by every replica), the
    /// waits' polls and the lease renewals are timed on.
    package let clock: GatewayClock
    let nextClaim = Atomic<Int>(0)

    /// - Parameters:
    ///   - loops: the gateway's loops; each gets its connection.
    ///   - maxTTLSeconds: `GATEWAY_CACHE_MAX_TTL_S` (0 stores nothing).
    ///   - maxStaleSeconds: `GATEWAY_CACHE_MAX_STALE_S`.
    ///   - coalesces: whether fetches coalesce across replicas (false: the
    ///     cache is shared, and no subscriber is made).
    ///   - upstreamMaxIDs: `UPSTREAM_MAX_IDS`: a message naming more
    ///     identifiers is dropped unread.
    ///   - waitPatience: `UPSTREAM_TIMEOUT_MS`: no lease is waited on
    ///     longer, nor with less time left.
    ///   - clock: the system's, or a test's manual clock. Redis's own key
    ///     expiries stay on Redis's clock.
    package init(configuration: RedisSettings, loops: [EventLoop], maxTTLSeconds: Int, maxStaleSeconds: Int, coalesces: Bool = false, upstreamMaxIDs: Int = 1_000, waitPatience: Duration? = nil, metrics: GatewayMetrics, logger: Logger, clock: GatewayClock = .system) {
        self.waitPatience = waitPatience
        self.clock = clock
        let endpoint = RedisEndpoint(
            host: configuration.host,
            port: configuration.port,
            password: configuration.password,
            database: configuration.database,
            commandTimeout: .milliseconds(configuration.timeoutMS),
            connectTimeout: max(.seconds(1), .milliseconds(configuration.timeoutMS))
        )
        let log = RateLimitedLog(logger: logger, interval: .seconds(10))
        let circuit = SharedTierCircuit(connections: loops.count, metrics: metrics, log: log, endpoint: configuration.redactedURL)
        self.circuit = circuit
        let observer = SharedTierObserver(log: log, endpoint: configuration.redactedURL, metrics: metrics, circuit: circuit)
        var ordered: [RedisConnection] = []
        for loop in loops {
            ordered.append(RedisConnection(loop: loop, endpoint: endpoint, observer: observer))
        }
        self.ordered = ordered
        let channel = "\(configuration.prefix)v1:outcomes"
        let waiters = SharedOutcomeWaiters(maxIdentifiers: upstreamMaxIDs) { metrics.recordSharedErrors(1) }
        self.waiters = waiters
        let subscriberReady = ReadyFlag()
        self.subscriberReady = subscriberReady
        if coalesces, let first = loops.first {
            let subscriberObserver = SubscriberObserver(flag: subscriberReady, inner: observer, waiters: waiters)
            self.subscriber = RedisConnection(loop: first, endpoint: endpoint, observer: subscriberObserver, subscribingTo: [channel]) { _, payload in
                waiters.dispatch(payload)
            }
        } else {
            self.subscriber = nil
        }
        self.channel = channel
        self.channelBytes = Array(channel.utf8)
        self.coalesces = coalesces
        self.replicaToken = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        self.keys = SharedTierKeys(prefix: configuration.prefix)
        self.metrics = metrics
        self.log = log
        self.maxTTLSeconds = maxTTLSeconds
        self.maxStaleSeconds = maxStaleSeconds
        // When one connection finds Redis out of reach, every other one is
        // dropped and proves itself again: none costs a call a timeout.
        // Unowned: the connections hold the circuit (through their
        // observer), so a strong capture would keep them, and the tier,
        // alive for ever; the tier owns the circuit and outlives it.
        circuit.onTrip = { [unowned self] reason in resetConnections(reason) }
        // Each batch's flush, set once (not a closure per call), before
        // its loop holds it. Unowned: the tier owns the batches and
        // outlives them.
        for (loop, connection) in zip(loops, ordered) {
            let lookupBatch = LoopTurnBatch<AskedLookup>(loop: loop)
            lookupBatch.flush = { [unowned self] in sendLookups($0, on: loop) }
            let releaseBatch = LoopTurnBatch<ReleaseGroup>(loop: loop)
            releaseBatch.flush = { [unowned self] groups in sendReleases(groups, on: connection) }
            connections.fill(loop, with: connection)
            lookupBatches.fill(loop, with: lookupBatch)
            releaseBatches.fill(loop, with: releaseBatch)
            renewals.fill(loop, with: SharedLeaseRenewals(loop: loop, period: Self.renewal, clock: clock))
        }
    }

    /// The lease renewals of `loop`, if it is one of the tier's loops. On
    /// `loop`.
    package func renewals(for loop: EventLoop) -> SharedLeaseRenewals? {
        loop.context[renewals]
    }

    /// The release batch of `loop`, if it is one of the tier's loops. On
    /// `loop`.
    package func releaseBatch(for loop: EventLoop) -> LoopTurnBatch<ReleaseGroup>? {
        loop.context[releaseBatches]
    }

    /// Starts every connection connecting, in the background.
    package func start() {
        for connection in ordered + (subscriber.map { [$0] } ?? []) {
            connection.loop.execute { connection.start() }
        }
    }

    /// A token no other claim of any replica has.
    package func makeClaimToken() -> String {
        "\(replicaTokenPrefix)\(nextClaim.add(1, ordering: .relaxed).oldValue)"
    }

    /// How every claim token of this replica starts (and no other
    /// replica's: the replica token is random, then a dash).
    package var replicaTokenPrefix: String { "\(replicaToken)-" }

    /// `loop`'s connection, ready, and the subscriber ready: only then
    /// does a fetch coalesce across replicas.
    package func coalescingConnection(on loop: EventLoop) -> RedisConnection? {
        guard subscriber != nil, circuit.isUp, subscriberReady.isSet,
              let connection = loop.context[connections], connection.isReady else { return nil }
        return connection
    }

    /// Drops every connection (and the subscriber) on its own loop, to be
    /// made again: the tier went down.
    func resetConnections(_ reason: String) {
        for connection in ordered + (subscriber.map { [$0] } ?? []) {
            connection.loop.execute { connection.reset(reason) }
        }
    }

    /// Closes every connection and waits until each loop has done so. From
    /// a thread that is not a loop, before the loops stop.
    package func close() {
        circuit.onTrip = nil
        let done = DispatchGroup()
        for connection in ordered + (subscriber.map { [$0] } ?? []) {
            done.enter()
            let queued = connection.loop.execute {
                connection.close()
                done.leave()
            }
            if !queued { done.leave() }
        }
        done.wait()
    }

    /// `loop`'s connection when it is ready to take a command; nil for a
    /// loop that has none (nothing to count), or while the tier is down or
    /// the connection not ready (counted as an error: the command was not
    /// sent). Either way the caller goes on without Redis, with no wait.
    func readyConnection(on loop: EventLoop) -> RedisConnection? {
        guard let connection = loop.context[connections] else { return nil }
        guard circuit.isUp, connection.isReady else {
            metrics.recordSharedErrors(1)
            return nil
        }
        return connection
    }

    /// A stale window in the entry's range: 0 to `cap` (at most 7 days).
    package static func window(_ seconds: Int?, cap: Int) -> Int32 {
        Int32(clamping: min(max(seconds ?? 0, 0), cap, Int(SharedCacheEntry.windowRange.upperBound)))
    }

    /// A reply for a log line, short and without values.
    package static func describe(_ value: RedisValue) -> String {
        switch value {
        case .status(let text): "status \(text.prefix(80))"
        case .error(let text): "error \(text.prefix(120))"
        case .integer(let number): "integer \(number)"
        case .bulk(let bytes): "bulk of \(bytes.count) bytes"
        case .null: "nil"
        case .array(let values): "array of \(values.count)"
        }
    }
}

/// Whether the subscriber is connected and subscribed, readable from any loop.
package final class ReadyFlag: Sendable {
    private let value = Atomic<Bool>(false)
    package var isSet: Bool { value.load(ordering: .acquiring) }
    package func set(_ ready: Bool) { value.store(ready, ordering: .releasing) }
}
