import GatewayMetrics
import MemoryTier
import EventTransport
import JSONRPC
import Logging
import ProductsDomain
import Synchronization

/// The Redis side of coalescing across replicas (see
/// ``SharedClaimStateMachine`` for the protocol): claims, the outcome
/// message, releases.
extension SharedTier {
    /// What one claim round trip found.
    package struct ClaimReply {
        /// Claims this replica won.
        package var won: Set<String>
        /// Those of `won` whose claim is in the claim key, not a lease in
        /// the entry key: their entry key holds an entry (a stale one).
        package var wonInClaimKeys: Set<String> = []
        /// Those of `won` whose wait flag was not there: for a replica that
        /// waited, the holder's release saw its flag and published.
        package var unflagged: Set<String> = []
        /// Fresh entries found, as a page, with their identifiers.
        package var entries: (page: SourcePage, identifiers: Set<String>)?
    }

    /// Releases (and stores) for any number of fetches, in groups, one
    /// after the other. For each group, `ARGV` holds the claim value its
    /// token wrote, its identifier count `n`, whether it stores (`1`) and
    /// where its claims are (`p`: leases in the entry keys, ``SharedLease``;
    /// `c`: the claim keys), then, when it stores, each entry's value and
    /// time to keep (ms). `KEYS` holds, in the same order: for claims in the
    /// claim keys, its `n` entry keys when it stores, then its `n` claims;
    /// for leases, its `n` entry keys (the claims themselves); then its `n`
    /// wait flags.
    ///
    /// A group reads its claims and flags first, then stores its entries
    /// (they are its replica's answer, whoever holds the claims now; a
    /// lease in the entry key is replaced by its entry), then releases the
    /// claims its token still holds (a claim that lapsed and was taken over
    /// is not its to release): it deletes them and their wait flags. The
    /// reply has one integer per group: 1 when any of its flags was there
    /// (publish), else 0.
    ///
    /// Nothing is held once the fetch has ended: a call that comes after
    /// it finds the identifier free and fetches at once, and a replica
    /// that waited gets the outcome message. (A claim held a while longer
    /// "as published" made every call arriving meanwhile wait for a poll,
    /// as no message follows it.)
    ///
    /// However many groups and identifiers, the claims and the wait flags
    /// are read with one MGET each and what goes is deleted with one DEL.
    /// Lists go to commands in chunks: Lua's unpack takes at most a few
    /// thousand values, and a call may ask GATEWAY_MAX_IDS (up to 10000).
    package static let releaseScript = RedisScript("""
        local function mget(list)
          local values = {}
          for s = 1, #list, 1000 do
            local part = redis.call('MGET', unpack(list, s, math.min(s + 999, #list)))
            for k = 1, #part do values[s + k - 1] = part[k] end
          end
          return values
        end
        local groups, claimKeys, flagKeys = {}, {}, {}
        local k, a = 0, 0
        while a < #ARGV do
          local group = {
            token = ARGV[a + 1], n = tonumber(ARGV[a + 2]),
            inEntry = ARGV[a + 4] == 'p', base = #claimKeys, entries = k
          }
          local stores, n = ARGV[a + 3] == '1', group.n
          a = a + 4
          if stores then
            group.values = a
            a = a + 2 * n
            if not group.inEntry then k = k + n end
          end
          for i = 1, n do
            claimKeys[#claimKeys + 1] = KEYS[k + i]
            flagKeys[#flagKeys + 1] = KEYS[k + n + i]
          end
          k = k + 2 * n
          groups[#groups + 1] = group
        end
        -- Every group's claims and wait flags in two reads, whatever the
        -- number of groups; what goes is deleted in one command at the end.
        local claims, flags = mget(claimKeys), mget(flagKeys)
        local gone, result = {}, {}
        for g = 1, #groups do
          local group, waited = groups[g], 0
          for i = 1, group.n do
            local j = group.base + i
            local ours = claims[j] == group.token
            local flagged = ours and flags[j] ~= false
            if flagged then
              waited = 1
              gone[#gone + 1] = flagKeys[j]
            end
            if group.values then
              redis.call('SET', KEYS[group.entries + i], ARGV[group.values + 2 * i - 1], 'PX', ARGV[group.values + 2 * i])
            end
            -- A lease in the entry key that an entry replaced is gone already.
            if ours and not (group.inEntry and group.values) then
              gone[#gone + 1] = claimKeys[j]
            end
          end
          result[g] = waited
        end
        for s = 1, #gone, 1000 do
          redis.call('DEL', unpack(gone, s, math.min(s + 999, #gone)))
        end
        return result
        """)

