/// The `X-Request-Id` of a call: the caller's when sane, else a fresh one.
enum RequestID {
    /// At most 128 visible ASCII characters (0x21-0x7E), not empty.
    static func accept(_ value: String?) -> String? {
        guard let value, !value.isEmpty, value.utf8.count <= 128,
              value.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { return nil }
        return value
    }

    /// 32 random hex digits.
    static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        return hex(high) + hex(low)
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
