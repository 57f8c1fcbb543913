import ProductsDomain
import Synchronization

/// Upstream answers kept for their `max-age` (capped by
/// `GATEWAY_CACHE_MAX_TTL_S`), per (app, country, language, identifier).
/// Only successes are stored; an unknown identifier is stored as `nil`.
final class ResponseCache: Sendable {
    private struct Key: Hashable {
        let scope: FetchScope
        let identifier: String
    }

    private struct Entry {
        let product: UpstreamProduct?
        let expires: ContinuousClock.Instant
    }

    private let maxTTLSeconds: Int
    private let capacity: Int
    private let entries = Mutex<[Key: Entry]>([:])

    init(maxTTLSeconds: Int, capacity: Int = 100_000) {
        self.maxTTLSeconds = maxTTLSeconds
        self.capacity = capacity
    }

    /// Fresh entries for `identifiers`: a product, or `nil` for an
    /// identifier the upstream did not know. Missing keys are not cached.
    func lookup(scope: FetchScope, identifiers: [String], now: ContinuousClock.Instant) -> [String: UpstreamProduct?] {
        guard maxTTLSeconds > 0 else { return [:] }
        return entries.withLock { entries in
            var hits: [String: UpstreamProduct?] = [:]
            for identifier in identifiers {
                let key = Key(scope: scope, identifier: identifier)
                guard let entry = entries[key] else { continue }
                if entry.expires > now {
                    hits[identifier] = .some(entry.product)
                } else {
                    entries[key] = nil
                }
            }
            return hits
        }
    }

    /// Stores the answer to `identifiers` when it may be kept.
    func store(_ page: SourcePage, scope: FetchScope, identifiers: [String], now: ContinuousClock.Instant) {
        guard let maxAge = page.maxAgeSeconds, maxAge > 0, maxTTLSeconds > 0 else { return }
        let expires = now + .seconds(min(maxAge, maxTTLSeconds))
        var byID: [String: UpstreamProduct] = [:]
        for item in page.page.items { byID[item.id] = item }
        entries.withLock { entries in
            if entries.count + identifiers.count > capacity {
                entries = entries.filter { $0.value.expires > now }
                if entries.count + identifiers.count > capacity { entries.removeAll() }
            }
            for identifier in identifiers {
                entries[Key(scope: scope, identifier: identifier)] = Entry(product: byID[identifier], expires: expires)
            }
        }
    }
}