    /// For each identifier `i` of `n` (`KEYS[i]` its claim key, `KEYS[n+i]`
    /// its wait flag, `KEYS[2n+i]` its entry key), with `ARGV[1]` the
    /// token, `ARGV[2]` a lease (ms), `ARGV[3]` the token's lease value
    /// (``SharedLease``) and `ARGV[4]` the start of every token of this
    /// replica, one integer (below; 2 more when the identifier's wait flag
    /// was not there before this claim: a replica that set it while it
    /// waited then knows the holder's release saw it, and published):
    /// - no entry (or a key that is not a string, or bytes that are
    ///   neither an entry nor a lease): the lease goes into the entry key,
    ///   where the fetch's entry will replace it (1);
    /// - this token's lease there: renewed (1);
    /// - another lease of this replica there: taken over (1). This replica
    ///   never waits for itself: its fetches in flight are joined in
    ///   process, so such a lease is one no fetch runs under (a lookup's
    ///   that joined a fetch instead, or a fetch's that has ended), whose
    ///   release is on its way; waiting for it would wait for a poll;
    /// - another replica's lease there: held (0), and the wait flag says
    ///   someone waits for its outcome (for a lease's time: a waiter sets it
    ///   again at every look); unless its time left is longer than a lease
    ///   (no replica writes such a lease): then it is taken over (1);
    /// - an entry (one not fresh enough, or the lookup would have answered
    ///   from it): the entry stays for stale answers, and the claim key is
    ///   claimed: taken when free, without expiry, with a longer expiry than
    ///   a lease, or not a string (2); renewed when it holds the token, or
    ///   taken when it holds another of this replica's (2); else held (0),
    ///   with the wait flag set.
    package static let claimScript = RedisScript("""
        local n = #KEYS / 3
        local lease = tonumber(ARGV[2])
        local mine = ARGV[4]
        local function ours(value, from)
          return type(value) == 'string' and string.sub(value, from, from + #mine - 1) == mine
        end
        local won, flagged = {}, {}
        for i = 1, n do
          local entryKey, flag = KEYS[2 * n + i], KEYS[n + i]
          flagged[i] = redis.call('EXISTS', flag) == 1
          local value = redis.pcall('GET', entryKey)
          local head = type(value) == 'string' and string.sub(value, 1, 4) or nil
          if head == nil or (head ~= 'OGW1' and head ~= 'OGC1') then
            redis.call('SET', entryKey, ARGV[3], 'PX', lease)
            won[i] = 1
          elseif value == ARGV[3] then
            redis.call('PEXPIRE', entryKey, lease)
            won[i] = 1
          elseif head == 'OGC1' then
            local ttl = redis.call('PTTL', entryKey)
            if ttl == -1 or ttl > lease or ours(value, 5) then
              redis.call('SET', entryKey, ARGV[3], 'PX', lease)
              won[i] = 1
            else
              redis.call('SET', flag, '1', 'PX', lease)
              won[i] = 0
            end
          else
            local key = KEYS[i]
            local ttl = redis.call('PTTL', key)
            if ttl == -2 or ttl == -1 or ttl > lease or redis.call('TYPE', key).ok ~= 'string' then
              redis.call('SET', key, ARGV[1], 'PX', lease)
              won[i] = 2
            elseif redis.call('GET', key) == ARGV[1] then
              redis.call('PEXPIRE', key, lease)
              won[i] = 2
            elseif ours(redis.call('GET', key), 1) then
              redis.call('SET', key, ARGV[1], 'PX', lease)
              won[i] = 2
            else
              redis.call('SET', flag, '1', 'PX', lease)
              won[i] = 0
            end
          end
          if won[i] > 0 and not flagged[i] then won[i] = won[i] + 2 end
        end
        return won
        """)

