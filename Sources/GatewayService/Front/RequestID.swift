import Synchronization

/// The `X-Request-Id` of a call: the caller's when sane, else a fresh one.
enum RequestID {
    /// At most 128 visible ASCII characters (0x21-0x7E), not empty.
    static func accept(_ value: String?) -> String? {
        guard let value, !value.isEmpty, value.utf8.count <= 128,
              value.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { return nil }
        return value
    }

    /// Chosen once per process, so ids of two replicas or two runs differ.
    private static let processPrefix: UInt64 = .random(in: .min ... .max)
    private static let counter = Atomic<UInt64>(0)

    /// 32 hex digits: the process's random prefix, then a counter scrambled
    /// by SplitMix64's finaliser (a bijection, so ids of one process never
    /// repeat). Reading the system's random source for each call cost a
    /// system call per request.
    static func generate() -> String {
        let sequence = counter.add(1, ordering: .relaxed).oldValue
        return String(unsafeUninitializedCapacity: 32) { buffer in
            writeHex(processPrefix, into: buffer, at: 0)
            writeHex(scramble(sequence), into: buffer, at: 16)
            return 32
        }
    }

    private static func scramble(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private static func writeHex(_ value: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        let digits: StaticString = "0123456789abcdef"
        for index in 0..<16 {
            let nibble = Int((value >> UInt64(60 - 4 * index)) & 0xF)
            buffer[offset + index] = digits.utf8Start[nibble]
        }
    }
}
