import JSONRPC
import ProductsDomain
import Testing

@Suite("Country codes, language tags, identifiers, amounts, periods")
struct ValueTypesTests {
    @Test func countryCodesAreTheAssignedOnes() {
        #expect(CountryCode("de")?.text == "DE")
        #expect(CountryCode("Gb")?.text == "GB")
        for assigned in ["AX", "BQ", "CW", "SS", "SX", "ZW", "AQ", "UM"] {
            #expect(CountryCode(assigned) != nil, "\(assigned)")
        }
        for unassigned in ["XX", "EU", "UK", "XK", "AA", "ZZ", "QO", "", "D", "DEU", "D1", "ÄÖ", " DE"] {
            #expect(CountryCode(unassigned) == nil, "\(unassigned)")
        }
    }

    @Test func allAndOnly249CodesAreAssigned() {
        let letters = (UInt8(ascii: "A")...UInt8(ascii: "Z")).map { String(UnicodeScalar($0)) }
        let assigned = letters.flatMap { first in letters.map { first + $0 } }.filter { CountryCode($0) != nil }
        #expect(assigned.count == 249)
    }

    @Test(arguments: [
        ("de", "de", "de"), ("DE", "de", "de"), ("de-de", "de-DE", "de"), ("pt-br", "pt-BR", "pt"),
        ("es-419", "es-419", "es"), ("sr-latn-rs", "sr-Latn-RS", "sr"), ("zh-HANT", "zh-Hant", "zh"),
        ("de-CH-1996", "de-CH-1996", "de"), ("sl-Rozaj-biske", "sl-rozaj-biske", "sl"), ("und", "und", "und"),
        ("en-abcdefgh-bcdefghi-cdefghij-defgh", "en-abcdefgh-bcdefghi-cdefghij-defgh", "en"),
    ])
    func wellFormedLanguageTags(input: String, text: String, primary: String) {
        let tag = LanguageTag(input)
        #expect(tag?.text == text)
        #expect(tag?.primaryLanguage == primary)
    }

    @Test(arguments: [
        "", "d", "deutsch", "de-", "-de", "de--DE", "de_DE", "de DE", "en-US-x-private", "en-u-ca-gregory",
        "i-klingon", "zh-yue", "de-DE-DE", "sl-rozaj-rozaj", "de-12", "en-abcdefgh-bcdefghi-cdefghij-defghi", "dé",
    ])
    func malformedLanguageTags(input: String) {
        #expect(LanguageTag(input) == nil)
    }

    @Test func productIdentifiers() {
        #expect(ProductIdentifier("premium_monthly")?.text == "premium_monthly")
        #expect(ProductIdentifier("com.example.Pro-1")?.text == "com.example.Pro-1")
        #expect(ProductIdentifier(String(repeating: "x", count: 128)) != nil)
        for bad in ["", String(repeating: "x", count: 129), "a b", "a/b", "a,b", "a%2C", "ü"] {
            #expect(ProductIdentifier(bad) == nil, "\(bad)")
        }
    }

    @Test func decimalAmountsKeepTheirDigits() {
        for good in ["0", "0.00", "9.99", "1200", "10.5", "0.0001", String(repeating: "9", count: 32)] {
            #expect(DecimalAmount(good)?.text == good)
            #expect(DecimalAmount(good)?.jsonValue == .number(good))
        }
        for bad in ["", ".5", "5.", "-1", "+1", "1e3", "007", "00.5", " 1", "1,5", "1.2.3", "NaN", String(repeating: "9", count: 33)] {
            #expect(DecimalAmount(bad) == nil, "\(bad)")
        }
        #expect(JSONValue.array([DecimalAmount("9.99")!.jsonValue, DecimalAmount("0.00")!.jsonValue]).serializedString == "[9.99,0.00]")
    }

    @Test func currencyCodes() {
        #expect(CurrencyCode("EUR")?.text == "EUR")
        #expect(CurrencyCode("jpy")?.text == "JPY")
        for bad in ["", "EU", "EURO", "E1R", "€"] {
            #expect(CurrencyCode(bad) == nil, "\(bad)")
        }
    }

    @Test(arguments: [
        ("P1D", PeriodUnit.day, 1), ("P7D", .day, 7), ("P1W", .week, 1), ("P12M", .month, 12), ("P1Y", .year, 1),
        ("P9999Y", .year, 9999), ("P01M", .month, 1),
    ])
    func periods(text: String, unit: PeriodUnit, count: Int) {
        let period = SubscriptionPeriod(iso8601: text)
        #expect(period?.unit == unit)
        #expect(period?.numberOfUnits == count)
    }

    @Test(arguments: ["", "P", "PM", "1M", "P0M", "P10000D", "P00001D", "P1H", "PT1H", "P1m", "P-1M", "P1.5M", "P1Y2M", " P1M", "P1M "])
    func badPeriods(text: String) {
        #expect(SubscriptionPeriod(iso8601: text) == nil)
    }

    @Test func periodOutput() {
        let week = SubscriptionPeriod(iso8601: "P07D")!
        #expect(week.iso8601 == "P7D")
        #expect(week.jsonValue.serializedString == #"{"unit":"day","numberOfUnits":7}"#)
        #expect(SubscriptionPeriod(unit: .month, numberOfUnits: 0) == nil)
    }
}

