/// A map bounded by a budget of bytes, evicting with SIEVE (Zhang et al.,
/// "SIEVE is Simpler than LRU", NSDI '24).
///
/// Entries sit in one FIFO queue, newest at the head, each with a
/// `visited` bit. A lookup only sets that bit: hits move nothing. When an
/// insert needs room, a hand walks from where it last stopped toward the
/// head (starting at the tail, wrapping back to it past the head): a
/// visited entry has its bit cleared and is passed over, the first
/// unvisited one is evicted. A scan of identifiers asked once each therefore
/// evicts its own entries before those that were asked again.
///
/// Each entry has a cost in bytes, given by the caller; the sum of costs
/// never exceeds ``budget``. Room is made *before* the new entry goes in at
/// the head, so an insert never evicts the entry it stores; an entry costing
/// more than the whole budget is not stored. Expiry is the caller's concern.
///
/// Nodes live in one array linked by indices, with freed slots reused, so
/// an entry costs no allocation of its own beyond what its key and value
/// hold. Not thread-safe: the owner locks.
package struct SieveCache<Key: Hashable, Value> {
    private struct Node {
        package var key: Key?
        package var value: Value?
        package var cost: Int
        package var visited: Bool
        /// Toward the head (newer entries), or ``SieveCache/none``.
        package var newer: Int
        /// Toward the tail (older entries), or ``SieveCache/none``.
        package var older: Int
    }

    private static var none: Int { -1 }

    /// The most the costs of all entries may add up to.
    package let budget: Int
    /// The sum of every entry's cost, never above ``budget``.
    private(set) var totalCost = 0
    private var nodes: [Node] = []
    private var freeSlots: [Int] = []
    private var slots: [Key: Int] = [:]
    private var head = Self.none
    private var tail = Self.none
    private var hand = Self.none

    package init(budget: Int) {
        precondition(budget >= 0, "a budget is not negative")
        self.budget = budget
    }

    /// The bytes of one node in the queue's array.
    package static var nodeStride: Int { MemoryLayout<Node>.stride }

    package var count: Int { slots.count }
    package var isEmpty: Bool { slots.isEmpty }

    /// The value for `key`, marking the entry visited (a hit).
    package mutating func value(forKey key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        nodes[slot].visited = true
        return nodes[slot].value
    }

    /// Whether `key` has an entry; marks nothing.
    package func contains(_ key: Key) -> Bool { slots[key] != nil }

    /// Stores `value` for `key` at the head, after evicting as many entries
    /// as it takes for `cost` to fit; `onEvict` sees each evicted entry, in
    /// eviction order. A value already kept for `key` is replaced (the new
    /// one keeps the old one's visited bit, but not its place in the queue,
    /// and does not count as an eviction). Returns false, storing nothing,
    /// when `cost` exceeds the whole budget (an old value for `key` is then
    /// removed all the same: it is no longer the current answer).
    @discardableResult
    package mutating func insert(_ value: Value, forKey key: Key, cost: Int, onEvict: (Key, Value) -> Void = { _, _ in }) -> Bool {
        precondition(cost >= 0, "a cost is not negative")
        let visited = removeNode(forKey: key)?.visited ?? false
        guard cost <= budget else { return false }
        while totalCost + cost > budget {
            let (evictedKey, evictedValue) = evict()
            onEvict(evictedKey, evictedValue)
        }
        let node = Node(key: key, value: value, cost: cost, visited: visited, newer: Self.none, older: head)
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            nodes[slot] = node
        } else {
            slot = nodes.count
            nodes.append(node)
        }
        if head != Self.none { nodes[head].newer = slot }
        head = slot
        if tail == Self.none { tail = slot }
        slots[key] = slot
        totalCost += cost
        return true
    }

    /// Removes the entry for `key` (not an eviction) and returns its value.
    @discardableResult
    package mutating func removeValue(forKey key: Key) -> Value? {
        removeNode(forKey: key)?.value
    }

    /// Keys from the head (newest) to the tail (oldest), for tests.
    package var keysNewestFirst: [Key] {
        var keys: [Key] = []
        var slot = head
        while slot != Self.none {
            keys.append(nodes[slot].key!)
            slot = nodes[slot].older
        }
        return keys
    }

    /// Moves the hand to the first unvisited entry, clearing the bits it
    /// passes, and evicts that entry.
    ///
    /// - Precondition: not empty.
    private mutating func evict() -> (Key, Value) {
        precondition(head != Self.none, "nothing to evict")
        var slot = hand == Self.none ? tail : hand
        while nodes[slot].visited {
            nodes[slot].visited = false
            slot = nodes[slot].newer == Self.none ? tail : nodes[slot].newer
        }
        // The hand stays where it evicted: unlinking moves it one step on.
        hand = slot
        let key = nodes[slot].key!
        let node = unlink(slot)
        slots[key] = nil
        return (key, node.value!)
    }

    private mutating func removeNode(forKey key: Key) -> Node? {
        guard let slot = slots.removeValue(forKey: key) else { return nil }
        return unlink(slot)
    }

    /// Takes `slot` out of the queue, moving the hand past it toward the
    /// head, and frees the slot (its key and value are released).
    private mutating func unlink(_ slot: Int) -> Node {
        let node = nodes[slot]
        if hand == slot { hand = node.newer }
        if node.newer != Self.none { nodes[node.newer].older = node.older } else { head = node.older }
        if node.older != Self.none { nodes[node.older].newer = node.newer } else { tail = node.newer }
        nodes[slot].key = nil
        nodes[slot].value = nil
        freeSlots.append(slot)
        totalCost -= node.cost
        return node
    }
}
