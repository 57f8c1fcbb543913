import Foundation
@testable import SharedTier
import Testing

/// The claim script run by a real `redis-server`, one identifier in each
/// state an entry key and a claim key can be in: where the claim goes
/// (a lease in the entry key, or the claim key beside an entry), what is
/// taken over, and what is waited for.
@Suite("Claim script", .serialized)
struct SharedClaimScriptTests {
    @Test func eachStateOfTheKeysGetsItsClaim() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let script = String(decoding: SharedTier.claimScript.body, as: UTF8.self)
        let entry = "OGW1-an-entry-kept-for-stale-answers"
        // a: nothing there.
        // b: this token's lease.
        try redis.cli("SET", "p:b", "OGC1t", "PX", "500")
        // (A lease of 60 s below, so a slow test machine still sees what
        // the script wrote.)
        // c: another replica's lease.
        try redis.cli("SET", "p:c", "OGC1other", "PX", "50000")
        // d, e: "leases" no replica writes: longer than a lease, no expiry.
        try redis.cli("SET", "p:d", "OGC1forged", "PX", "600000")
        try redis.cli("SET", "p:e", "OGC1forged")
        // f: bytes that are neither; g: a key of another type.
        try redis.cli("SET", "p:f", "garbage")
        try redis.cli("HSET", "p:g", "field", "value")
        // h: an entry, its claim key free; i: an entry, its claim key held
        // by another replica; j: an entry, a claim key no replica writes.
        for key in ["p:h", "p:i", "p:j"] { try redis.cli("SET", key, entry, "PX", "60000") }
        try redis.cli("SET", "c:i", "other", "PX", "50000")
        try redis.cli("SET", "c:j", "forged", "PX", "600000")
        // k: another lease of this replica (a lookup's, or an ended
        // fetch's); l: an entry, its claim key held by this replica too.
        try redis.cli("SET", "p:k", "OGC1mine-7", "PX", "50000")
        try redis.cli("SET", "p:l", entry, "PX", "60000")
        try redis.cli("SET", "c:l", "mine-9", "PX", "50000")
        // m: nothing there, but a replica waited (its flag is there): won,
        // and the flag says so (1, not 3).
        try redis.cli("SET", "w:m", "1", "PX", "50000")

        let ids = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"]
        let keys = ids.map { "c:\($0)" } + ids.map { "w:\($0)" } + ids.map { "p:\($0)" }
        let reply = try redis.cli(["EVAL", script, String(keys.count)] + keys + ["t", "60000", "OGC1t", "mine-"])
        // Won in the entry key 1, in the claim key 2; 2 more where no wait
        // flag was there (all but m); held 0.
        #expect(reply.split(whereSeparator: \.isNewline).map(String.init) == ["3", "3", "0", "3", "3", "3", "3", "4", "0", "4", "3", "4", "1"])

        func ttl(_ key: String) throws -> Int { Int(try redis.cli("PTTL", key)) ?? -3 }
        // Leases in the entry keys, for a lease's time.
        for id in ["a", "b", "d", "e", "f", "g", "k", "m"] {
            #expect(try redis.cli("GET", "p:\(id)") == "OGC1t", "\(id)")
            #expect((50001...60000).contains(try ttl("p:\(id)")), "\(id)")
        }
        // Waited for: the other replica's lease untouched, the wait flagged.
        #expect(try redis.cli("GET", "p:c") == "OGC1other")
        #expect(try redis.cli("EXISTS", "w:c") == "1")
        #expect(try redis.cli("GET", "c:i") == "other")
        #expect(try redis.cli("EXISTS", "w:i") == "1")
        // Beside an entry, which stays: the claim key.
        for id in ["h", "j", "l"] {
            #expect(try redis.cli("GET", "p:\(id)") == entry, "\(id)")
            #expect(try redis.cli("GET", "c:\(id)") == "t", "\(id)")
            #expect((50001...60000).contains(try ttl("c:\(id)")), "\(id)")
        }
        // Nobody waits where the claim was won.
        for id in ["a", "b", "d", "e", "f", "g", "h", "j", "k", "l"] {
            #expect(try redis.cli("EXISTS", "w:\(id)") == "0", "\(id)")
        }
    }
}
