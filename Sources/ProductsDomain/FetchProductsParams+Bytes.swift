public import JSONRPC

extension FetchProductsParams {
    private static let memberNames: [StaticString] = ["productIdentifiers", "countryCode", "defaultCountryCodeAssumption", "language"]

    /// Reads the params of a usual call straight from the text of its
    /// params object, with no JSON tree, or gives `nil`.
    ///
    /// It gives `nil` for every params ``parse(_:limits:)`` refuses, and for
    /// some it accepts (a repeated member), so a caller then parses the
    /// tree, which decides and words the refusal. Whatever this returns,
    /// `parse` returns the same: the same checks run (``ProductIdentifier``,
    /// ``CountryCode``, ``LanguageTag``, the identifier limit), duplicates
    /// go keeping the first, and `null` means absent for the optional ones.
    /// - Parameter json: The params object's text, already checked as JSON
    ///   within `parserLimits`.
    public static func read(json: UnsafeBufferPointer<UInt8>, limits: FetchProductsLimits, parserLimits: JSONParser.Limits = .init()) -> FetchProductsParams? {
        var scanner = JSONScanner(json, limits: parserLimits)
        do {
            try scanner.beginObject()
            var identifiers: [String]?
            var countryCode: CountryCode??
            var assumption: CountryCode??
            var language: LanguageTag??
            while let name = try scanner.nextMember() {
                switch scanner.index(of: name, in: memberNames) {
                case 0:
                    guard identifiers == nil, let read = try readIdentifiers(&scanner, limits: limits) else { return nil }
                    identifiers = read
                case 1:
                    guard countryCode == nil, let read = try readOptional(&scanner, CountryCode.init) else { return nil }
                    countryCode = read
                case 2:
                    guard assumption == nil, let read = try readOptional(&scanner, CountryCode.init) else { return nil }
                    assumption = read
                case 3:
                    guard language == nil, let read = try readOptional(&scanner, LanguageTag.init) else { return nil }
                    language = read
                default:
                    return nil
                }
            }
            try scanner.end()
            guard let identifiers else { return nil }
            return FetchProductsParams(
                productIdentifiers: identifiers,
                countryCode: countryCode ?? nil,
                defaultCountryCodeAssumption: assumption ?? nil,
                language: language ?? nil
            )
        } catch {
            return nil
        }
    }

    /// 1 to `maxIdentifiers` distinct valid identifiers, duplicates removed
    /// keeping the first; `nil` for anything else.
    private static func readIdentifiers(_ scanner: inout JSONScanner, limits: FetchProductsLimits) throws(JSONScanner.Refusal) -> [String]? {
        guard try scanner.peek() == .array else { return nil }
        try scanner.beginArray()
        var unique: [String] = []
        unique.reserveCapacity(8)
        // Past a few dozen, a set finds duplicates faster than a scan.
        var seen: Set<String>?
        while try scanner.nextElement() {
            guard try scanner.peek() == .string else { return nil }
            let text = scanner.text(of: try scanner.string())
            guard ProductIdentifier.isValid(text) else { return nil }
            if seen == nil, unique.count >= 32 { seen = Set(unique) }
            if seen != nil {
                if seen!.insert(text).inserted { unique.append(text) }
            } else if !unique.contains(text) {
                unique.append(text)
            }
        }
        guard !unique.isEmpty, unique.count <= limits.maxIdentifiers else { return nil }
        return unique
    }

    /// A string `make` accepts, or `null` (`.some(nil)`); `nil` for
    /// anything else.
    private static func readOptional<Value>(_ scanner: inout JSONScanner, _ make: (String) -> Value?) throws(JSONScanner.Refusal) -> Value?? {
        switch try scanner.peek() {
        case .null:
            try scanner.skipValue()
            return .some(nil)
        case .string:
            guard let value = make(scanner.text(of: try scanner.string())) else { return nil }
            return .some(value)
        default:
            return nil
        }
    }
}
