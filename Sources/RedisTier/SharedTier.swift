import GatewayMetrics
import MemoryTier
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
package final class SharedTier: Sendable {
    private let connections: [ObjectIdentifier: RedisConnection]
    private let ordered: [RedisConnection]
    /// Each loop's lookups of the current turn, sent together.
    private let lookupBatches: [ObjectIdentifier: SharedLookupBatch]
    /// Each loop's releases of the current turn, sent together.
    private let releaseBatches: [ObjectIdentifier: SharedReleaseBatch]
    /// Each loop's fetches holding leases, renewed together.
    private let renewals: [ObjectIdentifier: SharedLeaseRenewals]
    package let keys: SharedTierKeys
    package let metrics: GatewayMetrics
    package let log: RateLimitedLog
    package let maxTTLSeconds: Int
    private let maxStaleSeconds: Int
    /// The replica's subscriber connection (on the first loop), for the
    /// outcomes of fetches claimed by other replicas.
    private let subscriber: RedisConnection?
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
    private let nextClaim = Atomic<Int>(0)

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
    package init(configuration: RedisSettings, loops: [EventLoop], maxTTLSeconds: Int, maxStaleSeconds: Int, coalesces: Bool = false, upstreamMaxIDs: Int = 1_000, waitPatience: Duration? = nil, metrics: GatewayMetrics, logger: Logger) {
        self.waitPatience = waitPatience
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
        var connections: [ObjectIdentifier: RedisConnection] = [:]
        var ordered: [RedisConnection] = []
        var lookupBatches: [ObjectIdentifier: SharedLookupBatch] = [:]
        var releaseBatches: [ObjectIdentifier: SharedReleaseBatch] = [:]
        var renewals: [ObjectIdentifier: SharedLeaseRenewals] = [:]
        for loop in loops {
            renewals[ObjectIdentifier(loop)] = SharedLeaseRenewals(loop: loop, period: Self.renewal)
            releaseBatches[ObjectIdentifier(loop)] = SharedReleaseBatch(loop: loop)
            let connection = RedisConnection(loop: loop, endpoint: endpoint, observer: observer)
            connections[ObjectIdentifier(loop)] = connection
            lookupBatches[ObjectIdentifier(loop)] = SharedLookupBatch(loop: loop)
            ordered.append(connection)
        }
        self.connections = connections
        self.lookupBatches = lookupBatches
        self.releaseBatches = releaseBatches
        self.renewals = renewals
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
        // Each batch's flush, set once (not a closure per call). Unowned:
        // the tier owns the batches and outlives them.
        for loop in loops {
            lookupBatches[ObjectIdentifier(loop)]?.flush = { [unowned self] in sendLookups($0, on: loop) }
            let connection = connections[ObjectIdentifier(loop)]
            releaseBatches[ObjectIdentifier(loop)]?.flush = { [unowned self] groups in
                if let connection { sendReleases(groups, on: connection) }
            }
        }
    }

    /// The lease renewals of `loop`, if it is one of the tier's loops.
    package func renewals(for loop: EventLoop) -> SharedLeaseRenewals? {
        renewals[ObjectIdentifier(loop)]
    }

    /// The release batch of `loop`, if it is one of the tier's loops.
    package func releaseBatch(for loop: EventLoop) -> SharedReleaseBatch? {
        releaseBatches[ObjectIdentifier(loop)]
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
              let connection = connections[ObjectIdentifier(loop)], connection.isReady else { return nil }
        return connection
    }

    /// Drops every connection (and the subscriber) on its own loop, to be
    /// made again: the tier went down.
    private func resetConnections(_ reason: String) {
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
    private func readyConnection(on loop: EventLoop) -> RedisConnection? {
        guard let connection = connections[ObjectIdentifier(loop)] else { return nil }
        guard circuit.isUp, connection.isReady else {
            metrics.recordSharedErrors(1)
            return nil
        }
        return connection
    }

    /// What one lookup found: each identifier's entry (nil: none, or one
    /// that does not parse, ignored and counted), and, when the lookup
    /// claimed, the leases it took for those without a fresh entry.
    package struct Lookup: Sendable {
        package var entries: [SharedCacheEntry?]
        package var claims: SharedPreclaim?
    }

    /// The entries of `identifiers` and, when fetches coalesce across
    /// replicas, a lease (``SharedLease``) in the entry key of each that has
    /// no entry, in one round trip (one `SET … NX PX … GET` per key, in one
    /// script, ``lookupScript``): a miss costs one Redis round trip before
    /// the upstream. `completion` runs on this loop, once, when Redis has
    /// answered (or at once, with nil, when it cannot be asked). The leases
    /// belong to the fetches the caller starts (``SharedPreclaim``); those it
    /// does not start must be released (``release(_:)``).
    package func lookup(scope: FetchScope, identifiers: [String], on loop: EventLoop, completion: @escaping @Sendable (Lookup?) -> Void) {
        // `GATEWAY_CACHE_MAX_TTL_S=0`: nothing is reused, from memory or Redis.
        guard maxTTLSeconds > 0, let connection = readyConnection(on: loop) else {
            completion(nil)
            return
        }
        guard coalescingConnection(on: loop) != nil else {
            var command = RedisCommand(reservingBytes: 64 * (identifiers.count + 1), arguments: identifiers.count + 1)
            command.append("MGET")
            keys.append("v1:p:", scope, identifiers, to: &command)
            command.replyElements = identifiers.count
            connection.send(command) { [self] reply in
                completion(entries(of: reply, identifiers: identifiers).map { Lookup(entries: $0, claims: nil) })
            }
            return
        }
        // Gathered with the other lookups of this loop turn: one script
        // for all of them (each distinct key once, one write to the socket
        // and one reply to read), sent when the turn's callbacks are done.
        let asked = SharedLookupBatch.Asked(scope: scope, identifiers: identifiers, completion: completion)
        guard let batch = lookupBatches[ObjectIdentifier(loop)], batch.add(asked) else {
            sendLookups([asked], on: loop)
            return
        }
    }

    /// One lookup script for the lookups of one loop turn. Each distinct
    /// (scope, identifier) is asked once; a lease it wins goes to the first
    /// call that asked, so only one call's fetch adopts it (the others join
    /// that fetch in process, or release nothing).
    private func sendLookups(_ batch: [SharedLookupBatch.Asked], on loop: EventLoop) {
        // A turn can gather far more identifiers than one call may ask (a
        // batch of GATEWAY_MAX_BATCH calls, several batches): in
        // scripts of at most `maxKeysPerLookup` keys, so no reply has
        // more elements than the connection reads (20000) and none of them
        // drops it.
        var start = 0
        var keys = 0
        for index in batch.indices {
            let count = batch[index].identifiers.count
            if keys + count > Self.maxKeysPerLookup, index > start {
                sendLookupScript(Array(batch[start ..< index]), on: loop)
                start = index
                keys = 0
            }
            keys += count
        }
        sendLookupScript(start == 0 ? batch : Array(batch[start...]), on: loop)
    }

    /// The most keys one lookup script asks: one call asks at most
    /// `GATEWAY_MAX_IDS` (10000 at the largest), and the connection reads
    /// replies of at most 20000 elements.
    package static let maxKeysPerLookup = 10_000

    private func sendLookupScript(_ batch: [SharedLookupBatch.Asked], on loop: EventLoop) {
        guard let connection = readyConnection(on: loop) else {
            for asked in batch { asked.completion(nil) }
            return
        }
        // Every call's keys, one after the other, as asked. A key asked
        // again in the turn is not run again: the script answers it with
        // the position of its first (so a turn of many calls for the same
        // large entries gets each entry once, not once per call; and only
        // the first call wins its lease). Finding the distinct keys here
        // cost a dictionary of every key asked, every turn.
        let keyCount = batch.reduce(0) { $0 + $1.identifiers.count }
        let token = makeClaimToken()
        // The lookup script: one `SET entry-key lease NX PX 1000 GET` per
        // key; each element of the reply is the entry (nothing written), or
        // nil (no entry: the lease is this call's).
        var command = RedisCommand.evalsha(Self.lookupScript, keyCount: keyCount, reservingBytes: keyCount * 112 + token.utf8.count + 64, arguments: keyCount + 2)
        command.replyElements = keyCount
        for asked in batch {
            keys.append("v1:p:", asked.scope, asked.identifiers, to: &command)
        }
        SharedLease.append(token: token, to: &command)
        command.append(Self.leaseMilliseconds)
        connection.eval(Self.lookupScript, command) { [self] reply in
            guard case .success(.array(let values)) = reply, values.count == keyCount else {
                // The script may have run, whatever came back: leases
                // nobody adopts are given back. (A failure drops the
                // connection with it: those leases lapse within a second.)
                if case .success = reply {
                    for asked in batch { release(asked.identifiers, scope: asked.scope, token: token, on: connection, leasesInEntryKeys: true) }
                }
                for asked in batch {
                    asked.completion(entries(of: reply, identifiers: asked.identifiers).map { Lookup(entries: $0, claims: nil) })
                }
                return
            }
            var garbage = 0
            var position = 0
            for asked in batch {
                var found: [SharedCacheEntry?] = []
                found.reserveCapacity(asked.identifiers.count)
                // Nil while every identifier so far won its lease (the usual
                // miss: no set is made).
                var wonSome: Set<String>?
                for (index, identifier) in asked.identifiers.enumerated() {
                    defer { position += 1 }
                    if wonSome == nil, values[position] != .null { wonSome = Set(asked.identifiers[..<index]) }
                    switch values[position] {
                    case .null:
                        // The lease is this call's: its fetch adopts it.
                        found.append(nil)
                        wonSome?.insert(identifier)
                    case .bulk(let bytes) where SharedLease.isLease(bytes):
                        // Another replica's lease: the fetch claims it by the
                        // claim script, which flags the wait atomically.
                        found.append(nil)
                    case .error:
                        // Not a string (a key of another type): the claim
                        // script takes it over.
                        found.append(nil)
                    case .integer(let first) where (1...position).contains(first):
                        // Asked before in this turn (the 1-based position of
                        // the first asking): that call holds the lease, if
                        // one was taken; an entry there answers this one too.
                        if case .bulk(let bytes) = values[first - 1], !SharedLease.isLease(bytes) {
                            let entry = SharedCacheEntry(decoding: bytes, identifier: identifier)
                            if entry == nil { garbage += 1 }
                            found.append(entry)
                        } else {
                            found.append(nil)
                        }
                    case .bulk(let bytes):
                        let entry = SharedCacheEntry(decoding: bytes, identifier: identifier)
                        if entry == nil { garbage += 1 }
                        found.append(entry)
                    default:
                        garbage += 1
                        found.append(nil)
                    }
                }
                let claims = wonSome.map { SharedPreclaim(token: token, scope: asked.scope, won: $0) }
                    ?? SharedPreclaim(token: token, scope: asked.scope, wonAllOf: asked.identifiers)
                asked.completion(Lookup(entries: found, claims: claims))
            }
            if garbage > 0 {
                metrics.recordSharedErrors(garbage)
                log.warning("the shared tier holds entries that do not parse; they are ignored", metadata: ["count": "\(garbage)"])
            }
        }
    }

    /// The shared-tier lookup: for each of `KEYS` (entry keys), `SET key
    /// ARGV[1] NX PX ARGV[2] GET`, whose reply is the entry there (nothing
    /// written) or nil (the lease `ARGV[1]` is written in its place); a key
    /// that came before in `KEYS` is answered with the (1-based) position
    /// of its first, and not run again, so the reply holds each entry once
    /// however many calls of the turn asked for it. One script for a loop
    /// turn's lookups, not a `MULTI` transaction: Redis answers it with one
    /// reply, where a transaction of n keys answers n + 2 (`OK`, n
    /// `QUEUED`, then `EXEC`'s), each of which the gateway reads and hiredis
    /// tracks. `pcall`: a key of another type is an error in its place (the
    /// claim script takes it over), not the whole lookup's.
    package static let lookupScript = RedisScript("""
        local found, first = {}, {}
        for i, key in ipairs(KEYS) do
          if first[key] then
            found[i] = first[key]
          else
            first[key] = i
            found[i] = redis.pcall('SET', key, ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
          end
        end
        return found
        """)

    private static let leaseMilliseconds = Array(String(lease.milliseconds).utf8)

    /// Gives back leases a lookup took that no fetch adopted.
    package func release(_ claims: SharedPreclaim, on loop: EventLoop) {
        guard claims.wonCount > 0, let connection = connections[ObjectIdentifier(loop)], connection.isReady else { return }
        release(claims.wonIdentifiers, scope: claims.scope, token: claims.token, on: connection, leasesInEntryKeys: true)
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
                case .bulk(let bytes) where SharedLease.isLease(bytes):
                    // Another replica's lease, where the entry will be.
                    entries.append(nil)
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
    package func store(_ page: SourcePage, scope: FetchScope, identifiers: [String], on loop: EventLoop) {
        guard let maxAge = page.maxAgeSeconds, maxAge > 0, maxTTLSeconds > 0 else { return }
        guard let connection = readyConnection(on: loop) else { return }
        store(page, scope: scope, identifiers: identifiers, on: connection)
    }

    /// ``store(_:scope:identifiers:)`` on a connection already known ready.
    package func store(_ page: SourcePage, scope: FetchScope, identifiers: [String], on connection: RedisConnection) {
        guard let entries = entryArguments(page, scope: scope, identifiers: identifiers) else { return }
        let metrics = self.metrics
        let log = self.log
        for index in identifiers.indices {
            let (entry, keep) = entries.items[index]
            var command = RedisCommand(reservingBytes: 128 + entry.encodedCount, arguments: 5)
            command.append("SET")
            keys.append("v1:p:", scope, identifiers[index], to: &command)
            entry.append(to: &command)
            command.append("PX")
            command.append(keep)
            connection.send(command) { result in
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

    /// The entries of a page, for Redis: each identifier's entry (written
    /// into the command that stores it, not encoded apart) and how long
    /// Redis keeps it (ms).
    package struct EntryArguments {
        /// Each identifier's entry and time to keep, in order.
        package var items: [(entry: SharedCacheEntry, keepMilliseconds: Int64)] = []
    }

    /// What storing `page` for `identifiers` writes (fresh, then its stale
    /// windows); nil when the page may not be kept.
    package func entryArguments(_ page: SourcePage, scope: FetchScope, identifiers: [String]) -> EntryArguments? {
        guard let maxAge = page.maxAgeSeconds, maxAge > 0, maxTTLSeconds > 0 else { return nil }
        let nowUnixMS = Self.unixMilliseconds()
        let fresh = Int64(min(maxAge, maxTTLSeconds)) * 1000
        // Clamped into the entry's ranges, whoever made the page (the
        // upstream, or another replica's message).
        let staleIfError = Self.window(page.staleIfErrorSeconds, cap: maxStaleSeconds)
        let revalidate = Self.window(page.staleWhileRevalidateSeconds, cap: maxStaleSeconds)
        var arguments = EntryArguments()
        arguments.items.reserveCapacity(identifiers.count)
        for identifier in identifiers {
            let entry = SharedCacheEntry(
                answer: page.encodedProducts[identifier].map(ProductAnswer.product) ?? .unknown,
                freshUntilUnixMS: nowUnixMS + fresh,
                staleIfErrorSeconds: staleIfError,
                revalidateSeconds: revalidate
            )
            arguments.items.append((entry, entry.keepMilliseconds(nowUnixMS: nowUnixMS)))
        }
        return arguments
    }

    /// A stale window in the entry's range: 0 to `cap` (at most 7 days).
    package static func window(_ seconds: Int?, cap: Int) -> Int32 {
        Int32(clamping: min(max(seconds ?? 0, 0), cap, Int(SharedCacheEntry.windowRange.upperBound)))
    }

    package static func unixMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
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

/// The subscriber's ups and downs: the flag, then the common log.
private struct SubscriberObserver: RedisConnectionObserver {
    package let flag: ReadyFlag
    package let inner: SharedTierObserver
    package let waiters: SharedOutcomeWaiters

    package func redisConnected(loop: String) {
        flag.set(true)
    }

    package func redisConnectionClosed(loop: String) {
        flag.set(false)
    }

    package func redisPasswordRefused(loop: String, _ refused: Bool) {
        inner.redisPasswordRefused(loop: "subscriber", refused)
    }

    package func redisConnectionFailed(loop: String, message: String, wasReady: Bool) {
        flag.set(false)
        // Nothing published from now on reaches this replica.
        if wasReady { waiters.subscriberLost() }
        inner.log.warning("the shared tier's subscriber is unavailable; fetching without coalescing across replicas", metadata: [
            "redis": "\(inner.endpoint)", "error": "\(message)",
        ])
    }
}

/// Logs the connections' ups and downs through the tier's rate limit,
/// and tells the circuit.
private struct SharedTierObserver: RedisConnectionObserver {
    package let log: RateLimitedLog
    package let endpoint: String
    package let metrics: GatewayMetrics
    package let circuit: SharedTierCircuit

    package func redisConnected(loop: String) {
        metrics.recordSharedTierConnections(+1)
        log.info("connected to the shared tier", metadata: ["redis": "\(endpoint)", "loop": "\(loop)"])
        circuit.connectionReady()
    }

    package func redisConnectionClosed(loop: String) {
        metrics.recordSharedTierConnections(-1)
        circuit.connectionClosed()
    }

    package func redisTimedOut(loop: String) {
        metrics.recordSharedTierTimeout()
    }

    package func redisPasswordRefused(loop: String, _ refused: Bool) {
        metrics.recordSharedTierPasswordRefused(refused, loop: loop)
    }

    package func redisConnectionFailed(loop: String, message: String, wasReady: Bool) {
        if wasReady {
            metrics.recordSharedTierConnections(-1)
            circuit.connectionLost(message)
        }
        log.warning("the shared tier is unavailable; carrying on without it and reconnecting", metadata: [
            "redis": "\(endpoint)", "loop": "\(loop)", "error": "\(message)",
        ])
    }
}

/// Whether the replica uses Redis: up while every loop's connection is
/// ready (each has had Redis answer its `PING`), down from the moment one
/// times out or is lost until all are ready again. Going down drops every
/// other connection too (``onTrip``), so that a partition costs the
/// replica one timeout, not one per loop or per call: its calls go on as
/// without Redis, with no Redis wait, while the connections try again in
/// the background once a second (``RedisConnection/retryInterval``), and
/// the tier is used again as soon as they are all ready.
package final class SharedTierCircuit: Sendable {
    private let total: Int
    /// Connections ready, and whether the tier is up: changed together,
    /// under one lock, so no transition is lost between two loops.
    private struct State {
        var ready = 0
        var up = false
    }

    private let state = Mutex(State())
    /// `state.up`, for the calls' one atomic load.
    private let up = Atomic<Bool>(false)
    private let metrics: GatewayMetrics
    private let log: RateLimitedLog
    private let endpoint: String
    private let trip = Mutex<(@Sendable (String) -> Void)?>(nil)

    package init(connections: Int, metrics: GatewayMetrics, log: RateLimitedLog, endpoint: String) {
        self.total = connections
        self.metrics = metrics
        self.log = log
        self.endpoint = endpoint
        metrics.recordSharedTierUp(false)
    }

    /// What going down does to the connections (set once, before they start).
    package var onTrip: (@Sendable (String) -> Void)? {
        get { trip.withLock { $0 } }
        set { trip.withLock { $0 = newValue } }
    }

    /// Whether calls use Redis now: one atomic load.
    package var isUp: Bool { up.load(ordering: .acquiring) }

    package func connectionReady() {
        let cameUp = change { state in
            state.ready += 1
            guard state.ready >= total, !state.up else { return false }
            state.up = true
            return true
        }
        if cameUp { log.info("using the shared tier", metadata: ["redis": "\(endpoint)"]) }
    }

    /// A ready connection timed out or was lost: the tier goes down at
    /// once, and the other connections are dropped to prove themselves.
    package func connectionLost(_ reason: String) {
        let wentDown = change { state in
            state.ready = max(0, state.ready - 1)
            guard state.up else { return false }
            state.up = false
            return true
        }
        guard wentDown else { return }
        log.warning("the shared tier is down: carrying on without Redis, trying it again every second", metadata: [
            "redis": "\(endpoint)", "error": "\(reason)",
        ])
        onTrip?("another connection to Redis failed: \(reason)")
    }

    /// A ready connection was closed for good (shutdown).
    package func connectionClosed() {
        _ = change { state in
            state.ready = max(0, state.ready - 1)
            defer { state.up = false }
            return state.up
        }
    }

    /// Applies `transition` under the lock; the atomic and the gauge follow
    /// the new state there too, so they never disagree for long.
    private func change(_ transition: (inout State) -> Bool) -> Bool {
        state.withLock { state in
            let changed = transition(&state)
            if changed {
                up.store(state.up, ordering: .releasing)
                metrics.recordSharedTierUp(state.up)
            }
            return changed
        }
    }
}

/// At most one line per `interval` (per level group), with the number of
/// lines left out since the last one: Redis failing under load must not
/// flood the log.
package final class RateLimitedLog: Sendable {
    private let logger: Logger
    /// Warnings and infos are limited apart: a recovery is never held back
    /// by the failures before it.
    private let limits: Mutex<(warning: LogRateLimit, info: LogRateLimit)>

    package init(logger: Logger, interval: Duration) {
        self.logger = logger
        self.limits = Mutex((LogRateLimit(interval: interval), LogRateLimit(interval: interval)))
    }

    package func warning(_ message: @autoclosure () -> String, metadata: Logger.Metadata) {
        let now = ContinuousClock.now
        guard let suppressed = limits.withLock({ $0.warning.permit(now: now) }) else { return }
        var metadata = metadata
        if suppressed > 0 { metadata["suppressed"] = .stringConvertible(suppressed) }
        logger.warning("\(message())", metadata: metadata)
    }

    package func info(_ message: @autoclosure () -> String, metadata: Logger.Metadata) {
        let now = ContinuousClock.now
        guard limits.withLock({ $0.info.permit(now: now) }) != nil else { return }
        logger.info("\(message())", metadata: metadata)
    }
}



/// One loop's shared-tier lookups of the current turn: the first arms a
/// flush on the loop's queue, which runs once the turn's callbacks (every
/// request read in it) are done, and sends them as one script. Confined to
/// its loop.
package final class SharedLookupBatch: @unchecked Sendable {
    // @unchecked: `asked` and `armed` are touched on `loop` only.
    package struct Asked: Sendable {
        package let scope: FetchScope
        package let identifiers: [String]
        package let completion: @Sendable (SharedTier.Lookup?) -> Void
    }

    package let loop: EventLoop
    /// Sends a turn's lookups; set once, before the loop runs.
    package var flush: (@Sendable ([Asked]) -> Void)?
    private var asked: [Asked] = []
    private var armed = false

    package init(loop: EventLoop) {
        self.loop = loop
    }

    /// Adds a lookup to this turn's; ``flush`` gets them all when the turn
    /// ends. False when the loop cannot run the flush (it has stopped).
    package func add(_ lookup: Asked) -> Bool {
        loop.preconditionInEventLoop()
        guard flush != nil else { return false }
        asked.append(lookup)
        guard !armed else { return true }
        armed = true
        let queued = loop.execute { [self] in
            armed = false
            let batch = asked
            asked = []
            flush?(batch)
        }
        if !queued {
            armed = false
            asked.removeLast()
        }
        return queued
    }
}
