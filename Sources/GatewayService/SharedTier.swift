import Dispatch
import EventTransport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import Logging
import ProductsDomain
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
final class SharedTier: Sendable {
    private let connections: [ObjectIdentifier: RedisConnection]
    private let ordered: [RedisConnection]
    let keys: SharedTierKeys
    let metrics: GatewayMetrics
    let log: RateLimitedLog
    private let maxTTLSeconds: Int
    private let maxStaleSeconds: Int
    /// The replica's subscriber connection (on the first loop), for the
    /// outcomes of fetches claimed by other replicas.
    private let subscriber: RedisConnection?
    let subscriberReady: ReadyFlag
    /// The drivers waiting for other replicas' outcomes.
    let waiters: SharedOutcomeWaiters
    /// The outcomes channel: `{prefix}v1:outcomes`.
    let channel: String
    /// How long a claim lives: `UPSTREAM_TIMEOUT_MS` × (1 + `UPSTREAM_RETRIES`).
    let claimLapse: Duration
    /// This replica's part of every claim token (random per process).
    let replicaToken: String
    /// How often a waiting fetch checks that Redis still answers.
    let probeInterval: Duration
    private let nextClaim = Atomic<Int>(0)

    /// - Parameters:
    ///   - loops: the gateway's loops; each gets its connection.
    ///   - maxTTLSeconds: `GATEWAY_CACHE_MAX_TTL_S` (0 stores nothing).
    ///   - maxStaleSeconds: `GATEWAY_CACHE_MAX_STALE_S`.
    ///   - claimLapse: how long a claim lives (0 turns coalescing across
    ///     replicas off: then no subscriber is made).
    init(configuration: GatewayConfiguration.Redis, loops: [EventLoop], maxTTLSeconds: Int, maxStaleSeconds: Int, claimLapse: Duration = .zero, metrics: GatewayMetrics, logger: Logger) {
        let endpoint = RedisEndpoint(
            host: configuration.host,
            port: configuration.port,
            password: configuration.password,
            database: configuration.database,
            commandTimeout: .milliseconds(configuration.timeoutMS),
            connectTimeout: max(.seconds(1), .milliseconds(configuration.timeoutMS))
        )
        let log = RateLimitedLog(logger: logger, interval: .seconds(10))
        let observer = SharedTierObserver(log: log, endpoint: configuration.redactedURL, metrics: metrics)
        var connections: [ObjectIdentifier: RedisConnection] = [:]
        var ordered: [RedisConnection] = []
        for loop in loops {
            let connection = RedisConnection(loop: loop, endpoint: endpoint, observer: observer)
            connections[ObjectIdentifier(loop)] = connection
            ordered.append(connection)
        }
        self.connections = connections
        self.ordered = ordered
        let channel = "\(configuration.prefix)v1:outcomes"
        let waiters = SharedOutcomeWaiters()
        self.waiters = waiters
        let subscriberReady = ReadyFlag()
        self.subscriberReady = subscriberReady
        if claimLapse > .zero, let first = loops.first {
            let subscriberObserver = SubscriberObserver(flag: subscriberReady, inner: observer, waiters: waiters)
            self.subscriber = RedisConnection(loop: first, endpoint: endpoint, observer: subscriberObserver, subscribingTo: [channel]) { _, payload in
                waiters.dispatch(payload)
            }
        } else {
            self.subscriber = nil
        }
        self.channel = channel
        self.claimLapse = claimLapse
        self.replicaToken = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        self.probeInterval = max(.milliseconds(200), .milliseconds(configuration.timeoutMS * 4))
        self.keys = SharedTierKeys(prefix: configuration.prefix)
        self.metrics = metrics
        self.log = log
        self.maxTTLSeconds = maxTTLSeconds
        self.maxStaleSeconds = maxStaleSeconds
    }

    /// Starts every connection connecting, in the background.
    func start() {
        for connection in ordered + (subscriber.map { [$0] } ?? []) {
            connection.loop.execute { connection.start() }
        }
    }

    /// A token no other claim of any replica has.
    func makeClaimToken() -> String {
        "\(replicaToken)-\(nextClaim.add(1, ordering: .relaxed).oldValue)"
    }

    /// The calling loop's connection, ready, and the subscriber ready:
    /// only then does a fetch coalesce across replicas.
    func coalescingConnection() -> RedisConnection? {
        guard subscriber != nil, subscriberReady.isSet, let loop = EventLoop.current,
              let connection = connections[ObjectIdentifier(loop)], connection.isReady else { return nil }
        return connection
    }

