/// A W3C trace id: 16 bytes, held as two integers (no `String`, no
/// allocation); all zero is not a trace id.
public struct TraceID: Hashable, Sendable {
    /// The first eight bytes, big-endian.
    public var high: UInt64
    /// The last eight bytes, big-endian.
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    public var isValid: Bool { high != 0 || low != 0 }

    /// 32 lower-case hex digits, as `traceparent`, the logs and OTLP/JSON write it.
    public var hex: String {
        String(unsafeUninitializedCapacity: 32) { buffer in
            HexDigits.write(high, into: buffer, at: 0)
            HexDigits.write(low, into: buffer, at: 16)
            return 32
        }
    }

    /// The 16 bytes, for OTLP/protobuf.
    public func appendBytes(to bytes: inout [UInt8]) {
        HexDigits.appendBigEndian(high, to: &bytes)
        HexDigits.appendBigEndian(low, to: &bytes)
    }
}

/// A W3C span (parent) id: 8 bytes as one integer; zero is not a span id.
public struct SpanID: Hashable, Sendable {
    public var value: UInt64

    public init(_ value: UInt64) {
        self.value = value
    }

    public var isValid: Bool { value != 0 }

    /// 16 lower-case hex digits.
    public var hex: String {
        String(unsafeUninitializedCapacity: 16) { buffer in
            HexDigits.write(value, into: buffer, at: 0)
            return 16
        }
    }

    /// The 8 bytes, for OTLP/protobuf.
    public func appendBytes(to bytes: inout [UInt8]) {
        HexDigits.appendBigEndian(value, to: &bytes)
    }
}

/// The `trace-flags` byte; only `sampled` (bit 0) has a meaning in Level 1.
public struct TraceFlags: Hashable, Sendable {
    public var rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    public static let sampled = TraceFlags(rawValue: 0x01)
    public static let none = TraceFlags(rawValue: 0x00)

    public var isSampled: Bool { rawValue & 0x01 != 0 }
}

/// What identifies one span to others: its trace, its id and the flags
/// it was sampled with.
public struct SpanContext: Hashable, Sendable {
    public var traceID: TraceID
    public var spanID: SpanID
    public var flags: TraceFlags

    public init(traceID: TraceID, spanID: SpanID, flags: TraceFlags) {
        self.traceID = traceID
        self.spanID = spanID
        self.flags = flags
    }

    /// `00-{trace id}-{span id}-{flags}`: the `traceparent` of a request
    /// whose parent is this span.
    public var traceparent: String {
        String(unsafeUninitializedCapacity: 55) { buffer in
            buffer[0] = UInt8(ascii: "0")
            buffer[1] = UInt8(ascii: "0")
            buffer[2] = UInt8(ascii: "-")
            HexDigits.write(traceID.high, into: buffer, at: 3)
            HexDigits.write(traceID.low, into: buffer, at: 19)
            buffer[35] = UInt8(ascii: "-")
            HexDigits.write(spanID.value, into: buffer, at: 36)
            buffer[52] = UInt8(ascii: "-")
            buffer[53] = HexDigits.digit(flags.rawValue >> 4)
            buffer[54] = HexDigits.digit(flags.rawValue & 0xF)
            return 55
        }
    }
}

/// Lower-case hex, written and read by hand.
enum HexDigits {
    static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    static func write(_ value: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        for index in 0..<16 {
            buffer[offset + index] = digit(UInt8((value >> UInt64(60 - 4 * index)) & 0xF))
        }
    }

    static func appendBigEndian(_ value: UInt64, to bytes: inout [UInt8]) {
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(56 - 8 * index))) }
    }

    /// The value of a lower-case hex digit; nil for anything else (an
    /// upper-case digit included: W3C Trace Context allows none).
    @inline(__always)
    static func value(_ byte: UInt8) -> UInt64? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt64(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt64(byte - UInt8(ascii: "a") + 10)
        default: nil
        }
    }

    /// 16 digits at `offset` as one integer; nil when any is not lower-case hex.
    static func read64(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt64? {
        var value: UInt64 = 0
        for index in offset..<(offset + 16) {
            guard let digit = Self.value(bytes[index]) else { return nil }
            value = value << 4 | digit
        }
        return value
    }
}
