@testable import GatewayMetrics
@testable import MemoryTier
import Testing

/// ``SieveCache``: the byte budget, SIEVE's eviction order, replacement and
/// removal, with exact expectations.
@Suite("SieveCache")
struct SieveCacheTests {
    /// One step of an operation table.
    enum Step {
        /// Insert `key` with `cost`; `evicts` are the keys evicted, in order.
        case insert(String, cost: Int, evicts: [String])
        /// Look `key` up; `found` says whether it is there.
        case lookup(String, found: Bool)
        case remove(String)
    }

    /// Runs `steps` on a cache of `budget`, checking each step's evictions,
    /// that the budget holds after every step, and that the cost total is
    /// the sum of what is kept.
    static func run(budget: Int, _ steps: [Step], sourceLocation: SourceLocation = #_sourceLocation) -> SieveCache<String, Int> {
        var cache = SieveCache<String, Int>(budget: budget)
        var costs: [String: Int] = [:]
        for (number, step) in steps.enumerated() {
            switch step {
            case .insert(let key, let cost, let expected):
                var evicted: [String] = []
                cache.insert(number, forKey: key, cost: cost) { key, _ in evicted.append(key) }
                #expect(evicted == expected, "step \(number): insert \(key)", sourceLocation: sourceLocation)
                for key in evicted { costs[key] = nil }
                costs[key] = cost <= budget ? cost : nil
            case .lookup(let key, let found):
                let value = cache.value(forKey: key)
                #expect((value != nil) == found, "step \(number): lookup \(key)", sourceLocation: sourceLocation)
            case .remove(let key):
                cache.removeValue(forKey: key)
                costs[key] = nil
            }
            #expect(cache.totalCost <= budget, "step \(number)", sourceLocation: sourceLocation)
            #expect(cache.totalCost == costs.values.reduce(0, +), "step \(number)", sourceLocation: sourceLocation)
            #expect(Set(cache.keysNewestFirst) == Set(costs.keys), "step \(number)", sourceLocation: sourceLocation)
            #expect(cache.count == costs.count, "step \(number)", sourceLocation: sourceLocation)
        }
        return cache
    }

    @Test func withoutHitsItEvictsInInsertionOrder() {
        let cache = Self.run(budget: 30, [
            .insert("a", cost: 10, evicts: []),
            .insert("b", cost: 10, evicts: []),
            .insert("c", cost: 10, evicts: []),
            .insert("d", cost: 10, evicts: ["a"]),
            .insert("e", cost: 10, evicts: ["b"]),
            // Needing 20 bytes takes two entries.
            .insert("f", cost: 20, evicts: ["c", "d"]),
        ])
        #expect(cache.keysNewestFirst == ["f", "e"])
        #expect(cache.totalCost == 30)
    }

    /// The table of the SIEVE paper's idea: the hand clears visited bits as
    /// it passes and stays where it evicted.
    @Test func theHandPassesVisitedEntriesAndKeepsItsPlace() {
        let cache = Self.run(budget: 40, [
            .insert("a", cost: 10, evicts: []),
            .insert("b", cost: 10, evicts: []),
            .insert("c", cost: 10, evicts: []),
            .insert("d", cost: 10, evicts: []),
            .lookup("a", found: true),
            .lookup("c", found: true),
            // Hand from the tail: a visited (cleared), b evicted; hand on c.
            .insert("e", cost: 10, evicts: ["b"]),
            // c visited (cleared), d evicted; hand on e.
            .insert("f", cost: 10, evicts: ["d"]),
            // e evicted; hand on f.
            .insert("g", cost: 10, evicts: ["e"]),
            .lookup("g", found: true),
            // f evicted; the hand is on g.
            .insert("h", cost: 10, evicts: ["f"]),
            // g visited (cleared), then h, newer than g and never hit, goes.
            // h was the head: the hand is past it, and i comes after.
            .insert("i", cost: 10, evicts: ["h"]),
            // So the hand starts again from the tail: a's bit was cleared.
            .insert("j", cost: 10, evicts: ["a"]),
            // Then c, whose bit was cleared too.
            .insert("k", cost: 10, evicts: ["c"]),
            .lookup("b", found: false),
        ])
        #expect(cache.keysNewestFirst == ["k", "j", "i", "g"])
    }

