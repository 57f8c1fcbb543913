import EventTransport
import GatewayMetrics
import Logging
import RedisTier

extension SharedTier {
    /// The tier of `configuration`, connecting in the background; nil
    /// without `GATEWAY_REDIS_URL`. Readiness never waits for it.
    static func make(configuration: GatewayConfiguration, group: EventLoopGroup, metrics: GatewayMetrics, logger: Logger) -> SharedTier? {
        guard let redis = configuration.redis else { return nil }
        let tier = SharedTier(
            configuration: redis,
            loops: group.loops,
            maxTTLSeconds: configuration.cacheMaxTTLSeconds,
            maxStaleSeconds: configuration.cacheMaxStaleSeconds,
            coalesces: true,
            upstreamMaxIDs: configuration.upstreamMaxIDs,
            metrics: metrics,
            logger: logger
        )
        tier.start()
        return tier
    }
}
