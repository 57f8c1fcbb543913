import JSONRPC

/// The public shape of one product of an answer (the OpenAPI `Product`
/// schema), checked on bytes the gateway did not write itself: a shared-tier
/// entry or another replica's outcome message, which anyone who can write
/// to Redis can forge. What the upstream sends is read into ``Product`` and
/// written by the gateway, so it has this shape by construction; what comes
/// from Redis is spliced into answers as it is, so it is checked here first.
///
/// A product fits when it is one object with exactly these members, each
/// once, in any order:
/// - `productIdentifier`: the identifier it answers;
/// - `localizedTitle`, `localizedDescription`: strings;
/// - `iconUrl`, `subscriptionGroupIdentifier`: a string or `null`;
/// - `price`: `{"value": number, "currencyCode": three upper-case letters}`;
/// - `subscriptionPeriod`: `null` or `{"unit": day|week|month|year,
///   "numberOfUnits": a positive integer}`;
/// - `introductoryPrice`, `discountedPrice`: `null` or `{"price": …,
///   "period": …}` of the shapes above.
package enum ProductSchema {
    /// Whether `bytes` are one product of this shape, for `identifier`.
    package static func admits(_ bytes: [UInt8], identifier: String) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer, limits: .init(maxDepth: 8))
            do {
                try product(&scanner, identifier: identifier)
                try scanner.end()
                return true
            } catch {
                return false
            }
        }
    }

    private static let productMembers: [StaticString] = [
        "productIdentifier", "localizedTitle", "localizedDescription", "iconUrl", "price",
        "subscriptionPeriod", "subscriptionGroupIdentifier", "introductoryPrice", "discountedPrice",
    ]
    private static let moneyMembers: [StaticString] = ["value", "currencyCode"]
    private static let periodMembers: [StaticString] = ["unit", "numberOfUnits"]
    private static let offerMembers: [StaticString] = ["price", "period"]
    private static let units: [StaticString] = ["day", "week", "month", "year"]

    private static func product(_ scanner: inout JSONScanner, identifier: String) throws(JSONScanner.Refusal) {
        try object(productMembers, in: &scanner) { (index, scanner) throws(JSONScanner.Refusal) in
            switch index {
            case 0:
                let token = try scanner.string()
                guard scanner.text(of: token) == identifier else { throw JSONScanner.Refusal() }
            case 1, 2:
                _ = try scanner.string()
            case 3, 6:
                if try !null(&scanner) { _ = try scanner.string() }
            case 4:
                try money(&scanner)
            case 5:
                if try !null(&scanner) { try period(&scanner) }
            default:
                if try !null(&scanner) { try offer(&scanner) }
            }
        }
    }

    private static func money(_ scanner: inout JSONScanner) throws(JSONScanner.Refusal) {
        try object(moneyMembers, in: &scanner) { (index, scanner) throws(JSONScanner.Refusal) in
            if index == 0 {
                guard try scanner.peek() == .number else { throw JSONScanner.Refusal() }
                try scanner.skipValue()
            } else {
                let token = try scanner.string()
                let fits = scanner.withUTF8(of: token) { code in
                    code.count == 3 && code.allSatisfy { (UInt8(ascii: "A") ... UInt8(ascii: "Z")).contains($0) }
                }
                guard fits else { throw JSONScanner.Refusal() }
            }
        }
    }

    private static func period(_ scanner: inout JSONScanner) throws(JSONScanner.Refusal) {
        try object(periodMembers, in: &scanner) { (index, scanner) throws(JSONScanner.Refusal) in
            if index == 0 {
                let token = try scanner.string()
                guard scanner.index(of: token, in: units) != nil else { throw JSONScanner.Refusal() }
            } else {
                try positiveInteger(&scanner)
            }
        }
    }

    private static func offer(_ scanner: inout JSONScanner) throws(JSONScanner.Refusal) {
        try object(offerMembers, in: &scanner) { (index, scanner) throws(JSONScanner.Refusal) in
            if index == 0 { try money(&scanner) } else { try period(&scanner) }
        }
    }

    /// Reads an object of exactly `members`, each once, in any order:
    /// `value` reads member `index`'s value.
    private static func object(
        _ members: [StaticString], in scanner: inout JSONScanner,
        _ value: (Int, inout JSONScanner) throws(JSONScanner.Refusal) -> Void
    ) throws(JSONScanner.Refusal) {
        try scanner.beginObject()
        var seen: UInt32 = 0
        while let name = try scanner.nextMember() {
            guard let index = scanner.index(of: name, in: members), seen & (1 << index) == 0 else { throw JSONScanner.Refusal() }
            seen |= 1 << index
            try value(index, &scanner)
        }
        guard seen == (1 << members.count) - 1 else { throw JSONScanner.Refusal() }
    }

    /// `1` to `999999999`: digits only, no sign, fraction, exponent or
    /// leading zero (what ``SubscriptionPeriod`` writes).
    private static func positiveInteger(_ scanner: inout JSONScanner) throws(JSONScanner.Refusal) {
        guard try scanner.peek() == .number else { throw JSONScanner.Refusal() }
        let start = scanner.valueStart()
        try scanner.skipValue()
        let count = scanner.offset - start
        guard (1...9).contains(count) else { throw JSONScanner.Refusal() }
        let digits = scanner.bytes(start ..< start + count)
        guard digits[0] != UInt8(ascii: "0"), digits.allSatisfy({ (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains($0) }) else {
            throw JSONScanner.Refusal()
        }
    }

    /// Reads a `null` if that is the next value.
    private static func null(_ scanner: inout JSONScanner) throws(JSONScanner.Refusal) -> Bool {
        guard try scanner.peek() == .null else { return false }
        try scanner.skipValue()
        return true
    }
}
