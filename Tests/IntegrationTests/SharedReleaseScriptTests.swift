import Foundation
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
import Testing

/// The release script run by a real `redis-server` on groups of several
/// fetches at once (the releases of one loop turn): each group stores,
/// releases only the claims its token holds (in the claim keys, or leases
/// in the entry keys), holds none of them once its fetch has ended, and
/// answers its own publish flag.
@Suite("Release script", .serialized)
struct SharedReleaseScriptTests {
    private static var script: String { String(decoding: SharedTier.releaseScript.body, as: UTF8.self) }

    /// Runs the script on `keys` and `arguments` as the gateway sends them.
    private static func release(_ redis: RedisServer, keys: [String], arguments: [String]) throws -> String {
        try redis.cli(["EVAL", script, String(keys.count)] + keys + arguments)
    }

    @Test func groupsAreReleasedEachByItsOwnRules() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        // Group 1: stores a, b; holds both claims; b has a waiter.
        try redis.cli("SET", "c:a", "t1", "PX", "60000")
        try redis.cli("SET", "c:b", "t1", "PX", "60000")
        try redis.cli("SET", "w:b", "1", "PX", "60000")
        // Group 2: its claim lapsed and was taken by another token.
        try redis.cli("SET", "c:x", "other", "PX", "60000")
        try redis.cli("SET", "w:x", "1", "PX", "60000")
        // Group 3: holds its claim, nobody waits, stores nothing.
        try redis.cli("SET", "c:y", "t3", "PX", "60000")
        // Group 4: leases in the entry keys; stores l1 (a replica waits),
        // and l2, which another token took over.
        try redis.cli("SET", "p:l1", "OGC1t4", "PX", "60000")
        try redis.cli("SET", "w:l1", "1", "PX", "60000")
        try redis.cli("SET", "p:l2", "OGC1other", "PX", "60000")
        // Group 5: leases, nothing stored: m1 waited, m2 did not (both
        // deleted), m3 is another token's (untouched).
        try redis.cli("SET", "p:m1", "OGC1t5", "PX", "60000")
        try redis.cli("SET", "w:m1", "1", "PX", "60000")
        try redis.cli("SET", "p:m2", "OGC1t5", "PX", "60000")
        try redis.cli("SET", "p:m3", "OGC1other", "PX", "60000")
        try redis.cli("SET", "w:m3", "1", "PX", "60000")
        let keys = [
            "p:a", "p:b", "c:a", "c:b", "w:a", "w:b", "c:x", "w:x", "c:y", "w:y",
            "p:l1", "p:l2", "w:l1", "w:l2", "p:m1", "p:m2", "p:m3", "w:m1", "w:m2", "w:m3",
        ]
        let arguments = [
            "t1", "2", "1", "c", "entry-a", "30000", "entry-b", "30000",
            "t2", "1", "0", "c",
            "t3", "1", "0", "c",
            "OGC1t4", "2", "1", "p", "entry-l1", "30000", "entry-l2", "30000",
            "OGC1t5", "3", "0", "p",
        ]
        let reply = try Self.release(redis, keys: keys, arguments: arguments)
        #expect(reply.split(whereSeparator: \.isNewline).map(String.init) == ["1", "0", "0", "1", "1"])
        #expect(try redis.cli("GET", "p:a") == "entry-a")
        #expect(try redis.cli("GET", "p:b") == "entry-b")
        // a: nobody waited, b: a replica waited (the group publishes): both
        // released at once, so a call arriving next fetches without a wait.
        #expect(try redis.cli("EXISTS", "c:a") == "0")
        #expect(try redis.cli("EXISTS", "c:b") == "0")
        #expect(try redis.cli("EXISTS", "w:b") == "0")
        // x: not ours; untouched, its waiter's flag too.
        #expect(try redis.cli("GET", "c:x") == "other")
        #expect(try redis.cli("EXISTS", "w:x") == "1")
        // y: released.
        #expect(try redis.cli("EXISTS", "c:y") == "0")
        // l1, l2: the entries replace the leases, whoever held them; only
        // l1's waiter counts, and its flag goes.
        #expect(try redis.cli("GET", "p:l1") == "entry-l1")
        #expect(try redis.cli("GET", "p:l2") == "entry-l2")
        #expect((Int(try redis.cli("PTTL", "p:l1")) ?? 0) > 1000)
        #expect(try redis.cli("EXISTS", "w:l1") == "0")
        // m1 and m2: released; m3: not ours.
        #expect(try redis.cli("EXISTS", "p:m1") == "0")
        #expect(try redis.cli("EXISTS", "w:m1") == "0")
        #expect(try redis.cli("EXISTS", "p:m2") == "0")
        #expect(try redis.cli("GET", "p:m3") == "OGC1other")
        #expect(try redis.cli("EXISTS", "w:m3") == "1")
    }

    /// The usual release (no replica waited for any group) is answered by
    /// the integer 0 alone, not one 0 per group; its claims go all the same.
    @Test func groupsNobodyWaitedForAreAnsweredByZero() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        // Two leases in entry keys and one claim, no wait flag.
        try redis.cli("MSET", "p:n1", "OGC1t6", "p:n2", "OGC1t7", "c:n3", "t8")
        let reply = try Self.release(
            redis, keys: ["p:n1", "w:n1", "p:n2", "w:n2", "c:n3", "w:n3"],
            arguments: ["OGC1t6", "1", "0", "p", "OGC1t7", "1", "0", "p", "t8", "1", "0", "c"]
        )
        #expect(reply == "0")
        #expect(try redis.cli("EXISTS", "p:n1", "p:n2", "c:n3") == "0")
    }
}
