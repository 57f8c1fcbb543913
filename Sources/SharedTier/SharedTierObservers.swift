import Logging
import EventTransport
import GatewayMetrics

/// The subscriber's ups and downs: the flag, then the common log.
struct SubscriberObserver: RedisConnectionObserver {
    package let flag: ReadyFlag
    package let inner: SharedTierObserver
    package let waiters: SharedOutcomeWaiters

    package func redisConnected(loop: String) {
        flag.set(true)
    }

    package func redisConnectionClosed(loop: String) {
        flag.set(false)
    }

    package func redisPasswordRefused(loop: String, _ refused: Bool) {
        inner.redisPasswordRefused(loop: "subscriber", refused)
    }

    package func redisConnectionFailed(loop: String, message: String, wasReady: Bool) {
        flag.set(false)
        // Nothing published from now on reaches this replica.
        if wasReady { waiters.subscriberLost() }
        inner.log.warning("the shared tier's subscriber is unavailable; fetching without coalescing across replicas", metadata: [
            "redis": "\(inner.endpoint)", "error": "\(message)",
        ])
    }
}

/// Logs the connections' ups and downs through the tier's rate limit,
/// and tells the circuit.
struct SharedTierObserver: RedisConnectionObserver {
    package let log: RateLimitedLog
    package let endpoint: String
    package let metrics: GatewayMetrics
    package let circuit: SharedTierCircuit

    package func redisConnected(loop: String) {
        metrics.recordSharedTierConnections(+1)
        log.info("connected to the shared tier", metadata: ["redis": "\(endpoint)", "loop": "\(loop)"])
        circuit.connectionReady()
    }

    package func redisConnectionClosed(loop: String) {
        metrics.recordSharedTierConnections(-1)
        circuit.connectionClosed()
    }

    package func redisTimedOut(loop: String) {
        metrics.recordSharedTierTimeout()
    }

    package func redisPasswordRefused(loop: String, _ refused: Bool) {
        metrics.recordSharedTierPasswordRefused(refused, loop: loop)
    }

    package func redisConnectionFailed(loop: String, message: String, wasReady: Bool) {
        if wasReady {
            metrics.recordSharedTierConnections(-1)
            circuit.connectionLost(message)
        }
        log.warning("the shared tier is unavailable; carrying on without it and reconnecting", metadata: [
            "redis": "\(endpoint)", "loop": "\(loop)", "error": "\(message)",
        ])
    }
}
