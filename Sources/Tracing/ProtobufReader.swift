/// Protobuf's wire format read back into fields, for tests and the test
/// collector: what ``OTLPProtobufEncoder`` wrote, decoded by the rules of
/// the format (not by the encoder's own code), so the two can be checked
/// against each other. Not used by the gateway.
package struct ProtobufMessage: Sendable {
    package enum Value: Sendable, Equatable {
        case varint(UInt64)
        case fixed64(UInt64)
        case fixed32(UInt32)
        case bytes([UInt8])
    }

    package var fields: [(number: Int, value: Value)] = []

    /// Reads one message; nil when the bytes are not protobuf's wire format.
    package init?(_ bytes: [UInt8]) {
        var index = 0
        func varint() -> UInt64? {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while index < bytes.count, shift < 64 {
                let byte = bytes[index]
                index += 1
                result |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return result }
                shift += 7
            }
            return nil
        }
        func little(_ count: Int) -> UInt64? {
            guard index + count <= bytes.count else { return nil }
            var value: UInt64 = 0
            for offset in 0..<count { value |= UInt64(bytes[index + offset]) << UInt64(8 * offset) }
            index += count
            return value
        }
        while index < bytes.count {
            guard let key = varint(), key >> 3 > 0 else { return nil }
            let number = Int(key >> 3)
            switch key & 7 {
            case 0:
                guard let value = varint() else { return nil }
                fields.append((number, .varint(value)))
            case 1:
                guard let value = little(8) else { return nil }
                fields.append((number, .fixed64(value)))
            case 5:
                guard let value = little(4) else { return nil }
                fields.append((number, .fixed32(UInt32(value))))
            case 2:
                guard let length = varint(), length <= UInt64(bytes.count - index) else { return nil }
                fields.append((number, .bytes(Array(bytes[index..<(index + Int(length))]))))
                index += Int(length)
            default:
                return nil
            }
        }
    }

    /// Every value of field `number`, in order.
    package func all(_ number: Int) -> [Value] { fields.filter { $0.number == number }.map(\.value) }

    /// The nested messages of field `number`.
    package func messages(_ number: Int) -> [ProtobufMessage] {
        all(number).compactMap { if case .bytes(let bytes) = $0 { ProtobufMessage(bytes) } else { nil } }
    }

    package func message(_ number: Int) -> ProtobufMessage? { messages(number).first }

    package func string(_ number: Int) -> String? {
        guard case .bytes(let bytes)? = all(number).first else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }

    package func bytes(_ number: Int) -> [UInt8]? {
        guard case .bytes(let bytes)? = all(number).first else { return nil }
        return bytes
    }

    package func integer(_ number: Int) -> UInt64? {
        switch all(number).first {
        case .varint(let value)?, .fixed64(let value)?: value
        case .fixed32(let value)?: UInt64(value)
        default: nil
        }
    }
}

/// Bytes as lower-case hex.
package func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }.joined()
}
