/// The caller's trace as W3C Trace Context Level 1 reads it from
/// `traceparent` and `tracestate`.
public struct IncomingTrace: Sendable, Equatable {
    /// The caller's span: this call's parent.
    public var parent: SpanContext
    /// The caller's `tracestate`, unchanged, when valid; nil when absent
    /// or invalid (an invalid one is dropped).
    public var traceState: String?

    public init(parent: SpanContext, traceState: String?) {
        self.parent = parent
        self.traceState = traceState
    }

    /// The trace a request continues; nil when `traceparent` is absent or
    /// invalid (a new trace starts, and `tracestate` is not read, as the
    /// specification says).
    public static func read(traceparent: String?, tracestate: String?) -> IncomingTrace? {
        guard let traceparent, let parent = TraceParent.parse(traceparent) else { return nil }
        return IncomingTrace(parent: parent, traceState: tracestate.flatMap { TraceState.isValid($0) ? $0 : nil })
    }
}

/// `traceparent`: `version-traceid-parentid-flags`, lower-case hex.
public enum TraceParent {
    /// The span context of a valid `traceparent`, or nil. Invalid: a
    /// version `ff` or not two lower-case hex digits; for version `00`
    /// anything but exactly 55 characters (so extra fields too); for a
    /// higher version fewer than 55, or a 56th character that is not `-`
    /// (its first four fields are read, the rest ignored); upper-case hex;
    /// a trace id or parent id of zeros; a missing `-`.
    public static func parse(_ value: String) -> SpanContext? {
        var value = value
        return value.withUTF8 { parse(utf8: $0) }
    }

    /// ``parse(_:)`` over the header's bytes.
    public static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>) -> SpanContext? {
        guard bytes.count >= 55,
              let versionHigh = HexDigits.value(bytes[0]), let versionLow = HexDigits.value(bytes[1]) else { return nil }
        let version = versionHigh << 4 | versionLow
        guard version != 0xFF else { return nil }
        if version == 0 {
            guard bytes.count == 55 else { return nil }
        } else if bytes.count > 55 {
            guard bytes[55] == UInt8(ascii: "-") else { return nil }
        }
        guard bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-"),
              let high = HexDigits.read64(bytes, at: 3), let low = HexDigits.read64(bytes, at: 19),
              let span = HexDigits.read64(bytes, at: 36),
              let flagsHigh = HexDigits.value(bytes[53]), let flagsLow = HexDigits.value(bytes[54]) else { return nil }
        let traceID = TraceID(high: high, low: low)
        let spanID = SpanID(span)
        guard traceID.isValid, spanID.isValid else { return nil }
        return SpanContext(traceID: traceID, spanID: spanID, flags: TraceFlags(rawValue: UInt8(flagsHigh << 4 | flagsLow)))
    }
}

/// `tracestate` (W3C Trace Context Level 1, section 3.3): up to 32
/// `key=value` members separated by commas with optional spaces and tabs
/// around them (empty members allowed), no key twice.
public enum TraceState {
    /// The most members a valid `tracestate` holds.
    public static let maxMembers = 32

    public static func isValid(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { isValid(utf8: $0) }
    }

    public static func isValid(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        // Each member's key as a range of `bytes`, to find one used twice.
        var keys: [Range<Int>] = []
        var start = 0
        while start <= bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
            var first = start
            var last = end
            while first < last, isOWS(bytes[first]) { first += 1 }
            while last > first, isOWS(bytes[last - 1]) { last -= 1 }
            if first < last {
                guard let key = member(bytes, first..<last) else { return false }
                guard keys.count < maxMembers else { return false }
                for other in keys where other.count == key.count {
                    if bytes[other].elementsEqual(bytes[key]) { return false }
                }
                keys.append(key)
            }
            start = end + 1
        }
        return true
    }

    private static func isOWS(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// A member's key range, when the member is `key=value` as the grammar says.
    private static func member(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Range<Int>? {
        guard let equals = bytes[range].firstIndex(of: UInt8(ascii: "=")) else { return nil }
        let key = range.lowerBound..<equals
        guard isKey(bytes, key) else { return nil }
        // value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr;
        // nblk-chr = %x21-2B / %x2D-3C / %x3E-7E (no comma, no `=`).
        let value = (equals + 1)..<range.upperBound
        guard !value.isEmpty, value.count <= 256 else { return nil }
        for index in value {
            let byte = bytes[index]
            guard byte >= 0x20, byte <= 0x7E, byte != UInt8(ascii: ","), byte != UInt8(ascii: "=") else { return nil }
        }
        // The range was trimmed, so the last byte is not a space.
        return key
    }

    /// `simple-key = lcalpha 0*255(keychr)`, or
    /// `tenant-id "@" system-id`: `(lcalpha / DIGIT) 0*240(keychr)` and
    /// `lcalpha 0*13(keychr)`; keychr is `a-z 0-9 _ - * /`.
    private static func isKey(_ bytes: UnsafeBufferPointer<UInt8>, _ key: Range<Int>) -> Bool {
        guard !key.isEmpty else { return false }
        if let at = bytes[key].firstIndex(of: UInt8(ascii: "@")) {
            let tenant = key.lowerBound..<at
            let system = (at + 1)..<key.upperBound
            guard !tenant.isEmpty, tenant.count <= 241, !system.isEmpty, system.count <= 14 else { return false }
            guard isLowerAlpha(bytes[tenant.lowerBound]) || isDigit(bytes[tenant.lowerBound]),
                  isLowerAlpha(bytes[system.lowerBound]) else { return false }
            return tenant.dropFirst().allSatisfy { isKeyCharacter(bytes[$0]) } && system.dropFirst().allSatisfy { isKeyCharacter(bytes[$0]) }
        }
        guard key.count <= 256, isLowerAlpha(bytes[key.lowerBound]) else { return false }
        return key.dropFirst().allSatisfy { isKeyCharacter(bytes[$0]) }
    }

    private static func isLowerAlpha(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    private static func isKeyCharacter(_ byte: UInt8) -> Bool {
        isLowerAlpha(byte) || isDigit(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "*") || byte == UInt8(ascii: "/")
    }
}
