import JSONRPC
import ProductsDomain
import Synchronization

/// Upstream answers kept for their `max-age` (capped by
/// `GATEWAY_CACHE_MAX_TTL_S`), per (app, country, language, identifier).
///
/// Only successes are stored. A product is kept as its normalised JSON
/// bytes (``Product/encoded``), so a hit splices them into the answer
/// instead of normalising and encoding the product again; an identifier the
/// upstream did not know is kept as ``ProductAnswer/unknown`` and answered as
/// invalid.
final class ResponseCache: Sendable {
    /// The scope's hash is computed once per call, not once per identifier:
    /// a lookup then hashes only the identifier, and equality still compares
    /// the whole scope.
    private struct Key: Hashable {
        let scope: FetchScope
        let scopeHash: Int
        let identifier: String

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.identifier == rhs.identifier && lhs.scopeHash == rhs.scopeHash && lhs.scope == rhs.scope
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(scopeHash)
            hasher.combine(identifier)
        }
    }

    private struct Entry {
        let answer: ProductAnswer
        let expires: ContinuousClock.Instant
        /// What the entry holds in bytes: the encoded product and the key's
        /// strings, the unit of the later `GATEWAY_CACHE_MAX_BYTES` bound.
        let byteCount: Int
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// The sum of every entry's ``Entry/byteCount``.
        var byteCount = 0

        mutating func remove(_ key: Key) {
            if let old = entries.removeValue(forKey: key) { byteCount -= old.byteCount }
        }

        mutating func insert(_ entry: Entry, for key: Key) {
            if let old = entries.updateValue(entry, forKey: key) { byteCount -= old.byteCount }
            byteCount += entry.byteCount
        }
    }

    private let maxTTLSeconds: Int
    private let capacity: Int
    private let state = Mutex(State())

    init(maxTTLSeconds: Int, capacity: Int = 100_000) {
        self.maxTTLSeconds = maxTTLSeconds
        self.capacity = capacity
    }

    /// Fills `answers[i]` with the fresh entry for `identifiers[i]` where
    /// there is one (a slot already filled is left alone) and returns how
    /// many were found. Expired entries are dropped on the way.
    ///
    /// - Precondition: `answers` has one slot per identifier.
    func lookup(scope: FetchScope, identifiers: [String], now: ContinuousClock.Instant, into answers: inout [ProductAnswer?]) -> Int {
        precondition(answers.count == identifiers.count, "one slot per identifier")
        guard maxTTLSeconds > 0 else { return 0 }
        let scopeHash = scope.hashValue
        return state.withLock { state in
            guard !state.entries.isEmpty else { return 0 }
            var hits = 0
            for (index, identifier) in identifiers.enumerated() where answers[index] == nil {
                let key = Key(scope: scope, scopeHash: scopeHash, identifier: identifier)
                guard let entry = state.entries[key] else { continue }
                if entry.expires > now {
                    answers[index] = entry.answer
                    hits += 1
                } else {
                    state.remove(key)
                }
            }
            return hits
        }
    }

    /// Stores the answer to `identifiers` when it may be kept: the page's
    /// encoded product for each identifier it holds, ``ProductAnswer/unknown`` for
    /// the others.
    func store(_ page: SourcePage, scope: FetchScope, identifiers: [String], now: ContinuousClock.Instant) {
        guard let maxAge = page.maxAgeSeconds, maxAge > 0, maxTTLSeconds > 0 else { return }
        let expires = now + .seconds(min(maxAge, maxTTLSeconds))
        let scopeHash = scope.hashValue
        let scopeBytes = scope.appID.utf8.count + scope.country.text.utf8.count + (scope.language?.text.utf8.count ?? 0)
        state.withLock { state in
            if state.entries.count + identifiers.count > capacity {
                state.entries = state.entries.filter { $0.value.expires > now }
                state.byteCount = state.entries.values.reduce(0) { $0 + $1.byteCount }
                if state.entries.count + identifiers.count > capacity { state = State() }
            }
            for identifier in identifiers {
                let answer = page.encodedProducts[identifier].map(ProductAnswer.product) ?? .unknown
                let byteCount = (answer.product?.bytes.count ?? 0) + scopeBytes + identifier.utf8.count
                let key = Key(scope: scope, scopeHash: scopeHash, identifier: identifier)
                state.insert(Entry(answer: answer, expires: expires, byteCount: byteCount), for: key)
            }
        }
    }

    /// The bytes every entry holds (see ``Entry/byteCount``).
    var byteCount: Int {
        state.withLock { $0.byteCount }
    }
}
