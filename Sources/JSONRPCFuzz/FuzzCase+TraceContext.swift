import Tracing

/// The input as `traceparent` and `tracestate` headers, each read by the
/// gateway's parser and by a reference reading written from W3C Trace
/// Context Level 1's grammar for clarity (fields split at `-` and `,`), not
/// speed: the two must agree on every input, and a context read must be
/// written back (as version `00`) to the same context.
extension FuzzCase {
    func checkTraceContextReading() {
        checkTraceParent(input)
        // Most random bytes are far from a traceparent: the input also
        // edits a valid one (a position and a byte per pair, then a length).
        var edited = Array("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future".utf8)
        var index = 0
        while index + 1 < input.count {
            edited[Int(input[index]) % edited.count] = input[index + 1]
            index += 2
        }
        if let last = input.last { edited.removeLast(Int(last) % 12) }
        checkTraceParent(edited)
        checkTraceState(input)
    }

    private func checkTraceParent(_ bytes: [UInt8]) {
        let parsed = bytes.withUnsafeBufferPointer { TraceParent.parse(utf8: $0) }
        let reference = Self.referenceTraceParent(bytes)
        require((parsed == nil) == (reference == nil), "traceparent \(bytes): parser \(String(describing: parsed)), reference \(String(describing: reference))")
        guard let parsed, let reference else { return }
        require(parsed.traceID.hex == reference.trace && parsed.spanID.hex == reference.span && parsed.flags.rawValue == reference.flags,
                "traceparent \(bytes) read as \(parsed), the reference as \(reference)")
        require(TraceParent.parse(parsed.traceparent) == parsed, "\(parsed) does not survive being written")
    }

    private func checkTraceState(_ bytes: [UInt8]) {
        let valid = bytes.withUnsafeBufferPointer { TraceState.isValid(utf8: $0) }
        require(valid == Self.referenceTraceStateIsValid(bytes), "tracestate \(bytes): parser says \(valid)")
    }

    private static func isLowerHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    /// `version "-" trace-id "-" parent-id "-" trace-flags`, then for a
    /// version other than `00` anything after a `-`.
    static func referenceTraceParent(_ bytes: [UInt8]) -> (trace: String, span: String, flags: UInt8)? {
        let fields = bytes.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard fields.count >= 4 else { return nil }
        let (version, trace, span, flags) = (fields[0], fields[1], fields[2], fields[3])
        guard version.count == 2, trace.count == 32, span.count == 16, flags.count == 2,
              [version, trace, span, flags].allSatisfy({ $0.allSatisfy(isLowerHex) }) else { return nil }
        guard Array(version) != Array("ff".utf8) else { return nil }
        if Array(version) == Array("00".utf8), fields.count != 4 { return nil }
        guard trace.contains(where: { $0 != UInt8(ascii: "0") }), span.contains(where: { $0 != UInt8(ascii: "0") }) else { return nil }
        let text = { (field: ArraySlice<UInt8>) in String(decoding: field, as: UTF8.self) }
        return (text(trace), text(span), UInt8(text(flags), radix: 16)!)
    }

    /// `list-member 0*31( OWS "," OWS list-member )`, empty members
    /// allowed, no key twice.
    static func referenceTraceStateIsValid(_ bytes: [UInt8]) -> Bool {
        var keys: [[UInt8]] = []
        for rawMember in bytes.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            var member = Array(rawMember)
            while let first = member.first, first == 0x20 || first == 0x09 { member.removeFirst() }
            while let last = member.last, last == 0x20 || last == 0x09 { member.removeLast() }
            if member.isEmpty { continue }
            guard let equals = member.firstIndex(of: UInt8(ascii: "=")) else { return false }
            let key = Array(member[..<equals])
            let value = Array(member[(equals + 1)...])
            guard isKey(key), !value.isEmpty, value.count <= 256,
                  value.allSatisfy({ (0x20...0x7E).contains($0) && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "=") }),
                  value.last != 0x20, !keys.contains(key) else { return false }
            keys.append(key)
        }
        return keys.count <= 32
    }

    private static func isKey(_ key: [UInt8]) -> Bool {
        let lower = { (byte: UInt8) in (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) }
        let digit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        let keyCharacter = { (byte: UInt8) in lower(byte) || digit(byte) || "_-*/".utf8.contains(byte) }
        let parts = key.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            return (1...256).contains(key.count) && lower(key[0]) && key.dropFirst().allSatisfy(keyCharacter)
        case 2:
            let (tenant, system) = (Array(parts[0]), Array(parts[1]))
            return (1...241).contains(tenant.count) && (lower(tenant[0]) || digit(tenant[0])) && tenant.dropFirst().allSatisfy(keyCharacter)
                && (1...14).contains(system.count) && lower(system[0]) && system.dropFirst().allSatisfy(keyCharacter)
        default:
            return false
        }
    }
}