    @Test func entriesThatWereHitSurviveAScanOfOneOffKeys() {
        var cache = SieveCache<String, Int>(budget: 100)
        for key in ["hot1", "hot2"] {
            cache.insert(0, forKey: key, cost: 10)
            _ = cache.value(forKey: key)
        }
        var evictions = 0
        for number in 0 ..< 1000 {
            cache.insert(number, forKey: "scan\(number)", cost: 10) { _, _ in evictions += 1 }
            #expect(cache.totalCost <= 100)
        }
        #expect(cache.contains("hot1"))
        #expect(cache.contains("hot2"))
        #expect(cache.count == 10)
        #expect(evictions == 1002 - 10)
        // The scan kept its newest keys.
        #expect(cache.contains("scan999"))
        #expect(!cache.contains("scan991"))
    }

    @Test func replacingAKeyUpdatesTheTotalAndIsNoEviction() {
        let cache = Self.run(budget: 30, [
            .insert("a", cost: 10, evicts: []),
            .insert("b", cost: 10, evicts: []),
            .insert("a", cost: 15, evicts: []),
            .insert("a", cost: 5, evicts: []),
            // a now sits at the head: b is the oldest.
            .insert("a", cost: 20, evicts: []),
            .insert("c", cost: 10, evicts: ["b"]),
        ])
        #expect(cache.keysNewestFirst == ["c", "a"])
        #expect(cache.totalCost == 30)
    }

    @Test func aReplacementKeepsItsVisitedBit() {
        let cache = Self.run(budget: 20, [
            .insert("a", cost: 10, evicts: []),
            .lookup("a", found: true),
            .insert("a", cost: 10, evicts: []),
            .insert("b", cost: 10, evicts: []),
            // a, at the tail, is still visited: the hand passes it for b.
            .insert("c", cost: 10, evicts: ["b"]),
        ])
        #expect(cache.keysNewestFirst == ["c", "a"])
    }

    @Test func anEntryLargerThanTheBudgetIsNotStored() {
        var cache = SieveCache<String, Int>(budget: 10)
        let small = cache.insert(1, forKey: "a", cost: 4)
        let big = cache.insert(2, forKey: "big", cost: 11)
        #expect(small && !big)
        #expect(cache.keysNewestFirst == ["a"])
        // Exactly the budget fits, evicting everything else.
        var evicted: [String] = []
        let whole = cache.insert(3, forKey: "whole", cost: 10) { key, _ in evicted.append(key) }
        #expect(whole)
        #expect(evicted == ["a"])
        #expect(cache.totalCost == 10)
        // An oversized replacement drops the old value.
        let larger = cache.insert(4, forKey: "whole", cost: 12)
        #expect(!larger)
        #expect(cache.isEmpty)
        #expect(cache.totalCost == 0)
    }

    @Test func aZeroBudgetKeepsNothingButFreeEntries() {
        var cache = SieveCache<String, Int>(budget: 0)
        let costly = cache.insert(1, forKey: "a", cost: 1)
        let free = cache.insert(1, forKey: "free", cost: 0)
        #expect(!costly && free)
        #expect(cache.totalCost == 0)
    }

    @Test func removalFreesItsCostAndMovesTheHandOn() {
        let cache = Self.run(budget: 30, [
            .insert("a", cost: 10, evicts: []),
            .insert("b", cost: 10, evicts: []),
            .insert("c", cost: 10, evicts: []),
            .lookup("b", found: true),
            // a evicted; the hand is on b.
            .insert("d", cost: 10, evicts: ["a"]),
            // The hand's entry removed: the hand moves to c.
            .remove("b"),
            .remove("missing"),
            .insert("e", cost: 10, evicts: []),
            .insert("f", cost: 10, evicts: ["c"]),
            .remove("f"),
            .remove("d"),
            .remove("e"),
            .insert("g", cost: 30, evicts: []),
        ])
        #expect(cache.keysNewestFirst == ["g"])
    }

    /// Slots freed by eviction and removal are reused: many inserts through
    /// a small budget keep the queue's order intact.
    @Test func freedSlotsAreReusedInOrder() {
        var cache = SieveCache<Int, Int>(budget: 5)
        for key in 0 ..< 100 {
            cache.insert(key, forKey: key, cost: 1)
            if key % 7 == 0 { cache.removeValue(forKey: key - 3) }
        }
        #expect(cache.keysNewestFirst == [99, 98, 97, 96, 94])
        let value = cache.value(forKey: 97)
        #expect(value == 97)
    }
}