/// The byte-level parsing of country codes and language tags keeps the
/// caller's string when it is already canonical and builds one otherwise.
@Suite("Canonical forms")
struct CanonicalFormTests {
    @Test func countryCodesUpperCase() {
        for (input, text) in [("DE", "DE"), ("de", "DE"), ("dE", "DE"), ("De", "DE"), ("zw", "ZW"), ("AX", "AX")] {
            #expect(CountryCode(input)?.text == text, "\(input)")
        }
        for bad in ["D", "DEU", "d-", "1A", "\u{0}E", "ÄE", "E\u{301}"] {
            #expect(CountryCode(bad) == nil, "\(bad)")
        }
    }

    @Test(arguments: [
        ("EN-latn-us-POSIX", "en-Latn-US-posix", "en"), ("zh-hant-tw", "zh-Hant-TW", "zh"), ("DE-AT", "de-AT", "de"),
        ("de-1996", "de-1996", "de"), ("hy-Latn-IT-arevela", "hy-Latn-IT-arevela", "hy"), ("SGN-BE-FR", nil, nil),
        ("sl-rozaj-ROZAJ", nil, nil), ("de-1996-1996", nil, nil), ("sl-rozaj-biske-rozaj", nil, nil),
        ("en-Latn-Latn", nil, nil), ("en-US-US", nil, nil), ("en--US", nil, nil), ("en-US-", nil, nil),
        ("abcd", nil, nil), ("en-123-4567", "en-123-4567", "en"), ("en-1234", "en-1234", "en"), ("en-abcd", "en-Abcd", "en"),
    ] as [(String, String?, String?)])
    func languageTagsCanonicalize(input: String, text: String?, primary: String?) {
        let tag = LanguageTag(input)
        #expect(tag?.text == text)
        #expect(tag?.primaryLanguage == primary)
    }
}

/// Amounts, currency codes and periods are read in place, without copying
/// their bytes out; these are the copying readings they replaced, compared
/// with them over every short text of the characters that matter.
@Suite("In-place readings of amounts, currencies and periods")
struct InPlaceReadingTests {
    /// Every text of up to `maxLength` of `characters`.
    static func texts(of characters: [String], maxLength: Int) -> [String] {
        var all = [""]
        var previous = [""]
        for _ in 0 ..< maxLength {
            previous = previous.flatMap { prefix in characters.map { prefix + $0 } }
            all += previous
        }
        return all
    }

    static func copyingAmount(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        guard (1...DecimalAmount.maxLength).contains(bytes.count) else { return nil }
        let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        let parts = bytes.split(separator: UInt8(ascii: "."), maxSplits: 1, omittingEmptySubsequences: false)
        let integer = parts[0]
        guard !integer.isEmpty, integer.allSatisfy(isDigit) else { return nil }
        guard integer.count == 1 || integer.first != UInt8(ascii: "0") else { return nil }
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].allSatisfy(isDigit) else { return nil }
        }
        return text
    }

    static func copyingCurrency(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        guard bytes.count == 3 else { return nil }
        var upper: [UInt8] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): upper.append(byte)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): upper.append(byte - 0x20)
            default: return nil
            }
        }
        return String(decoding: upper, as: UTF8.self)
    }

    static func copyingPeriod(_ text: String) -> SubscriptionPeriod? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 3, bytes.first == UInt8(ascii: "P") else { return nil }
        let digits = bytes[1..<(bytes.count - 1)]
        guard digits.count <= 4, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        let unit: PeriodUnit
        switch bytes[bytes.count - 1] {
        case UInt8(ascii: "D"): unit = .day
        case UInt8(ascii: "W"): unit = .week
        case UInt8(ascii: "M"): unit = .month
        case UInt8(ascii: "Y"): unit = .year
        default: return nil
        }
        return SubscriptionPeriod(unit: unit, numberOfUnits: digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) })
    }

    @Test func amounts() {
        let texts = Self.texts(of: ["0", "1", "9", ".", "-", "a", "é"], maxLength: 5)
            + ["0.00", "10.50", String(repeating: "9", count: 32), String(repeating: "9", count: 33), "1" + String(repeating: "0", count: 30) + ".5"]
        for text in texts {
            #expect(DecimalAmount(text)?.text == Self.copyingAmount(text), "\(text)")
        }
    }

    @Test func currencies() {
        for text in Self.texts(of: ["A", "z", "e", "U", "@", "[", "`", "{", "1", "é"], maxLength: 4) {
            let code = CurrencyCode(text)?.text
            #expect(code.map { Array($0.utf8) } == Self.copyingCurrency(text).map { Array($0.utf8) }, "\(text)")
        }
    }

    @Test func periods() {
        for text in Self.texts(of: ["P", "0", "1", "9", "D", "W", "M", "Y", "m", "é"], maxLength: 5) + ["P0001D", "P9999Y", "P10000Y", "P00000D", "P12345"] {
            #expect(SubscriptionPeriod(iso8601: text) == Self.copyingPeriod(text), "\(text)")
        }
    }
}