    /// Renews the lease of each claim key that still holds `ARGV[1]`.
    package static let renewScript = RedisScript("""
        for _, key in ipairs(KEYS) do
          if redis.call('GET', key) == ARGV[1] then redis.call('PEXPIRE', key, ARGV[2]) end
        end
        return 0
        """)

    /// The claim script (``claimScript``) for each identifier, then one
    /// `MGET` of their entries, pipelined: one round trip. `completion` gets
    /// nil when Redis could not be asked or answered what does not parse;
    /// then the leases this round trip may have taken are released.
    package func claim(_ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection, completion: @escaping (ClaimReply?) -> Void) {
        let lease = Array(String(Self.lease.milliseconds).utf8)
        let tokenBytes = Array(token.utf8)
        let collector = ClaimCollector(count: 2)
        let metrics = self.metrics
        let freshCap = Duration.seconds(maxTTLSeconds)
        let finish: () -> Void = {
            guard let replies = collector.replies,
                  case .array(let claims) = replies[0], claims.count == identifiers.count,
                  case .array(let values) = replies[1], values.count == identifiers.count else {
                metrics.recordSharedErrors(1)
                // The script may have run, whatever came back: both places.
                self.release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: true)
                self.release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: false)
                completion(nil)
                return
            }
            var won = Set<String>()
            var wonInClaimKeys = Set<String>()
            var unflagged = Set<String>()
            for (index, identifier) in identifiers.enumerated() {
                switch claims[index] {
                case .integer(let code) where (1...4).contains(code):
                    won.insert(identifier)
                    if code % 2 == 0 { wonInClaimKeys.insert(identifier) }
                    if code > 2 { unflagged.insert(identifier) }
                case .integer(0): break
                default:
                    metrics.recordSharedErrors(1)
                    self.release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: true)
                    self.release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: false)
                    completion(nil)
                    return
                }
            }
            let nowUnixMS = SharedTier.unixMilliseconds()
            var products: [String: EncodedJSON] = [:]
            var found = Set<String>()
            var freshFor = Int64.max
            var staleIfError = Int32.max
            var revalidate = Int32.max
            for (index, value) in values.enumerated() {
                guard let bytes = value.bytes, !SharedLease.isLease(bytes) else { continue }
                // Garbage is counted by the lookup every claim follows.
                guard let entry = SharedCacheEntry(decoding: bytes, identifier: identifiers[index]) else { continue }
                let left = entry.freshFor(nowUnixMS: nowUnixMS, cap: freshCap).milliseconds
                guard left >= 1000 else { continue }
                found.insert(identifiers[index])
                if let product = entry.answer.product { products[identifiers[index]] = product }
                freshFor = min(freshFor, left)
                staleIfError = min(staleIfError, entry.staleIfErrorSeconds)
                revalidate = min(revalidate, entry.revalidateSeconds)
            }
            let entries = found.isEmpty ? nil : (
                page: SourcePage(
                    encodedProducts: products, maxAgeSeconds: Int(freshFor / 1000),
                    staleIfErrorSeconds: Int(staleIfError), staleWhileRevalidateSeconds: Int(revalidate)
                ),
                identifiers: found
            )
            completion(ClaimReply(won: won, wonInClaimKeys: wonInClaimKeys, unflagged: unflagged, entries: entries))
        }
        var claimKeys: [[UInt8]] = []
        claimKeys.reserveCapacity(3 * identifiers.count)
        for identifier in identifiers { claimKeys.append(keys.claim(scope, identifier)) }
        for identifier in identifiers { claimKeys.append(keys.wait(scope, identifier)) }
        for identifier in identifiers { claimKeys.append(keys.entry(scope, identifier)) }
        connection.eval(Self.claimScript, keys: claimKeys, arguments: [tokenBytes, lease, SharedLease.value(token: token), Array(replicaTokenPrefix.utf8)], replyElements: identifiers.count) { result in
            collector.record(result, at: 0)
            if collector.isComplete { finish() }
        }
        var mget = RedisCommand(reservingBytes: 64 * (identifiers.count + 1), arguments: identifiers.count + 1)
        mget.append("MGET")
        keys.append("v1:p:", scope, identifiers, to: &mget)
        mget.replyElements = identifiers.count
        connection.send(mget) { result in
            collector.record(result, at: 1)
            if collector.isComplete { finish() }
        }
    }

    /// Renews the leases this token holds on `identifiers` while their
    /// fetch runs; not waited for (a lease lost makes, at worst, a second
    /// fetch by another replica).
    package func renew(_ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection, leasesInEntryKeys: Bool) {
        let claimKeys = identifiers.map { leasesInEntryKeys ? keys.entry(scope, $0) : keys.claim(scope, $0) }
        let value = leasesInEntryKeys ? SharedLease.value(token: token) : Array(token.utf8)
        let metrics = self.metrics
        let log = self.log
        connection.eval(Self.renewScript, keys: claimKeys, arguments: [value, Array(String(Self.lease.milliseconds).utf8)]) { result in
            Self.count(result, what: "lease renewal", metrics: metrics, log: log)
        }
    }

    /// After a claimed fetch: store the entries (when they may be kept),
    /// then release the claims, in that order on one connection; when a
    /// replica waits for them, publish the outcome. A `cancelled` fetch (its
    /// caller's deadline) publishes "released", so waiters with time left
    /// take over.
    package func publish(_ identifiers: [String], outcome: Result<SourcePage, ProductsFetchFailure>, scope: FetchScope, token: String, on connection: RedisConnection, leasesInEntryKeys: Bool) {
        let kind: SharedOutcomeMessage.Kind
        switch outcome {
        case .success(let page):
            // The usual miss: its entries and its release in one script, one
            // command instead of one per identifier and one more.
            if let entries = entryArguments(page, scope: scope, identifiers: identifiers) {
                release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys, announcing: .success(page), storing: entries)
                return
            }
            kind = .success(page)
        case .failure(.cancelled):
            kind = .released
        case .failure(let failure):
            kind = .failure(failure)
        }
        release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys, announcing: kind)
    }

    /// Releases claims won for identifiers an entry already answered, and
    /// tells waiters, if any, to look again.
    package func releaseAndAnnounce(_ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection, leasesInEntryKeys: Bool) {
        release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys)
    }

    /// Releases the claims `token` still holds and, when a replica waits
    /// for any of them (their wait flags), publishes `kind` (by default
    /// "released": look again). The message is built only then: with no
    /// herd, a miss publishes nothing. With `entries`
    /// (``entryArguments(_:scope:identifiers:)``), they are stored first,
    /// by the same script.
    ///
    /// Gathered with the other releases of the connection's loop turn and
    /// sent as one script (``releaseScript``, one group each), not waited
    /// for.
    package func release(
        _ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection, leasesInEntryKeys: Bool,
        announcing kind: SharedOutcomeMessage.Kind = .released, storing entries: EntryArguments? = nil
    ) {
        guard !identifiers.isEmpty else { return }
        let group = SharedReleaseBatch.Group(
            identifiers: identifiers, scope: scope, token: token, leasesInEntryKeys: leasesInEntryKeys, kind: kind, entries: entries
        )
        guard let batch = releaseBatch(for: connection.loop), batch.add(group) else {
            sendReleases([group], on: connection)
            return
        }
    }

    /// One release script for `groups`; each group whose flags were there
    /// publishes its message.
    func sendReleases(_ groups: [SharedReleaseBatch.Group], on connection: RedisConnection) {
        // By index: a group is read in place, not copied (a copy retains
        // each of its fields, outcome and entries included).
        var keyCount = 0
        var argumentCount = 0
        var bytes = 128
        for index in groups.indices {
            let n = groups[index].identifiers.count
            let stores = groups[index].entries != nil
            keyCount += (!stores || groups[index].leasesInEntryKeys ? 2 : 3) * n
            argumentCount += 4 + (stores ? 2 * n : 0)
            bytes += 200 * n + (groups[index].entries?.items.reduce(0) { $0 + $1.entry.encodedCount + 24 } ?? 0)
        }
        var command = RedisCommand.evalsha(Self.releaseScript, keyCount: keyCount, reservingBytes: bytes, arguments: keyCount + argumentCount)
        command.replyElements = groups.count
        for index in groups.indices {
            let scope = groups[index].scope
            if groups[index].leasesInEntryKeys {
                keys.append("v1:p:", scope, groups[index].identifiers, to: &command)
            } else {
                if groups[index].entries != nil { keys.append("v1:p:", scope, groups[index].identifiers, to: &command) }
                keys.append("v1:c:", scope, groups[index].identifiers, to: &command)
            }
            keys.append("v1:w:", scope, groups[index].identifiers, to: &command)
        }
        for index in groups.indices {
            if groups[index].leasesInEntryKeys {
                SharedLease.append(token: groups[index].token, to: &command)
            } else {
                command.append(groups[index].token)
            }
            command.append(Int64(groups[index].identifiers.count))
            command.append(groups[index].entries == nil ? "0" : "1")
            command.append(groups[index].leasesInEntryKeys ? "p" : "c")
            if let items = groups[index].entries?.items {
                for (entry, keep) in items {
                    entry.append(to: &command)
                    command.append(keep)
                }
            }
        }
        let metrics = self.metrics
        let log = self.log
        let channel = channelBytes
        // The connection is captured strongly: the closure waits in its
        // queue until the reply or its drop (no weak side table left for
        // LeakSanitizer at exit).
        connection.eval(Self.releaseScript, command) { result in
            switch result {
            case .success(.array(let flags)) where flags.count == groups.count:
                for (group, flag) in zip(groups, flags) {
                    switch flag {
                    case .integer(1):
                        let message = SharedOutcomeMessage(scope: group.scope, identifiers: group.identifiers, kind: group.kind)
                        self.sendCounted([Array("PUBLISH".utf8), channel, message.encoded], on: connection, what: "publish")
                    case .integer(0):
                        break
                    default:
                        metrics.recordSharedErrors(1)
                        log.warning("Redis answered a shared-tier release unexpectedly", metadata: ["reply": "\(SharedTier.describe(flag))"])
                    }
                }
            case .success(let other):
                metrics.recordSharedErrors(1)
                log.warning("Redis refused a shared-tier release", metadata: ["reply": "\(SharedTier.describe(other))"])
            case .failure(let error):
                metrics.recordSharedErrors(1)
                log.warning("a shared-tier release failed", metadata: ["error": "\(error.message)"])
            }
        }
    }

    /// Sends a command nobody waits for; a failure is counted and logged.
    package func sendCounted(_ arguments: [[UInt8]], on connection: RedisConnection, what: String) {
        let metrics = self.metrics
        let log = self.log
        connection.send(arguments) { result in
            Self.count(result, what: what, metrics: metrics, log: log)
        }
    }

    /// A reply nobody waits for: a failure is counted and logged.
    package static func count(_ result: Result<RedisValue, RedisError>, what: String, metrics: GatewayMetrics, log: RateLimitedLog) {
        switch result {
        case .success(.error(let message)):
            metrics.recordSharedErrors(1)
            log.warning("Redis refused a shared-tier \(what)", metadata: ["reply": "\(RedisConnection.errorCode(message))"])
        case .success:
            break
        case .failure(let error):
            metrics.recordSharedErrors(1)
            log.warning("a shared-tier \(what) failed", metadata: ["error": "\(error.message)"])
        }
    }
}

