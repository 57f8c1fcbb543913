import Logging
import ProductsDomain
import GatewayMetrics
package import MemoryTier
package import EventTransport
import JSONRPC

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
            let nowUnixMS = self.clock.unixMilliseconds
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
}

/// Collects the replies of one pipelined claim round trip, on one loop.
final class ClaimCollector {
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
