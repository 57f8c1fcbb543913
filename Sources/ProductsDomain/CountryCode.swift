/// An assigned ISO 3166-1 alpha-2 country code, always upper case (`DE`, `US`).
///
/// Only the 249 officially assigned codes are accepted: reserved or user-assigned
/// codes such as `EU`, `UK` or `XK` are refused, so that a typo never reaches the
/// upstream as a country nobody prices in.
public struct CountryCode: Sendable, Hashable, CustomStringConvertible {
    /// The two upper-case letters.
    public let text: String

    /// Accepts two ASCII letters in any case (`de` means `DE`) that form an assigned code.
    /// - Parameter text: The caller's text; no surrounding whitespace is trimmed.
    public init?(_ text: String) {
        // Every call resolves a region, so this runs on the bytes: no
        // arrays, and upper-case input (the usual) is kept as it is.
        var utf8 = text.utf8.makeIterator()
        guard let first = utf8.next().flatMap(Self.upperCased), let second = utf8.next().flatMap(Self.upperCased), utf8.next() == nil else {
            return nil
        }
        let index = Int(first - UInt8(ascii: "A")) * 26 + Int(second - UInt8(ascii: "A"))
        guard Self.assignedTable[index] else { return nil }
        if text.utf8.first == first, text.utf8.last == second {
            self.text = text
        } else {
            // Two ASCII bytes make a small string: no allocation.
            self.text = String(unsafeUninitializedCapacity: 2) { buffer in
                buffer[0] = first
                buffer[1] = second
                return 2
            }
        }
    }

    /// The letter upper-cased, or `nil` for anything but an ASCII letter.
    private static func upperCased(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - 0x20
        default: nil
        }
    }

    /// ``assigned`` as a 26 × 26 table indexed by the two letters.
    private static let assignedTable: [Bool] = {
        var table = [Bool](repeating: false, count: 26 * 26)
        for code in assigned {
            let letters = Array(code.utf8)
            table[Int(letters[0] - UInt8(ascii: "A")) * 26 + Int(letters[1] - UInt8(ascii: "A"))] = true
        }
        return table
    }()

    public var description: String { text }

    /// The officially assigned ISO 3166-1 alpha-2 codes (249, as published by the
    /// ISO 3166 Maintenance Agency and mirrored by tzdata's `iso3166.tab`).
    static let assigned: Set<String> = [
        "AD", "AE", "AF", "AG", "AI", "AL", "AM", "AO", "AQ", "AR", "AS", "AT", "AU", "AW", "AX", "AZ",
        "BA", "BB", "BD", "BE", "BF", "BG", "BH", "BI", "BJ", "BL", "BM", "BN", "BO", "BQ", "BR", "BS",
        "BT", "BV", "BW", "BY", "BZ",
        "CA", "CC", "CD", "CF", "CG", "CH", "CI", "CK", "CL", "CM", "CN", "CO", "CR", "CU", "CV", "CW",
        "CX", "CY", "CZ",
        "DE", "DJ", "DK", "DM", "DO", "DZ",
        "EC", "EE", "EG", "EH", "ER", "ES", "ET",
        "FI", "FJ", "FK", "FM", "FO", "FR",
        "GA", "GB", "GD", "GE", "GF", "GG", "GH", "GI", "GL", "GM", "GN", "GP", "GQ", "GR", "GS", "GT",
        "GU", "GW", "GY",
        "HK", "HM", "HN", "HR", "HT", "HU",
        "ID", "IE", "IL", "IM", "IN", "IO", "IQ", "IR", "IS", "IT",
        "JE", "JM", "JO", "JP",
        "KE", "KG", "KH", "KI", "KM", "KN", "KP", "KR", "KW", "KY", "KZ",
        "LA", "LB", "LC", "LI", "LK", "LR", "LS", "LT", "LU", "LV", "LY",
        "MA", "MC", "MD", "ME", "MF", "MG", "MH", "MK", "ML", "MM", "MN", "MO", "MP", "MQ", "MR", "MS",
        "MT", "MU", "MV", "MW", "MX", "MY", "MZ",
        "NA", "NC", "NE", "NF", "NG", "NI", "NL", "NO", "NP", "NR", "NU", "NZ",
        "OM",
        "PA", "PE", "PF", "PG", "PH", "PK", "PL", "PM", "PN", "PR", "PS", "PT", "PW", "PY",
        "QA",
        "RE", "RO", "RS", "RU", "RW",
        "SA", "SB", "SC", "SD", "SE", "SG", "SH", "SI", "SJ", "SK", "SL", "SM", "SN", "SO", "SR", "SS",
        "ST", "SV", "SX", "SY", "SZ",
        "TC", "TD", "TF", "TG", "TH", "TJ", "TK", "TL", "TM", "TN", "TO", "TR", "TT", "TV", "TW", "TZ",
        "UA", "UG", "UM", "US", "UY", "UZ",
        "VA", "VC", "VE", "VG", "VI", "VN", "VU",
        "WF", "WS",
        "YE", "YT",
        "ZA", "ZM", "ZW",
    ]
}