/// Collects the replies of one pipelined claim round trip, on one loop.
private final class ClaimCollector {
    private var values: [RedisValue?]
    private var received = 0
    private var failed = false

    package init(count: Int) {
        values = Array(repeating: nil, count: count)
    }

    package func record(_ result: Result<RedisValue, RedisError>, at index: Int) {
        received += 1
        switch result {
        case .success(.error):
            failed = true
        case .success(let value):
            values[index] = value
        case .failure:
            failed = true
        }
    }

    package var isComplete: Bool { received == values.count }

    /// Every reply, or nil when any failed.
    package var replies: [RedisValue]? {
        failed ? nil : values.map { $0 ?? .null }
    }
}

extension SharedTierKeys {
    /// `{prefix}v1:c:{app}:{country}:{language or -}:{identifier}`.
    package func claim(_ scope: FetchScope, _ identifier: String) -> [UInt8] {
        key("v1:c:", scope, identifier)
    }

    /// `{prefix}v1:w:…`: set while a replica waits for the claim's outcome.
    package func wait(_ scope: FetchScope, _ identifier: String) -> [UInt8] {
        key("v1:w:", scope, identifier)
    }
}

/// The drivers waiting for other replicas' outcomes, by (scope,
/// identifier). The subscriber hands each message here (on its loop); each
/// driver named in it gets the message on its own loop.
package final class SharedOutcomeWaiters: Sendable {
    private let table = Mutex<[ScopedIdentifier: [ObjectIdentifier: SharedClaimDriver]]>([:])
    /// `UPSTREAM_MAX_IDS`: no fetch names more, so no message may.
    private let maxIdentifiers: Int
    /// Counts a message that does not parse (`gateway_shared_cache_errors_total`).
    private let refused: @Sendable () -> Void

    package init(maxIdentifiers: Int, refused: @escaping @Sendable () -> Void = {}) {
        self.maxIdentifiers = maxIdentifiers
        self.refused = refused
    }

    package func register(_ driver: SharedClaimDriver, scope: FetchScope, identifiers: [String]) {
        table.withLock { table in
            for key in ScopedIdentifier.keys(scope: scope, identifiers: identifiers) { table[key, default: [:]][ObjectIdentifier(driver)] = driver }
        }
    }

    package func unregister(_ driver: SharedClaimDriver, scope: FetchScope, identifiers: [String]) {
        table.withLock { table in
            for key in ScopedIdentifier.keys(scope: scope, identifiers: identifiers) {
                table[key]?[ObjectIdentifier(driver)] = nil
                if table[key]?.isEmpty == true { table[key] = nil }
            }
        }
    }

    /// The subscriber dropped: every waiting driver stops waiting.
    package func subscriberLost() {
        let drivers = table.withLock { table in
            var all: [ObjectIdentifier: SharedClaimDriver] = [:]
            for entry in table.values { all.merge(entry) { first, _ in first } }
            return all
        }
        for driver in drivers.values {
            driver.loop.execute { driver.sharedTierLost() }
        }
    }

    /// One message from the outcomes channel; one that does not parse is
    /// ignored and counted.
    package func dispatch(_ payload: [UInt8]) {
        // Checked before anything is built from it: size, then the count of
        // identifiers, then every field.
        guard let message = SharedOutcomeMessage(decoding: payload, maxIdentifiers: maxIdentifiers) else {
            refused()
            return
        }
        var drivers: [ObjectIdentifier: SharedClaimDriver] = [:]
        table.withLock { table in
            for key in ScopedIdentifier.keys(scope: message.scope, identifiers: message.identifiers) {
                for (id, driver) in table[key] ?? [:] { drivers[id] = driver }
            }
        }
        for driver in drivers.values {
            driver.loop.execute { driver.received(message) }
        }
    }
}

