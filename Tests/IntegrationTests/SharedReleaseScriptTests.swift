import Foundation
@testable import GatewayService
@testable import MemoryTier
@testable import RedisTier
import Testing

/// The release script run by a real `redis-server` on groups of several
/// fetches at once (the releases of one loop turn): each group stores,
/// releases only the claims its token holds, holds those a replica waits
/// on, and answers its own publish flag.
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
        let keys = ["p:a", "p:b", "c:a", "c:b", "w:a", "w:b", "c:x", "w:x", "c:y", "w:y"]
        let arguments = [
            "t1", "60000", "2", "1", "entry-a", "30000", "entry-b", "30000",
            "t2", "60000", "1", "0",
            "t3", "0", "1", "0",
        ]
        let reply = try redis.cli(["EVAL", script, String(keys.count)] + keys + arguments)
        #expect(reply.split(whereSeparator: \.isNewline).map(String.init) == ["1", "0", "0"])
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
    }
}
