public import JSONRPC

/// The validated params of `products.fetch`.
///
/// Params are taken by name only. An explicit JSON `null` for an optional param
/// (`countryCode`, `defaultCountryCodeAssumption`, `language`) means the same as
/// leaving it out, because JSON encoders of optional fields commonly write `null`;
/// `null` for `productIdentifiers` is refused like any other non-array.
public struct FetchProductsParams: Sendable, Equatable {
    /// The requested identifiers, duplicates removed keeping the first occurrence, in request order.
    public let productIdentifiers: [String]
    /// The explicit region, when given.
    public let countryCode: CountryCode?
    /// The caller's guess of the region, used only when `countryCode` is absent.
    public let defaultCountryCodeAssumption: CountryCode?
    /// The language for titles and descriptions, when given.
    public let language: LanguageTag?

    /// Builds params directly, for callers that have already validated them (tests, internal calls).
    public init(
        productIdentifiers: [String],
        countryCode: CountryCode? = nil,
        defaultCountryCodeAssumption: CountryCode? = nil,
        language: LanguageTag? = nil
    ) {
        self.productIdentifiers = productIdentifiers
        self.countryCode = countryCode
        self.defaultCountryCodeAssumption = defaultCountryCodeAssumption
        self.language = language
    }

    /// The names `products.fetch` accepts, in the order the contract lists them.
    public static let allowedNames = ["productIdentifiers", "countryCode", "defaultCountryCodeAssumption", "language"]

    /// Reads and validates the params of a `products.fetch` call.
    ///
    /// Checks run in this order, and the first failure is reported: the params
    /// shape (by name), unknown names, `productIdentifiers` (presence, type, each
    /// entry, then the count after de-duplication), `countryCode`,
    /// `defaultCountryCodeAssumption`, `language`.
    /// - Parameters:
    ///   - params: The request's params; `nil` when the request had none.
    ///   - limits: The configured limits.
    /// - Throws: `ParamsError` naming the param at fault.
    public static func parse(_ params: JSONRPCParams?, limits: FetchProductsLimits) throws(ParamsError) -> FetchProductsParams {
        let object: JSONObject
        switch params {
        case .none:
            throw ParamsError(
                param: "productIdentifiers",
                message: "productIdentifiers is required; pass params as an object with named members"
            )
        case .array:
            throw ParamsError(param: nil, message: "params must be an object with named members, not an array")
        case .object(let members):
            object = members
        }

        for (key, _) in object where !allowedNames.contains(key) {
            throw ParamsError(
                param: MessageText.truncated(key),
                message: "unknown param \(MessageText.quoted(key)); allowed: \(allowedNames.joined(separator: ", "))"
            )
        }

        let identifiers = try parseIdentifiers(object["productIdentifiers"], limits: limits)
        let countryCode = try parseCountry(object["countryCode"], name: "countryCode")
        let assumption = try parseCountry(object["defaultCountryCodeAssumption"], name: "defaultCountryCodeAssumption")
        let language = try parseLanguage(object["language"])
        return FetchProductsParams(
            productIdentifiers: identifiers,
            countryCode: countryCode,
            defaultCountryCodeAssumption: assumption,
            language: language
        )
    }

    /// Up to this many identifiers, duplicates are found by scanning.
    private static let scanLimit = 32

    private static func parseIdentifiers(_ value: JSONValue?, limits: FetchProductsLimits) throws(ParamsError) -> [String] {
        let name = "productIdentifiers"
        guard let value else {
            throw ParamsError(param: name, message: "productIdentifiers is required: an array of 1 to \(limits.maxIdentifiers) product identifiers")
        }
        guard let entries = value.arrayValue else {
            throw ParamsError(param: name, message: "productIdentifiers must be an array of strings, not \(MessageText.kind(of: value))")
        }
        guard !entries.isEmpty else {
            throw ParamsError(param: name, message: "productIdentifiers must hold at least 1 identifier")
        }
        // A call holds a handful of identifiers: a scan of those kept so far
        // costs less than hashing each into a set, up to a few dozen.
        let useSet = entries.count > Self.scanLimit
        // Created only when used: even an empty literal builds a native set.
        var seen = useSet ? Set<String>(minimumCapacity: entries.count) : Set<String>()
        var unique: [String] = []
        unique.reserveCapacity(entries.count)
        for (index, entry) in entries.enumerated() {
            guard let text = entry.stringValue else {
                throw ParamsError(param: name, message: "productIdentifiers[\(index)] must be a string, not \(MessageText.kind(of: entry))")
            }
            guard ProductIdentifier.isValid(text) else {
                throw ParamsError(
                    param: name,
                    message: "productIdentifiers[\(index)] \(MessageText.quoted(text)) is not a valid product identifier: \(ProductIdentifier.formDescription)"
                )
            }
            if useSet ? seen.insert(text).inserted : !unique.contains(text) { unique.append(text) }
        }
        guard unique.count <= limits.maxIdentifiers else {
            throw ParamsError(
                param: name,
                message: "productIdentifiers must hold at most \(limits.maxIdentifiers) distinct identifiers, got \(unique.count)"
            )
        }
        return unique
    }

    private static func parseCountry(_ value: JSONValue?, name: String) throws(ParamsError) -> CountryCode? {
        guard let value, !value.isNull else { return nil }
        guard let text = value.stringValue else {
            throw ParamsError(param: name, message: "\(name) must be a string holding an ISO 3166-1 alpha-2 code, not \(MessageText.kind(of: value))")
        }
        guard let code = CountryCode(text) else {
            throw ParamsError(param: name, message: "\(name) \(MessageText.quoted(text)) is not an assigned ISO 3166-1 alpha-2 country code")
        }
        return code
    }

    private static func parseLanguage(_ value: JSONValue?) throws(ParamsError) -> LanguageTag? {
        let name = "language"
        guard let value, !value.isNull else { return nil }
        guard let text = value.stringValue else {
            throw ParamsError(param: name, message: "language must be a string holding a BCP 47 language tag, not \(MessageText.kind(of: value))")
        }
        guard let tag = LanguageTag(text) else {
            throw ParamsError(
                param: name,
                message: "language \(MessageText.quoted(text)) is not a well-formed BCP 47 language tag such as de, de-DE or pt-BR"
            )
        }
        return tag
    }
}
