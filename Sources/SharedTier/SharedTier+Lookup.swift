import Logging
import ProductsDomain
import GatewayMetrics
package import MemoryTier
package import EventTransport

/// The lookup: one round trip a memory miss pays before the upstream (the
/// entries, and the leases of those with none), gathered per loop turn.
extension SharedTier {
    /// What one lookup found: each identifier's entry (nil: none, or one
    /// that does not parse, ignored and counted), or no element at all when
    /// nothing was found (the usual miss: no array is made for it); and,
    /// when the lookup claimed, the leases it took for those without a
    /// fresh entry.
    package struct Lookup: Sendable {
        package var entries: [SharedCacheEntry?]
        package var claims: SharedPreclaim?
    }

    /// One call's lookup, waiting for its loop turn's script.
    package struct AskedLookup: Sendable {
        package let scope: FetchScope
        package let identifiers: [String]
        package let completion: @Sendable (SharedTier.Lookup?) -> Void
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
        let asked = AskedLookup(scope: scope, identifiers: identifiers, completion: completion)
        guard let batch = loop.context[lookupBatches], batch.add(asked) else {
            sendLookups([asked], on: loop)
            return
        }
    }

    /// One lookup script for the lookups of one loop turn. Each distinct
    /// (scope, identifier) is asked once; a lease it wins goes to the first
    /// call that asked, so only one call's fetch adopts it (the others join
    /// that fetch in process, or release nothing).
    func sendLookups(_ batch: [AskedLookup], on loop: EventLoop) {
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

    private func sendLookupScript(_ batch: [AskedLookup], on loop: EventLoop) {
        guard let connection = readyConnection(on: loop) else {
            for index in batch.indices { batch[index].completion(nil) }
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
        // By index here and below: an element copied is a reference count
        // per field (its scope's three strings, its identifiers, its
        // completion), per call of the turn.
        for index in batch.indices {
            keys.append("v1:p:", batch[index].scope, batch[index].identifiers, to: &command)
        }
        SharedLease.append(token: token, to: &command)
        command.append(Self.leaseMilliseconds)
        connection.eval(Self.lookupScript, command) { [self] reply in
            if case .success(.integer(0)) = reply {
                // The usual miss: every key was free, every lease is ours.
                for index in batch.indices {
                    batch[index].completion(Lookup(entries: [], claims: SharedPreclaim(token: token, scope: batch[index].scope, wonAllOf: batch[index].identifiers)))
                }
                return
            }
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
            for askedIndex in batch.indices {
                let identifiers = batch[askedIndex].identifiers
                // Both empty while every identifier so far won its lease (the
                // usual miss: no array and no set is made).
                var found: [SharedCacheEntry?] = []
                var wonSome: Set<String>?
                for index in identifiers.indices {
                    defer { position += 1 }
                    if wonSome == nil {
                        // The usual miss: the lease is this call's.
                        if case .null = values[position] { continue }
                        wonSome = Set(identifiers[..<index])
                        found.reserveCapacity(identifiers.count)
                        found.append(contentsOf: repeatElement(nil, count: index))
                    }
                    let identifier = identifiers[index]
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
                let claims = wonSome.map { SharedPreclaim(token: token, scope: batch[askedIndex].scope, won: $0) }
                    ?? SharedPreclaim(token: token, scope: batch[askedIndex].scope, wonAllOf: identifiers)
                batch[askedIndex].completion(Lookup(entries: found, claims: claims))
            }
            if garbage > 0 {
                metrics.recordSharedErrors(garbage)
                log.warning("the shared tier holds entries that do not parse; they are ignored", metadata: ["count": "\(garbage)"])
            }
        }
    }

    private static let leaseMilliseconds = Array(String(lease.milliseconds).utf8)

    /// Gives back leases a lookup took that no fetch adopted.
    package func release(_ claims: SharedPreclaim, on loop: EventLoop) {
        SharedLeasePermit(claims, tier: self, on: loop).release()
    }

    /// What an unconsumed ``SharedLeasePermit`` does: the leases go back
    /// with the loop's release script.
    fileprivate func giveBack(_ claims: SharedPreclaim, on loop: EventLoop) {
        guard claims.wonCount > 0, let connection = loop.context[connections], connection.isReady else { return }
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
}

/// The leases a lookup won (``SharedPreclaim``), held by one owner at a time,
/// as Pingora's `WritePermit`: the fetch that runs under them takes them
/// (``adopt()``), or they are given back (``release()``); a permit dropped
/// with neither gives them back itself. So a won lease is never forgotten
/// (left to lapse while other replicas wait on it) nor given back twice:
/// the compiler refuses a second use. Two references and the leases'
/// description, on the stack: nothing is allocated for it.
package struct SharedLeasePermit: ~Copyable {
    private var leases: SharedPreclaim?
    private let tier: SharedTier
    /// The loop whose connection gives the leases back.
    private let loop: EventLoop

    /// The permit for `leases` (nil: none), taken on `loop`.
    package init(_ leases: SharedPreclaim?, tier: SharedTier, on loop: EventLoop) {
        self.leases = leases
        self.tier = tier
        self.loop = loop
    }

    /// Whether it holds any lease.
    package var isEmpty: Bool { (leases?.wonCount ?? 0) == 0 }

    /// Hands the leases to the fetch that runs under them: from here its
    /// driver renews, releases and publishes them.
    package consuming func adopt() -> SharedPreclaim? {
        let adopted = leases
        leases = nil
        return adopted
    }

    /// Gives the leases back now, in the loop turn's release script.
    package consuming func release() {
        let given = leases
        leases = nil
        if let given { tier.giveBack(given, on: loop) }
    }

    deinit {
        if let leases { tier.giveBack(leases, on: loop) }
    }
}
