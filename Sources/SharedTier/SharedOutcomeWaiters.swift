package import EventTransport
package import MemoryTier
import Synchronization

/// The drivers waiting for other replicas' outcomes, by (scope,
/// identifier). The subscriber hands each message here (on its loop); each
/// driver named in it gets the message on its own loop (each held in a
/// ``LoopBound``: touched only there).
package final class SharedOutcomeWaiters: Sendable {
    private let table = Mutex<[ScopedIdentifier: [ObjectIdentifier: LoopBound<SharedClaimDriver>]]>([:])
    /// `UPSTREAM_MAX_IDS`: no fetch names more, so no message may.
    private let maxIdentifiers: Int
    /// Counts a message that does not parse (`gateway_shared_cache_errors_total`).
    private let refused: @Sendable () -> Void

    package init(maxIdentifiers: Int, refused: @escaping @Sendable () -> Void = {}) {
        self.maxIdentifiers = maxIdentifiers
        self.refused = refused
    }

    /// On the driver's loop.
    package func register(_ driver: LoopBound<SharedClaimDriver>, scope: FetchScope, identifiers: [String]) {
        let id = ObjectIdentifier(driver.value)
        table.withLock { table in
            for key in ScopedIdentifier.keys(scope: scope, identifiers: identifiers) { table[key, default: [:]][id] = driver }
        }
    }

    /// On the driver's loop.
    package func unregister(_ driver: LoopBound<SharedClaimDriver>, scope: FetchScope, identifiers: [String]) {
        let id = ObjectIdentifier(driver.value)
        table.withLock { table in
            for key in ScopedIdentifier.keys(scope: scope, identifiers: identifiers) {
                table[key]?[id] = nil
                if table[key]?.isEmpty == true { table[key] = nil }
            }
        }
    }

    /// The subscriber dropped: every waiting driver stops waiting.
    package func subscriberLost() {
        let drivers = table.withLock { table in
            var all: [ObjectIdentifier: LoopBound<SharedClaimDriver>] = [:]
            for entry in table.values { all.merge(entry) { first, _ in first } }
            return all
        }
        for driver in drivers.values {
            driver.loop.execute { driver.value.sharedTierLost() }
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
        var drivers: [ObjectIdentifier: LoopBound<SharedClaimDriver>] = [:]
        table.withLock { table in
            for key in ScopedIdentifier.keys(scope: message.scope, identifiers: message.identifiers) {
                for (id, driver) in table[key] ?? [:] { drivers[id] = driver }
            }
        }
        for driver in drivers.values {
            driver.loop.execute { driver.value.received(message) }
        }
    }
}