/// One loop's shared-tier releases of the current turn, sent as one script
/// when the turn's callbacks are done (upstream answers that came in the
/// same turn release together). Confined to its loop.
package final class SharedReleaseBatch: @unchecked Sendable {
    // @unchecked: `groups` and `armed` are touched on `loop` only.
    package struct Group: Sendable {
        package let identifiers: [String]
        package let scope: FetchScope
        package let token: String
        /// Whether the claims are leases in the entry keys (``SharedLease``)
        /// rather than in the claim keys.
        package let leasesInEntryKeys: Bool
        package let kind: SharedOutcomeMessage.Kind
        package let entries: SharedTier.EntryArguments?
    }

    package let loop: EventLoop
    /// Sends a turn's releases; set once, before the loop runs.
    package var flush: (@Sendable ([Group]) -> Void)?
    private var groups: [Group] = []
    private var armed = false

    package init(loop: EventLoop) {
        self.loop = loop
    }

    /// Adds a release to this turn's; ``flush`` gets them all when the turn
    /// ends. False when the loop cannot run the flush (it has stopped).
    package func add(_ group: Group) -> Bool {
        loop.preconditionInEventLoop()
        guard flush != nil else { return false }
        groups.append(group)
        guard !armed else { return true }
        armed = true
        let queued = loop.execute { [self] in
            armed = false
            let batch = groups
            groups = []
            flush?(batch)
        }
        if !queued {
            armed = false
            groups.removeLast()
        }
        return queued
    }
}
