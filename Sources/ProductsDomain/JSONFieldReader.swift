import JSONRPC

/// Reads the members of one JSON object with typed accessors whose failures
/// name the path of the offending value (`items[2].price.amount`).
///
/// Shared by the upstream body parser and the catalog parser, which wrap
/// `Failure` in their own error types.
struct JSONFieldReader {
    /// A value that is missing or has the wrong type or form.
    struct Failure: Error {
        /// Where: `items[2].price.amount`, or the root's label.
        let path: String
        /// What was expected and what was found.
        let problem: String

        var message: String { "\(path): \(problem)" }
    }

    let object: JSONObject
    /// This object's own path; empty for the root, whose members then have bare names.
    let path: String

    /// - Parameters:
    ///   - value: The value that must be an object.
    ///   - path: Its path, for messages.
    ///   - label: How to call it in a message when `path` is empty (the root).
    init(_ value: JSONValue, path: String, label: String = "body") throws(Failure) {
        guard let object = value.objectValue else {
            throw Failure(path: path.isEmpty ? label : path, problem: "expected an object, got \(MessageText.kind(of: value))")
        }
        self.object = object
        self.path = path
    }

    /// The path of member `key`.
    func path(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// Fails on the first member whose name is not in `allowed`, so that a typo in a hand-written file is caught.
    func rejectUnknownKeys(allowed: [String]) throws(Failure) {
        for key in object.keys where !allowed.contains(key) {
            throw Failure(path: path(key), problem: "unknown key; allowed: \(allowed.joined(separator: ", "))")
        }
    }

    /// The member, or `nil` when it is absent or `null`.
    func optional(_ key: String) -> JSONValue? {
        guard let value = object[key], !value.isNull else { return nil }
        return value
    }

    func required(_ key: String, expecting expectation: String) throws(Failure) -> JSONValue {
        guard let value = object[key] else {
            throw Failure(path: path(key), problem: "missing (expected \(expectation))")
        }
        return value
    }

    func string(_ key: String) throws(Failure) -> String {
        let value = try required(key, expecting: "a string")
        return try Self.string(value, path: path(key))
    }

    func optionalString(_ key: String) throws(Failure) -> String? {
        guard let value = optional(key) else { return nil }
        return try Self.string(value, path: path(key))
    }

    func object(_ key: String) throws(Failure) -> JSONFieldReader {
        try JSONFieldReader(required(key, expecting: "an object"), path: path(key))
    }

    func optionalObject(_ key: String) throws(Failure) -> JSONFieldReader? {
        guard let value = optional(key) else { return nil }
        return try JSONFieldReader(value, path: path(key))
    }

    func array(_ key: String) throws(Failure) -> [JSONValue] {
        let value = try required(key, expecting: "an array")
        return try Self.array(value, path: path(key))
    }

    func optionalArray(_ key: String) throws(Failure) -> [JSONValue]? {
        guard let value = optional(key) else { return nil }
        return try Self.array(value, path: path(key))
    }

    func decimal(_ key: String) throws(Failure) -> DecimalAmount {
        try formatted(key, expecting: "a decimal string such as \"4.99\"", DecimalAmount.init)
    }

    func currency(_ key: String) throws(Failure) -> CurrencyCode {
        try formatted(key, expecting: "a three-letter ISO 4217 currency code", CurrencyCode.init)
    }

    func period(_ key: String) throws(Failure) -> SubscriptionPeriod {
        try formatted(key, expecting: "an ISO 8601 period PnD, PnW, PnM or PnY with n from 1 to 9999") {
            SubscriptionPeriod(iso8601: $0)
        }
    }

    /// A string member that `make` accepts; a failure echoes the offending text.
    private func formatted<Value>(_ key: String, expecting expectation: String, _ make: (String) -> Value?) throws(Failure) -> Value {
        let value = try required(key, expecting: expectation)
        guard let text = value.stringValue else {
            throw Failure(path: path(key), problem: "expected \(expectation), got \(MessageText.kind(of: value))")
        }
        guard let result = make(text) else {
            throw Failure(path: path(key), problem: "expected \(expectation), got \(MessageText.quoted(text))")
        }
        return result
    }

    /// An amount and a currency read from this object's `amount` and `currency` members.
    func money() throws(Failure) -> Money {
        Money(amount: try decimal("amount"), currency: try currency("currency"))
    }

    static func string(_ value: JSONValue, path: String) throws(Failure) -> String {
        guard let text = value.stringValue else {
            throw Failure(path: path, problem: "expected a string, got \(MessageText.kind(of: value))")
        }
        return text
    }

    static func array(_ value: JSONValue, path: String) throws(Failure) -> [JSONValue] {
        guard let array = value.arrayValue else {
            throw Failure(path: path, problem: "expected an array, got \(MessageText.kind(of: value))")
        }
        return array
    }
}
