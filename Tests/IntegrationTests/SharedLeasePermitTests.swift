import EventTransport
@testable import GatewayMetrics
import Logging
@testable import MemoryTier
import ProductsDomain
@testable import SharedTier
import Testing

/// The leases a lookup won, as a `SharedLeasePermit`, against a real
/// `redis-server` and a tier on a loop of its own: given back when dropped
/// unused or released, kept when a fetch adopts them.
@Suite("Shared lease permit", .serialized)
struct SharedLeasePermitTests {
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)

    /// A coalescing tier on one loop against `port`, closed afterwards.
    static func withTier(port: Int, _ body: (EventLoop, SharedTier) async throws -> Void) async throws {
        let loop = try EventLoop(name: "permit-test")
        loop.start()
        let settings = RedisSettings(host: "localhost", port: port, password: nil, database: 0, timeoutMS: 500, prefix: "permit:")
        let tier = SharedTier(
            configuration: settings, loops: [loop], maxTTLSeconds: 60, maxStaleSeconds: 60, coalesces: true,
            metrics: GatewayMetrics(), logger: Logger(label: "permit-test")
        )
        tier.start()
        defer {
            tier.close()
            loop.stop()
            loop.waitUntilStopped()
        }
        try await UpstreamScenario.waitFor("the tier to coalesce") { await run(on: loop) { tier.coalescingConnection(on: loop) != nil } }
        try await body(loop, tier)
    }

    static func run<T: Sendable>(on loop: EventLoop, _ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            _ = loop.execute { continuation.resume(returning: work()) }
        }
    }

    /// One lookup of `identifiers`: the leases it won.
    static func lookup(_ identifiers: [String], _ tier: SharedTier, on loop: EventLoop) async -> SharedPreclaim? {
        await withCheckedContinuation { continuation in
            _ = loop.execute {
                tier.lookup(scope: scope, identifiers: identifiers, on: loop) { found in continuation.resume(returning: found?.claims) }
            }
        }
    }

    static func entryKey(_ identifier: String, _ tier: SharedTier) -> String {
        String(decoding: tier.keys.entry(scope, identifier), as: UTF8.self)
    }

    /// Leases on `identifiers` under `token`, written as a lookup writes
    /// them but with no expiry: a lookup's lease lapses after a second,
    /// which a loaded machine can take between two steps of a test (and a
    /// lapse would pass for a lease given back). Here only a release
    /// removes them.
    static func leases(_ identifiers: [String], token: String, _ tier: SharedTier, _ redis: RedisServer) throws -> SharedPreclaim {
        for identifier in identifiers {
            let set = try redis.cli(["SET", entryKey(identifier, tier), String(decoding: SharedLease.value(token: token), as: UTF8.self)])
            try #require(set == "OK")
        }
        return SharedPreclaim(token: token, scope: scope, wonAllOf: identifiers)
    }

    /// A permit nobody adopts or releases gives its leases back when it
    /// goes: the next lookup wins them again.
    @Test func aPermitDroppedUnusedGivesItsLeasesBack() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        try await Self.withTier(port: redis.port) { loop, tier in
            let won = try Self.leases(["a", "b"], token: "permit-test-1", tier, redis)
            #expect(won.wonCount == 2)
            #expect(await Self.run(on: loop) { () -> Bool in
                let permit = SharedLeasePermit(nil, tier: tier, on: loop)
                let empty = permit.isEmpty
                permit.release()
                return empty
            })
            #expect(try redis.cli("EXISTS", Self.entryKey("a", tier), Self.entryKey("b", tier)) == "2")
            #expect(await Self.lookup(["a", "b"], tier, on: loop)?.wonCount == 0)
            await Self.run(on: loop) { _ = SharedLeasePermit(won, tier: tier, on: loop) }
            try await UpstreamScenario.waitFor("the leases to go back") {
                (try? redis.cli("EXISTS", Self.entryKey("a", tier), Self.entryKey("b", tier))) == "0"
            }
            #expect(await Self.lookup(["a", "b"], tier, on: loop)?.wonCount == 2)
        }
    }

    /// An adopted permit gives nothing back (its fetch will); a released
    /// one gives its leases back at once. Both go out on the loop's one
    /// connection in order, so once the later release is seen, the
    /// adopted lease would have gone before it.
    @Test func anAdoptedPermitKeepsItsLeasesAReleasedOneGivesThemBack() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        try await Self.withTier(port: redis.port) { loop, tier in
            let kept = try Self.leases(["kept"], token: "permit-test-2", tier, redis)
            let given = try Self.leases(["given"], token: "permit-test-3", tier, redis)
            let adopted = await Self.run(on: loop) { SharedLeasePermit(kept, tier: tier, on: loop).adopt() }
            #expect(adopted?.wonIdentifiers == ["kept"])
            #expect(adopted?.token == kept.token)
            await Self.run(on: loop) { SharedLeasePermit(given, tier: tier, on: loop).release() }
            try await UpstreamScenario.waitFor("the released lease to go back") {
                (try? redis.cli("EXISTS", Self.entryKey("given", tier))) == "0"
            }
            #expect(try redis.cli("EXISTS", Self.entryKey("kept", tier)) == "1")
        }
    }
}
