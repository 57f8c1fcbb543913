import Logging
import GatewayMetrics
package import MemoryTier
package import EventTransport
import ProductsDomain

/// Entries written for the other replicas: what an upstream success may
/// keep, for as long as it may answer.
extension SharedTier {
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
        let nowUnixMS = clock.unixMilliseconds
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
}
