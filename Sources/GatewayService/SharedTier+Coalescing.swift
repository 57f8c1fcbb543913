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
    struct ClaimReply {
        /// Claims this replica won.
        var won: Set<String>
        /// Fresh entries found, as a page, with their identifiers.
        var entries: (page: SourcePage, identifiers: Set<String>)?
    }

    /// Deletes each claim key only while it still holds `token`: a claim
    /// that lapsed and was taken over is not ours to release.
    static let releaseScript = Array("""
        for _, key in ipairs(KEYS) do
          if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
        end
        return 0
        """.utf8)

    /// `SET claim token NX PX lapse` for each identifier, then one `MGET`
    /// of their entries, pipelined: one round trip. `completion` gets nil
    /// when Redis could not be asked or answered what does not parse.
    func claim(_ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection, completion: @escaping (ClaimReply?) -> Void) {
        let lapse = Array(String(max(1, claimLapse.wholeMilliseconds)).utf8)
        let tokenBytes = Array(token.utf8)
        let collector = ClaimCollector(count: identifiers.count + 1)
        let metrics = self.metrics
        let freshCap = Duration.seconds(maxTTLSeconds)
        let finish: () -> Void = {
            guard let replies = collector.replies else {
                metrics.recordSharedErrors(1)
                completion(nil)
                return
            }
            var won = Set<String>()
            for (index, identifier) in identifiers.enumerated() {
                switch replies[index] {
                case .status("OK"): won.insert(identifier)
                case .null: break
                default:
                    metrics.recordSharedErrors(1)
                    completion(nil)
                    return
                }
            }
            guard case .array(let values) = replies[identifiers.count], values.count == identifiers.count else {
                metrics.recordSharedErrors(1)
                completion(nil)
                return
            }
            let nowUnixMS = SharedTier.unixMilliseconds()
            var products: [String: EncodedJSON] = [:]
            var found = Set<String>()
            var freshFor = Int64.max
            var staleIfError = Int32.max
            var revalidate = Int32.max
            for (index, value) in values.enumerated() {
                guard let bytes = value.bytes else { continue }
                // Garbage is counted by the lookup every claim follows.
                guard let entry = SharedCacheEntry(decoding: bytes, identifier: identifiers[index]) else { continue }
                let left = entry.freshFor(nowUnixMS: nowUnixMS, cap: freshCap).wholeMilliseconds
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
            completion(ClaimReply(won: won, entries: entries))
        }
        for (index, identifier) in identifiers.enumerated() {
            connection.send([Array("SET".utf8), keys.claim(scope, identifier), tokenBytes, Array("NX".utf8), Array("PX".utf8), lapse]) { result in
                collector.record(result, at: index)
                if collector.isComplete { finish() }
            }
        }
        var mget: [[UInt8]] = [Array("MGET".utf8)]
        for identifier in identifiers { mget.append(keys.entry(scope, identifier)) }
        connection.send(mget) { result in
            collector.record(result, at: identifiers.count)
            if collector.isComplete { finish() }
        }
    }

    /// After a claimed fetch: store the entries (when they may be kept),
    /// release the claims, publish the outcome, in that order on one
    /// connection. A `cancelled` fetch (its caller's deadline) publishes
    /// "released", so waiters with time left take over.
    func publish(_ identifiers: [String], outcome: Result<SourcePage, ProductsFetchFailure>, scope: FetchScope, token: String, on connection: RedisConnection) {
        let kind: SharedOutcomeMessage.Kind
        switch outcome {
        case .success(let page):
            store(page, scope: scope, identifiers: identifiers, on: connection)
            kind = .success(page)
        case .failure(.cancelled):
            kind = .released
        case .failure(let failure):
            kind = .failure(failure)
        }
        release(identifiers, scope: scope, token: token, on: connection)
        let message = SharedOutcomeMessage(scope: scope, identifiers: identifiers, kind: kind)
        sendCounted([Array("PUBLISH".utf8), Array(channel.utf8), message.encoded], on: connection, what: "publish")
    }

    /// Releases claims won for identifiers an entry already answered, and
    /// tells waiters to look again.
    func releaseAndAnnounce(_ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection) {
        release(identifiers, scope: scope, token: token, on: connection)
        let message = SharedOutcomeMessage(scope: scope, identifiers: identifiers, kind: .released)
        sendCounted([Array("PUBLISH".utf8), Array(channel.utf8), message.encoded], on: connection, what: "publish")
    }

    private func release(_ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection) {
        var arguments: [[UInt8]] = [Array("EVAL".utf8), Self.releaseScript, Array(String(identifiers.count).utf8)]
        for identifier in identifiers { arguments.append(keys.claim(scope, identifier)) }
        arguments.append(Array(token.utf8))
        sendCounted(arguments, on: connection, what: "release")
    }

    /// Sends a command nobody waits for; a failure is counted and logged.
    func sendCounted(_ arguments: [[UInt8]], on connection: RedisConnection, what: String) {
        let metrics = self.metrics
        let log = self.log
        connection.send(arguments) { result in
            switch result {
            case .success(.error(let message)):
                metrics.recordSharedErrors(1)
                log.warning("Redis refused a shared-tier \(what)", metadata: ["reply": "\(message.prefix(120))"])
            case .success:
                break
            case .failure(let error):
                metrics.recordSharedErrors(1)
                log.warning("a shared-tier \(what) failed", metadata: ["error": "\(error.message)"])
            }
        }
    }
}

