import Logging
package import GatewayMetrics
import Synchronization

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
