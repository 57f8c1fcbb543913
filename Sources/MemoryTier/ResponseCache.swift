package import GatewayMetrics
import JSONRPC
package import MonotonicTime
package import ProductsDomain
import Synchronization

/// Upstream answers kept for their `max-age` (capped by
/// `GATEWAY_CACHE_MAX_TTL_S`), per (app, country, language, identifier).
///
/// An entry may outlive its freshness by its `stale-if-error` and
/// `stale-while-revalidate` times (RFC 5861, capped by
/// `GATEWAY_CACHE_MAX_STALE_S`): it then answers only as those allow.
///
/// Only successes are stored. A product is kept as its normalised JSON
/// bytes (``Product/encoded``), so a hit splices them into the answer
/// instead of normalising and encoding the product again; an identifier the
/// upstream did not know is kept as ``ProductAnswer/unknown`` and answered as
/// invalid.
///
/// The entries are bounded by `GATEWAY_CACHE_MAX_BYTES`: each is charged
/// ``entryCost(answer:scopeBytes:identifier:)`` and, past the budget, entries
/// are evicted by SIEVE (``SieveCache``), so identifiers asked once (a scan
/// of random ids) go before those asked again. An expired entry is dropped
/// when a lookup finds it; it is not an eviction.
package final class ResponseCache: Sendable {
    /// The scope's hash is computed once per call, not once per identifier:
    /// a lookup then hashes only the identifier, and equality still compares
    /// the whole scope.
    private typealias Key = ScopedIdentifier


    private struct Entry {
        package let answer: ProductAnswer
        /// Fresh until here.
        package let expires: MonotonicInstant
        /// Seconds past ``expires`` the entry may answer when its refresh
        /// fails (`stale-if-error`, capped); 32 bits keep the entry small.
        package let staleIfErrorSeconds: Int32
        /// Seconds past ``expires`` the entry answers at once while a
        /// background fetch refreshes it (`stale-while-revalidate`, capped).
        package let revalidateSeconds: Int32

        /// Until when the entry is worth keeping at all.
        package var keptUntil: MonotonicInstant {
            expires + .seconds(max(staleIfErrorSeconds, revalidateSeconds))
        }
    }

    /// What one entry is charged beyond its bytes of text: its node in the
    /// eviction queue (key with the scope, entry, cost, bit and links), its
    /// slot in the key index (key and node index, over a table at most 3/4
    /// full) and the heap header of the encoded product's buffer (32).
    /// ``measuredEntryOverhead`` adds these up from `MemoryLayout`: 304 bytes
    /// on 64-bit Linux with Swift 6.3; `entryCostsCoverTheirLayout` keeps
    /// this constant at or above it.
    package static let entryOverhead = 320

    /// What ``entryOverhead`` stands for, measured on this platform.
    package static var measuredEntryOverhead: Int {
        let indexSlot = MemoryLayout<Key>.stride + MemoryLayout<Int>.stride
        return SieveCache<Key, Entry>.nodeStride + (indexSlot * 4 + 2) / 3 + 32
    }

    /// The bytes one entry is charged against `GATEWAY_CACHE_MAX_BYTES`:
    /// the encoded product (0 for an unknown identifier), the key's strings
    /// and ``entryOverhead``.
    package static func entryCost(answer: ProductAnswer, scopeBytes: Int, identifier: String) -> Int {
        (answer.product?.bytes.count ?? 0) + scopeBytes + identifier.utf8.count + entryOverhead
    }

    private let maxTTLSeconds: Int
    private let maxStaleSeconds: Int
    private let maxBytes: Int
    private let metrics: GatewayMetrics?
    private let state: Mutex<SieveCache<Key, Entry>>

    /// - Parameters:
    ///   - maxBytes: `GATEWAY_CACHE_MAX_BYTES`, the most the entries' costs
    ///     (``entryCost(answer:scopeBytes:identifier:)``) add up to; 0 keeps
    ///     nothing.
    ///   - metrics: told the bytes held after every change
    ///     (`gateway_cache_bytes`, set under the lock so the last value
    ///     written is the current one) and the entries evicted
    ///     (`gateway_cache_evictions_total`, counted after the lock).
    ///   - maxStaleSeconds: `GATEWAY_CACHE_MAX_STALE_S`, the cap on
    ///     `stale-if-error` and `stale-while-revalidate` (0: never stale).
    package init(maxTTLSeconds: Int, maxStaleSeconds: Int = 0, maxBytes: Int = 33_554_432, metrics: GatewayMetrics? = nil) {
        self.maxTTLSeconds = maxTTLSeconds
        self.maxStaleSeconds = maxStaleSeconds
        self.maxBytes = maxBytes
        self.metrics = metrics
        self.state = Mutex(SieveCache(budget: maxBytes))
    }

    /// Fills `answers[i]` with the fresh entry for `identifiers[i]` where
    /// there is one (a slot already filled is left alone) and returns how
    /// many were found. Expired entries are dropped on the way, unless they
    /// may still answer stale (kept for ``lookup(scope:identifiers:now:into:revalidating:)``
    /// and ``fillStaleIfError(scope:identifiers:failedIdentifiers:now:into:)``).
    ///
    /// - Precondition: `answers` has one slot per identifier.
    package func lookup(scope: FetchScope, identifiers: [String], now: MonotonicInstant, into answers: inout [ProductAnswer?]) -> Int {
        var stale: [String] = []
        return lookup(scope: scope, identifiers: identifiers, now: now, into: &answers, revalidating: &stale)
    }

    /// ``lookup(scope:identifiers:now:into:)``, and an entry past its
    /// freshness but within its `stale-while-revalidate` time answers too:
    /// its identifier is appended to `stale`, for the caller to count and to
    /// refresh in the background. Returns the fresh hits only.
    ///
    /// A full fresh hit costs what it did before stale answers existed: one
    /// comparison per entry, and `stale` stays empty (no allocation).
    ///
    /// - Precondition: `answers` has one slot per identifier.
    package func lookup(scope: FetchScope, identifiers: [String], now: MonotonicInstant, into answers: inout [ProductAnswer?], revalidating stale: inout [String]) -> Int {
        precondition(answers.count == identifiers.count, "one slot per identifier")
        guard maxTTLSeconds > 0, maxBytes > 0 else { return 0 }
        let scopeHash = scope.hashValue
        return state.withLock { state in
            guard !state.isEmpty else { return 0 }
            var hits = 0
            var expired = false
            for (index, identifier) in identifiers.enumerated() where answers[index] == nil {
                let key = Key(scope: scope, scopeHash: scopeHash, identifier: identifier)
                guard let entry = state.value(forKey: key) else { continue }
                if entry.expires > now {
                    answers[index] = entry.answer
                    hits += 1
                } else if entry.revalidateSeconds > 0, entry.expires + .seconds(entry.revalidateSeconds) > now {
                    answers[index] = entry.answer
                    stale.append(identifier)
                } else if entry.keptUntil <= now {
                    state.removeValue(forKey: key)
                    expired = true
                }
            }
            if expired { metrics?.recordCacheBytes(state.totalCost) }
            return hits
        }
    }

    /// After the fetch of `failedIdentifiers` failed with a failure that
    /// allows it (``ProductsFetchFailure/allowsStaleAnswer``): fills each
    /// open slot of those identifiers from an entry still within its
    /// `stale-if-error` time. Returns how many slots it filled, and whether
    /// every open slot of `failedIdentifiers` is now filled (only then may
    /// the failure be forgotten).
    ///
    /// - Precondition: `answers` has one slot per identifier.
    package func fillStaleIfError(scope: FetchScope, identifiers: [String], failedIdentifiers: [String], now: MonotonicInstant, into answers: inout [ProductAnswer?]) -> (filled: Int, complete: Bool) {
        precondition(answers.count == identifiers.count, "one slot per identifier")
        guard maxTTLSeconds > 0, maxBytes > 0, maxStaleSeconds > 0 else { return (0, false) }
        let scopeHash = scope.hashValue
        return state.withLock { state in
            var filled = 0
            var complete = true
            for (index, identifier) in identifiers.enumerated() where answers[index] == nil && failedIdentifiers.contains(identifier) {
                let key = Key(scope: scope, scopeHash: scopeHash, identifier: identifier)
                if let entry = state.value(forKey: key), entry.staleIfErrorSeconds > 0,
                   entry.expires + .seconds(entry.staleIfErrorSeconds) > now {
                    answers[index] = entry.answer
                    filled += 1
                } else {
                    complete = false
                }
            }
            return (filled, complete)
        }
    }

    /// Stores the answer to `identifiers` when it may be kept: the page's
    /// encoded product for each identifier it holds, ``ProductAnswer/unknown`` for
    /// the others.
    package func store(_ page: SourcePage, scope: FetchScope, identifiers: [String], now: MonotonicInstant) {
        guard let maxAge = page.maxAgeSeconds, maxAge > 0, maxTTLSeconds > 0, maxBytes > 0 else { return }
        let expires = now + .seconds(min(maxAge, maxTTLSeconds))
        let staleIfError = Int32(min(page.staleIfErrorSeconds ?? 0, maxStaleSeconds, Int(Int32.max)))
        let revalidate = Int32(min(page.staleWhileRevalidateSeconds ?? 0, maxStaleSeconds, Int(Int32.max)))
        let scopeHash = scope.hashValue
        let scopeBytes = scope.appID.utf8.count + scope.country.text.utf8.count + (scope.language?.text.utf8.count ?? 0)
        let evicted = state.withLock { state in
            var evicted = 0
            for identifier in identifiers {
                let answer = page.encodedProducts[identifier].map(ProductAnswer.product) ?? .unknown
                let cost = Self.entryCost(answer: answer, scopeBytes: scopeBytes, identifier: identifier)
                let key = Key(scope: scope, scopeHash: scopeHash, identifier: identifier)
                state.insert(Entry(answer: answer, expires: expires, staleIfErrorSeconds: staleIfError, revalidateSeconds: revalidate), forKey: key, cost: cost) { _, _ in evicted += 1 }
            }
            metrics?.recordCacheBytes(state.totalCost)
            return evicted
        }
        metrics?.recordCacheEvictions(evicted)
    }

    /// An entry read from the shared tier, as this cache keeps it.
    package struct SharedAnswer: Sendable {
        package var identifier: String
        package var answer: ProductAnswer
        /// What is left of its freshness (negative when already stale).
        package var freshFor: Duration
        package var staleIfErrorSeconds: Int32
        package var revalidateSeconds: Int32

        package init(identifier: String, answer: ProductAnswer, freshFor: Duration, staleIfErrorSeconds: Int32, revalidateSeconds: Int32) {
            self.identifier = identifier
            self.answer = answer
            self.freshFor = freshFor
            self.staleIfErrorSeconds = staleIfErrorSeconds
            self.revalidateSeconds = revalidateSeconds
        }
    }

    /// Keeps entries read from the shared tier for the rest of their time,
    /// their stale windows as stored (capped again here).
    package func store(shared entries: [SharedAnswer], scope: FetchScope, now: MonotonicInstant) {
        guard maxTTLSeconds > 0, maxBytes > 0, !entries.isEmpty else { return }
        let scopeHash = scope.hashValue
        let scopeBytes = scope.appID.utf8.count + scope.country.text.utf8.count + (scope.language?.text.utf8.count ?? 0)
        let cap = Int32(min(maxStaleSeconds, Int(Int32.max)))
        let evicted = state.withLock { state in
            var evicted = 0
            for shared in entries {
                let identifier = shared.identifier
                let freshFor = shared.freshFor
                let entry = Entry(
                    answer: shared.answer,
                    expires: now + min(freshFor, .seconds(maxTTLSeconds)),
                    staleIfErrorSeconds: min(shared.staleIfErrorSeconds, cap),
                    revalidateSeconds: min(shared.revalidateSeconds, cap)
                )
                guard entry.keptUntil > now else { continue }
                let cost = Self.entryCost(answer: shared.answer, scopeBytes: scopeBytes, identifier: identifier)
                let key = Key(scope: scope, scopeHash: scopeHash, identifier: identifier)
                state.insert(entry, forKey: key, cost: cost) { _, _ in evicted += 1 }
            }
            metrics?.recordCacheBytes(state.totalCost)
            return evicted
        }
        metrics?.recordCacheEvictions(evicted)
    }

    /// What the entries cost together (see ``entryCost(answer:scopeBytes:identifier:)``).
    package var byteCount: Int {
        state.withLock { $0.totalCost }
    }

    /// How many entries are kept.
    package var count: Int {
        state.withLock { $0.count }
    }
}
