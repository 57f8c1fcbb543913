/// An ordered list of HTTP header fields with case-insensitive lookup.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order they were received or added.
    public private(set) var fields: [(name: String, value: String)]

    public init() { fields = [] }

    /// An empty list with room for `capacity` fields, so a parser adding
    /// them does not grow it field by field.
    public init(reservingCapacity capacity: Int) {
        fields = []
        fields.reserveCapacity(capacity)
    }

    /// How many fields there are.
    public var count: Int { fields.count }

    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of `name`, compared case-insensitively.
    public subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// The values of two list fields in one pass over the fields: each
    /// field's value, or its values joined with commas when it was sent more
    /// than once (RFC 9110's rule for list fields); nil when absent. Names
    /// are compared only at their own length, so most fields are passed
    /// over on a count.
    public func listValues(_ first: String, _ second: String) -> (String?, String?) {
        var values: (String?, String?) = (nil, nil)
        let (firstCount, secondCount) = (first.utf8.count, second.utf8.count)
        for field in fields {
            let count = field.name.utf8.count
            if count == firstCount, field.name.caseInsensitiveEquals(first) {
                values.0 = values.0.map { $0 + "," + field.value } ?? field.value
            } else if count == secondCount, field.name.caseInsensitiveEquals(second) {
                values.1 = values.1.map { $0 + "," + field.value } ?? field.value
            }
        }
        return values
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// Appends a field, keeping any earlier ones of the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every field of `name` with one field.
    public mutating func replace(_ name: String, _ value: String) {
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
        fields.append((name: name, value: value))
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}

extension String {
    /// ASCII case-insensitive equality, as field names compare; no copy.
    func caseInsensitiveEquals(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        var left = self
        var right = other
        return left.withUTF8 { a in
            right.withUTF8 { b in
                for index in 0..<a.count {
                    let x = a[index]
                    let y = b[index]
                    if x != y && !(x | 0x20 == y | 0x20 && (x | 0x20) >= 0x61 && (x | 0x20) <= 0x7A) { return false }
                }
                return true
            }
        }
    }
}