    /// Closes every connection and waits until each loop has done so. From
    /// a thread that is not a loop, before the loops stop.
    func close() {
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

    /// The calling loop's connection when it is ready to take a command;
    /// nil off the loops (nothing to count) or while it is not ready
    /// (counted as an error: the command was not sent).
    private func readyConnection() -> RedisConnection? {
        guard let loop = EventLoop.current, let connection = connections[ObjectIdentifier(loop)] else { return nil }
        guard connection.isReady else {
            metrics.recordSharedErrors(1)
            return nil
        }
        return connection
    }

    /// One `MGET` of `identifiers`' entries: each slot is the entry Redis
    /// holds, or nil (none, or one that does not parse: ignored and
    /// counted). Nil as a whole when Redis could not be asked.
    func lookup(scope: FetchScope, identifiers: [String]) async -> [SharedCacheEntry?]? {
        await withCheckedContinuation { continuation in
            lookup(scope: scope, identifiers: identifiers) { continuation.resume(returning: $0) }
        }
    }

    /// ``lookup(scope:identifiers:)`` for a call that runs on its loop
    /// without a task: `completion` runs on this loop, once, when Redis has
    /// answered (or at once when it cannot be asked).
    func lookup(scope: FetchScope, identifiers: [String], completion: @escaping @Sendable ([SharedCacheEntry?]?) -> Void) {
        // `GATEWAY_CACHE_MAX_TTL_S=0`: nothing is reused, from memory or Redis.
        guard maxTTLSeconds > 0, let connection = readyConnection() else {
            completion(nil)
            return
        }
        var arguments: [[UInt8]] = [Array("MGET".utf8)]
        arguments.reserveCapacity(identifiers.count + 1)
        for identifier in identifiers { arguments.append(keys.entry(scope, identifier)) }
        connection.send(arguments) { [self] reply in
            completion(entries(of: reply, identifiers: identifiers))
        }
    }

    /// The entries of an `MGET` reply, in `identifiers`' order.
    private func entries(of reply: Result<RedisValue, RedisError>, identifiers: [String]) -> [SharedCacheEntry?]? {
        switch reply {
        case .success(.array(let values)) where values.count == identifiers.count:
            var garbage = 0
            var entries: [SharedCacheEntry?] = []
            entries.reserveCapacity(values.count)
            for (index, value) in values.enumerated() {
                switch value {
                case .bulk(let bytes):
                    let entry = SharedCacheEntry(decoding: bytes, identifier: identifiers[index])
                    if entry == nil { garbage += 1 }
                    entries.append(entry)
                case .null:
                    entries.append(nil)
                default:
                    garbage += 1
                    entries.append(nil)
                }
            }
            if garbage > 0 {
                metrics.recordSharedErrors(garbage)
                log.warning("the shared tier holds entries that do not parse; they are ignored", metadata: ["count": "\(garbage)"])
            }
            return entries
        case .success(let other):
            metrics.recordSharedErrors(1)
            log.warning("Redis answered MGET unexpectedly", metadata: ["reply": "\(Self.describe(other))"])
            return nil
        case .failure(let error):
            metrics.recordSharedErrors(1)
            log.warning("a shared-tier lookup failed; answering without it", metadata: ["error": "\(error.message)"])
            return nil
        }
    }

    /// Stores what an upstream success may keep, for as long as it may
    /// answer (fresh, then its stale windows): one `SET key value PX ms`
    /// per identifier, pipelined, not waited for.
    func store(_ page: SourcePage, scope: FetchScope, identifiers: [String]) {
        guard let maxAge = page.maxAgeSeconds, maxAge > 0, maxTTLSeconds > 0 else { return }
        guard let connection = readyConnection() else { return }
        store(page, scope: scope, identifiers: identifiers, on: connection)
    }

    /// ``store(_:scope:identifiers:)`` on a connection already known ready.
    func store(_ page: SourcePage, scope: FetchScope, identifiers: [String], on connection: RedisConnection) {
        guard let maxAge = page.maxAgeSeconds, maxAge > 0, maxTTLSeconds > 0 else { return }
        let nowUnixMS = Self.unixMilliseconds()
        let fresh = Int64(min(maxAge, maxTTLSeconds)) * 1000
        let staleIfError = Int32(min(page.staleIfErrorSeconds ?? 0, maxStaleSeconds, Int(Int32.max)))
        let revalidate = Int32(min(page.staleWhileRevalidateSeconds ?? 0, maxStaleSeconds, Int(Int32.max)))
        let metrics = self.metrics
        let log = self.log
        for identifier in identifiers {
            let entry = SharedCacheEntry(
                answer: page.encodedProducts[identifier].map(ProductAnswer.product) ?? .unknown,
                freshUntilUnixMS: nowUnixMS + fresh,
                staleIfErrorSeconds: staleIfError,
                revalidateSeconds: revalidate
            )
            let keep = entry.keepMilliseconds(nowUnixMS: nowUnixMS)
            let arguments: [[UInt8]] = [
                Array("SET".utf8), keys.entry(scope, identifier), entry.encoded, Array("PX".utf8), Array(String(keep).utf8),
            ]
            connection.send(arguments) { result in
                switch result {
                case .success(.status("OK")):
                    break
                case .success(let other):
                    metrics.recordSharedErrors(1)
                    log.warning("Redis refused a shared-tier store", metadata: ["reply": "\(Self.describe(other))"])
                case .failure(let error):
                    metrics.recordSharedErrors(1)
                    log.warning("a shared-tier store failed", metadata: ["error": "\(error.message)"])
                }
            }
        }
    }

    static func unixMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// A reply for a log line, short and without values.
    static func describe(_ value: RedisValue) -> String {
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
final class ReadyFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set(_ ready: Bool) { value.store(ready, ordering: .releasing) }
}

/// The subscriber's ups and downs: the flag, then the common log.
private struct SubscriberObserver: RedisConnectionObserver {
    let flag: ReadyFlag
    let inner: SharedTierObserver
    let waiters: SharedOutcomeWaiters

    func redisConnected(loop: String) {
        flag.set(true)
    }

    func redisConnectionClosed(loop: String) {
        flag.set(false)
    }

    func redisConnectionFailed(loop: String, message: String, wasReady: Bool) {
        flag.set(false)
        // Nothing published from now on reaches this replica.
        if wasReady { waiters.subscriberLost() }
        inner.log.warning("the shared tier's subscriber is unavailable; fetching without coalescing across replicas", metadata: [
            "redis": "\(inner.endpoint)", "error": "\(message)",
        ])
    }
}

/// Logs the connections' ups and downs through the tier's rate limit.
private struct SharedTierObserver: RedisConnectionObserver {
    let log: RateLimitedLog
    let endpoint: String
    let metrics: GatewayMetrics

    func redisConnected(loop: String) {
        metrics.recordSharedTierConnections(+1)
        log.info("connected to the shared tier", metadata: ["redis": "\(endpoint)", "loop": "\(loop)"])
    }

    func redisConnectionClosed(loop: String) {
        metrics.recordSharedTierConnections(-1)
    }

    func redisConnectionFailed(loop: String, message: String, wasReady: Bool) {
        if wasReady { metrics.recordSharedTierConnections(-1) }
        log.warning("the shared tier is unavailable; carrying on without it and reconnecting", metadata: [
            "redis": "\(endpoint)", "loop": "\(loop)", "error": "\(message)",
        ])
    }
}

/// At most one line per `interval` (per level group), with the number of
/// lines left out since the last one: Redis failing under load must not
/// flood the log.
final class RateLimitedLog: Sendable {
    private struct State {
        var lastWarning: ContinuousClock.Instant?
        var suppressedWarnings = 0
        var lastInfo: ContinuousClock.Instant?
    }

    private let logger: Logger
    private let interval: Duration
    private let state = Mutex(State())

    init(logger: Logger, interval: Duration) {
        self.logger = logger
        self.interval = interval
    }

    func warning(_ message: @autoclosure () -> String, metadata: Logger.Metadata) {
        let now = ContinuousClock.now
        let suppressed: Int? = state.withLock { state in
            if let last = state.lastWarning, now - last < interval {
                state.suppressedWarnings += 1
                return nil
            }
            state.lastWarning = now
            defer { state.suppressedWarnings = 0 }
            return state.suppressedWarnings
        }
        guard let suppressed else { return }
        var metadata = metadata
        if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
        logger.warning("\(message())", metadata: metadata)
    }

    func info(_ message: @autoclosure () -> String, metadata: Logger.Metadata) {
        let now = ContinuousClock.now
        let due = state.withLock { state in
            if let last = state.lastInfo, now - last < interval { return false }
            state.lastInfo = now
            return true
        }
        if due { logger.info("\(message())", metadata: metadata) }
    }
}

extension SharedTier {
    /// The tier of `configuration`, connecting in the background; nil
    /// without `GATEWAY_REDIS_URL`. Readiness never waits for it.
    static func make(configuration: GatewayConfiguration, group: EventLoopGroup, metrics: GatewayMetrics, logger: Logger) -> SharedTier? {
        guard let redis = configuration.redis else { return nil }
        let tier = SharedTier(
            configuration: redis,
            loops: group.loops,
            maxTTLSeconds: configuration.cacheMaxTTLSeconds,
            maxStaleSeconds: configuration.cacheMaxStaleSeconds,
            claimLapse: .milliseconds(configuration.upstreamTimeoutMS * (1 + configuration.upstreamRetries)),
            metrics: metrics,
            logger: logger
        )
        tier.start()
        return tier
    }
}
