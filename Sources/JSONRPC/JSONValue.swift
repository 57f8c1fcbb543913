/// A JSON value that keeps numbers as their exact source text.
///
/// Numbers are never converted to `Double` or `Int`: a price of `9.99`, an id
/// of `12345678901234567890` or `-0` must leave the gateway byte for byte as
/// it arrived, and any binary conversion would lose digits or the sign.
///
/// Equality is textual: two values are equal when they would serialize to the
/// same bytes, so `.number("1")` differs from `.number("1.0")`, objects
/// with the same members in another order differ, and strings are compared
/// by their UTF-8 bytes rather than by Swift's canonical equivalence
/// (`"\u{E9}"` differs from `"e\u{301}"`). An ``encoded(_:)`` value
/// equals another ``encoded(_:)`` value with the same bytes only; compare
/// ``serialized()`` to compare it with a tree.
public enum JSONValue: Sendable, Hashable {
    /// The literal `null`.
    case null
    /// The literal `true` or `false`.
    case bool(Bool)
    /// A number as its exact lexeme, e.g. `"12345678901234567890"`, `"-0"`,
    /// `"1.5e3"`.
    ///
    /// The text must be valid RFC 8259 number text; the parser guarantees it.
    /// When building values by hand prefer ``init(numberText:)`` or
    /// ``integer(_:)``, which cannot produce invalid text. The serializer
    /// writes `null` for text that is not a JSON number so that its output is
    /// always valid JSON.
    case number(String)
    /// A string (already unescaped).
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, members in their order.
    case object(JSONObject)
    /// A value the gateway has already serialized (a result assembled from
    /// products encoded once), written out as its bytes.
    ///
    /// Only the gateway's own ``JSONWriter`` makes these bytes (see
    /// ``EncodedJSON``), so they are always valid JSON. ``JSONParser`` never
    /// produces this case: values read from a request or an upstream body
    /// are always trees, and the accessors (``objectValue``, ``isNull``, ...)
    /// do not look inside encoded bytes.
    case encoded(EncodedJSON)

    /// A number holding the decimal text of `int`.
    public static func integer(_ int: Int) -> JSONValue {
        .number(String(int))
    }

    /// A number holding `text`, or `nil` when `text` is not RFC 8259 number
    /// text (so `"4.99"` and `"-0"` are accepted, `".5"`, `"+1"`, `"01"` and
    /// `"NaN"` are not).
    ///
    /// Use it to turn a decimal string from elsewhere (an upstream price, say)
    /// into a JSON number without going through floating point.
    public init?(numberText text: String) {
        guard JSONValue.isNumberText(text) else { return nil }
        self = .number(text)
    }

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The object, when this is an object.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The elements, when this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The Boolean, when this is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The number's exact text, when this is a number.
    public var numberText: String? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The number as an `Int`, when this is a number written as a plain
    /// integer (no fraction, no exponent) that fits in `Int`.
    ///
    /// `2.0` and `1e2` give `nil` on purpose: a caller asking for an integer
    /// should not silently accept a value the client wrote as something else.
    public var intValue: Int? {
        if case .number(let text) = self { return Int(text) }
        return nil
    }

    /// Whether this is `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// Equal when both would serialize to the same bytes (see the type's
    /// documentation); `String ==` is not used for text, as it compares
    /// canonical equivalence.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null):
            true
        case (.bool(let left), .bool(let right)):
            left == right
        case (.number(let left), .number(let right)), (.string(let left), .string(let right)):
            left.hasSameUTF8(as: right)
        case (.array(let left), .array(let right)):
            left == right
        case (.object(let left), .object(let right)):
            left == right
        case (.encoded(let left), .encoded(let right)):
            left == right
        case (.null, _), (.bool, _), (.number, _), (.string, _), (.array, _), (.object, _), (.encoded, _):
            false
        }
    }

    /// Hashes the case and its content, in step with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null:
            hasher.combine(0 as UInt8)
        case .bool(let flag):
            hasher.combine(1 as UInt8)
            hasher.combine(flag)
        case .number(let text):
            hasher.combine(2 as UInt8)
            text.hashUTF8(into: &hasher)
        case .string(let text):
            hasher.combine(3 as UInt8)
            text.hashUTF8(into: &hasher)
        case .array(let elements):
            hasher.combine(4 as UInt8)
            hasher.combine(elements)
        case .object(let object):
            hasher.combine(5 as UInt8)
            hasher.combine(object)
        case .encoded(let json):
            hasher.combine(6 as UInt8)
            hasher.combine(json)
        }
    }

    /// Whether `text` matches the RFC 8259 number grammar
    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    static func isNumberText(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { buffer in
            (try? JSONParser.scanNumber(in: buffer, from: 0)) == buffer.count
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral {
    /// A string value.
    public init(stringLiteral value: String) {
        self = .string(value)
    }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// A Boolean value.
    public init(booleanLiteral value: Bool) {
        self = .bool(value)
    }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// A number holding the literal's decimal text.
    public init(integerLiteral value: Int) {
        self = .integer(value)
    }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// An array value.
    public init(arrayLiteral elements: JSONValue...) {
        self = .array(elements)
    }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// An object value, members in the literal's order (a repeated key keeps
    /// its first position and its last value, as in ``JSONObject/init(_:)``).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements))
    }
}

extension JSONValue: ExpressibleByNilLiteral {
    /// `null`.
    public init(nilLiteral: ()) {
        self = .null
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text, so test failures and logs show real JSON.
    public var description: String {
        serializedString
    }
}
