/// An ordered JSON object (member order preserved for output).
///
/// Keys are unique. Building an object from members with a repeated key keeps
/// the key at its first position with its last value, which is what
/// `JSON.parse` does, so `{"a":1,"b":2,"a":3}` reads as `{"a":3,"b":2}`.
///
/// Keys are compared by their UTF-8 bytes, as RFC 8259 section 8.3 and
/// `JSON.parse` do, not by Swift's canonical equivalence: `"\u{E9}"` and
/// `"e\u{301}"` are two keys.
///
/// Lookups scan the members: objects in JSON-RPC requests and upstream bodies
/// hold a handful of keys, where a scan beats hashing and keeps values small.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// One member, as the sequence yields it.
    public typealias Element = (key: String, value: JSONValue)

    /// The members in order; keys are unique.
    private var members: [Element]

    /// An empty object.
    public init() {
        members = []
    }

    /// An object with `members` in order; a repeated key keeps its first
    /// position and its last value.
    public init(_ members: [(String, JSONValue)]) {
        self.members = []
        self.members.reserveCapacity(members.count)
        // A dictionary only pays off for big objects; a hostile body with
        // thousands of keys must not make parsing quadratic.
        if members.count <= 16 {
            for (key, value) in members {
                self[key] = value
            }
        } else {
            var positions: [UTF8Key: Int] = [:]
            positions.reserveCapacity(members.count)
            for (key, value) in members {
                if let position = positions[UTF8Key(text: key)] {
                    self.members[position].value = value
                } else {
                    positions[UTF8Key(text: key)] = self.members.count
                    self.members.append((key: key, value: value))
                }
            }
        }
    }

    /// An object taking `members` as its storage when their keys are unique
    /// (the usual case), so the parser's member array becomes the object
    /// without another allocation; a repeated key falls back to
    /// ``init(_:)``'s rule.
    init(takingMembers members: [Element]) {
        self.init()
        if members.count <= 16, Self.keysAreUnique(members) {
            self.members = members
        } else {
            self = JSONObject(members.map { ($0.key, $0.value) })
        }
    }

    /// Whether no key repeats; a scan beats hashing for the handful of keys
    /// of a request.
    private static func keysAreUnique(_ members: [Element]) -> Bool {
        for index in members.indices.dropFirst() {
            for earlier in members.indices[..<index] where members[earlier].key.hasSameUTF8(as: members[index].key) {
                return false
            }
        }
        return true
    }

    /// An object with the literal's members in order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }

    /// The value of the member named `key`.
    ///
    /// Setting replaces the value in place (the member keeps its position) or
    /// appends a new member; setting `nil` removes the member.
    public subscript(key: String) -> JSONValue? {
        get {
            members.first { $0.key.hasSameUTF8(as: key) }?.value
        }
        set {
            let position = members.firstIndex { $0.key.hasSameUTF8(as: key) }
            switch (position, newValue) {
            case (let position?, let value?):
                members[position].value = value
            case (let position?, nil):
                members.remove(at: position)
            case (nil, let value?):
                members.append((key: key, value: value))
            case (nil, nil):
                break
            }
        }
    }

    /// The keys in order.
    public var keys: [String] {
        members.map(\.key)
    }

    /// The number of members.
    public var count: Int {
        members.count
    }

    /// Whether the object has no members.
    public var isEmpty: Bool {
        members.isEmpty
    }

    /// The members in order.
    public func makeIterator() -> IndexingIterator<[Element]> {
        members.makeIterator()
    }

    /// Equal when the same keys hold equal values in the same order, so that
    /// equal objects serialize to the same bytes.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.members.elementsEqual(rhs.members) { $0.key.hasSameUTF8(as: $1.key) && $0.value == $1.value }
    }

    /// Hashes the members in order, matching ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(members.count)
        for member in members {
            member.key.hashUTF8(into: &hasher)
            hasher.combine(member.value)
        }
    }
}
