import EventTransport
import GatewayMetrics
import Logging
import SharedTier

extension SharedTier {
    /// The tier of `configuration`, connecting in the background; nil
    /// without `GATEWAY_REDIS_URL`, and with the embedded catalog (or
    /// `GATEWAY_CATALOG`): every replica answers the catalog itself, at
    /// once, so the tier could share nothing and would cost each miss a
    /// round trip. Start-up says so. Readiness never waits for it.
    static func make(configuration: GatewayConfiguration, group: EventLoopGroup, metrics: GatewayMetrics, logger: Logger) -> SharedTier? {
        guard let redis = configuration.redis else { return nil }
        guard configuration.upstream != nil else {
            logger.warning(
                "GATEWAY_REDIS_URL is set, but the gateway serves a catalog (no ONSIDE_UPSTREAM_URL): the shared tier is not used, as every replica answers the catalog itself; no call waits for Redis",
                metadata: ["redis": "\(redis.redactedURL)"]
            )
            return nil
        }
        let tier = SharedTier(
            configuration: redis,
            loops: group.loops,
            maxTTLSeconds: configuration.cacheMaxTTLSeconds,
            maxStaleSeconds: configuration.cacheMaxStaleSeconds,
            coalesces: true,
            upstreamMaxIDs: configuration.upstreamMaxIDs,
            // No lease is waited on longer than one upstream attempt, nor
            // with less time left than that; but never more than half the
            // call's deadline, or a configuration whose attempts may take
            // the whole deadline would never wait for another replica.
            waitPatience: .milliseconds(min(configuration.upstreamTimeoutMS, configuration.requestTimeoutMS / 2)),
            metrics: metrics,
            logger: logger
        )
        tier.start()
        return tier
    }
}
