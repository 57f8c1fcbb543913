import Foundation
@testable import GatewayService
@testable import MemoryTier
@testable import RedisTier
import Testing

/// The release script run by a real `redis-server` on groups of several
/// fetches at once (the releases of one loop turn): each group stores,
/// releases only the claims its token holds (in the claim keys, or leases
/// in the entry keys), holds those a replica waits on, and answers its own
/// publish flag.
@Suite("Release script", .serialized)
struct SharedReleaseScriptTests {
    @Test func groupsAreReleasedEachByItsOwnRules() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let script = String(decoding: SharedTier.releaseScript.body, as: UTF8.self)
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
        // Group 5: leases, nothing stored: m1 waited (held as published),
        // m2 did not (deleted), m3 is another token's (untouched).
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
            "t1", "60000", "2", "1", "c", "entry-a", "30000", "entry-b", "30000",
            "t2", "60000", "1", "0", "c",
            "t3", "0", "1", "0", "c",
            "OGC1t4", "60000", "2", "1", "p", "entry-l1", "30000", "entry-l2", "30000",
            "OGC1t5", "60000", "3", "0", "p",
        ]
        let reply = try redis.cli(["EVAL", script, String(keys.count)] + keys + arguments)
        #expect(reply.split(whereSeparator: \.isNewline).map(String.init) == ["1", "0", "0", "1", "1"])
        #expect(try redis.cli("GET", "p:a") == "entry-a")
        #expect(try redis.cli("GET", "p:b") == "entry-b")
        // a: nobody waited, released; b: a replica waited, held as published
        // for the hold (60 s here, so a slow test machine still sees it).
        #expect(try redis.cli("EXISTS", "c:a") == "0")
        #expect(try redis.cli("GET", "c:b") == "t1:published")
        #expect((Int(try redis.cli("PTTL", "c:b")) ?? 0) > 1000)
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
        // m1: held as published; m2: released; m3: not ours.
        #expect(try redis.cli("GET", "p:m1") == "OGC1t5:published")
        #expect(try redis.cli("EXISTS", "w:m1") == "0")
        #expect(try redis.cli("EXISTS", "p:m2") == "0")
        #expect(try redis.cli("GET", "p:m3") == "OGC1other")
        #expect(try redis.cli("EXISTS", "w:m3") == "1")
    }
}