/// Collects the replies of one pipelined claim round trip, on one loop.
private final class ClaimCollector {
    private var values: [RedisValue?]
    private var received = 0
    private var failed = false

    init(count: Int) {
        values = Array(repeating: nil, count: count)
    }

    func record(_ result: Result<RedisValue, RedisError>, at index: Int) {
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

    var isComplete: Bool { received == values.count }

    /// Every reply, or nil when any failed.
    var replies: [RedisValue]? {
        failed ? nil : values.map { $0 ?? .null }
    }
}

extension SharedTierKeys {
    /// `{prefix}v1:c:{app}:{country}:{language or -}:{identifier}`.
    func claim(_ scope: FetchScope, _ identifier: String) -> [UInt8] {
        Array("\(prefix)v1:c:\(scope.appID):\(scope.country.text):\(scope.language?.text ?? "-"):\(identifier)".utf8)
    }
}

extension Duration {
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

/// The drivers waiting for other replicas' outcomes, by (scope,
/// identifier). The subscriber hands each message here (on its loop); each
/// driver named in it gets the message on its own loop.
final class SharedOutcomeWaiters: Sendable {
    private struct Key: Hashable {
        let scope: FetchScope
        let identifier: String
    }

    private let table = Mutex<[Key: [ObjectIdentifier: SharedClaimDriver]]>([:])
    /// `UPSTREAM_MAX_IDS`: no fetch names more, so no message may.
    private let maxIdentifiers: Int

    init(maxIdentifiers: Int) {
        self.maxIdentifiers = maxIdentifiers
    }

    func register(_ driver: SharedClaimDriver, scope: FetchScope, identifiers: [String]) {
        table.withLock { table in
            for identifier in identifiers { table[Key(scope: scope, identifier: identifier), default: [:]][ObjectIdentifier(driver)] = driver }
        }
    }

    func unregister(_ driver: SharedClaimDriver, scope: FetchScope, identifiers: [String]) {
        table.withLock { table in
            for identifier in identifiers {
                let key = Key(scope: scope, identifier: identifier)
                table[key]?[ObjectIdentifier(driver)] = nil
                if table[key]?.isEmpty == true { table[key] = nil }
            }
        }
    }

    /// The subscriber dropped: every waiting driver stops waiting.
    func subscriberLost() {
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
    /// ignored.
    func dispatch(_ payload: [UInt8]) {
        // Checked before anything is built from it: size, then the count of
        // identifiers, then every field.
        guard let message = SharedOutcomeMessage(decoding: payload, maxIdentifiers: maxIdentifiers) else { return }
        var drivers: [ObjectIdentifier: SharedClaimDriver] = [:]
        table.withLock { table in
            for identifier in message.identifiers {
                for (id, driver) in table[Key(scope: message.scope, identifier: identifier)] ?? [:] { drivers[id] = driver }
            }
        }
        for driver in drivers.values {
            driver.loop.execute { driver.received(message) }
        }
    }
}
