@testable import SharedTier
import Testing

/// The lookup script run by a real `redis-server`: one `SET … NX PX … GET`
/// per key, each key once; the usual miss (every key free) answered by
/// the integer 0 alone, anything else by one element per key.
@Suite("Lookup script", .serialized)
struct SharedLookupScriptTests {
    private static var script: String { String(decoding: SharedTier.lookupScript.body, as: UTF8.self) }

    @Test func everyKeyFreeIsAnsweredByZeroAndLeasesEveryKey() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let reply = try redis.cli("EVAL", Self.script, "3", "p:a", "p:b", "p:c", "OGC1t1", "1000")
        #expect(reply == "0")
        for key in ["p:a", "p:b", "p:c"] {
            #expect(try redis.cli("GET", key) == "OGC1t1")
            let ttl = Int(try redis.cli("PTTL", key)) ?? -1
            #expect((1...1000).contains(ttl))
        }
    }

    @Test func anEntryAKeyAskedTwiceOrAKeyOfAnotherTypeIsAnsweredKeyByKey() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        try redis.cli("SET", "p:a", "entry-a")
        try redis.cli("HSET", "p:h", "field", "value")
        // a: its entry; b: free (nil, the lease written); b again: the
        // position of its first (1-based); h: the error in its place.
        let reply = try redis.cli("EVAL", Self.script, "4", "p:a", "p:b", "p:b", "p:h", "OGC1t2", "1000")
        let lines = reply.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 4)
        #expect(Array(lines.prefix(3)) == ["entry-a", "", "2"])
        #expect(lines.last?.contains("WRONGTYPE") == true)
        #expect(try redis.cli("GET", "p:a") == "entry-a")
        #expect(try redis.cli("GET", "p:b") == "OGC1t2")
        #expect(try redis.cli("TYPE", "p:h") == "hash")
    }

    @Test func aLeaseAlreadyThereIsAnsweredKeyByKey() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        try redis.cli("SET", "p:a", "OGC1other", "PX", "60000")
        try redis.cli("SET", "p:c", "OGC1another", "PX", "60000")
        let reply = try redis.cli("EVAL", Self.script, "3", "p:a", "p:b", "p:c", "OGC1t3", "1000")
        #expect(reply.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) == ["OGC1other", "", "OGC1another"])
        #expect(try redis.cli("GET", "p:a") == "OGC1other")
        #expect(try redis.cli("GET", "p:b") == "OGC1t3")
        #expect(try redis.cli("GET", "p:c") == "OGC1another")
    }
}
