import Foundation
import Testing

/// One TLS test upstream, one real Redis and `replicas` gateways sharing
/// both: the replicas of one deployment.
enum SharedTierScenario {
    /// Runs `body` and stops everything afterwards, also when it throws.
    /// With `waitForRedis`, every replica's connections are ready first.
    static func run(
        replicas: Int = 2,
        password: String? = nil,
        environment: [String: String] = [:],
        waitForRedis: Bool = true,
        _ body: (RunningUpstream, [RunningGateway], RedisServer) async throws -> Void
    ) async throws {
        let redis = try await RedisServer.start(password: password)
        defer { redis.stop() }
        // The tests of Redis's deadline set their own; the others must not
        // depend on a round trip within the 50 ms default, which a gateway
        // under ThreadSanitizer, handling a herd, can miss.
        var settings = ["GATEWAY_REDIS_URL": redis.url(), "GATEWAY_REDIS_PREFIX": "test-gw:", "GATEWAY_REDIS_TIMEOUT_MS": "2000"]
        settings.merge(environment) { _, new in new }
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        var gateways: [RunningGateway] = []
        do {
            for _ in 0..<replicas {
                gateways.append(try RunningGateway.start(upstream.gatewayEnvironment(settings)))
            }
            if waitForRedis {
                for gateway in gateways { try await gateway.waitForSharedTier() }
                // And every replica's subscriber: until it is subscribed, a
                // replica fetches alone (no leases), and a herd begun
                // before then can cost a second upstream call (a herd test
                // once made two under ThreadSanitizer, where connecting is
                // slow). The subscriber is ready once Redis
                // counts it: the replica marks it ready as it subscribes.
                // (A test pointing the replicas at a Redis of its own waits
                // for their connections only.)
                if settings["GATEWAY_REDIS_URL"] == redis.url() {
                    let channel = (settings["GATEWAY_REDIS_PREFIX"] ?? "onside-gw:") + "v1:outcomes"
                    try await UpstreamScenario.waitFor("every replica subscribed") {
                        let reply = (try? redis.cli("PUBSUB", "NUMSUB", channel)) ?? ""
                        return reply.split(whereSeparator: \.isNewline).last.map(String.init) == String(replicas)
                    }
                }
            }
            try await body(upstream, gateways, redis)
        } catch {
            for gateway in gateways { await gateway.stop() }
            throw error
        }
        for gateway in gateways { await gateway.stop() }
    }
}
