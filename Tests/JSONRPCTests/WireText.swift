import JSONRPC

/// Bytes on the wire, written and shown as text.
///
/// Equality is byte for byte (`String` equality would call a precomposed and
/// a decomposed "é" equal), while failures still print readable JSON.
struct WireText: Equatable, ExpressibleByStringInterpolation, CustomStringConvertible {
    let bytes: [UInt8]

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    init(_ text: String) {
        bytes = Array(text.utf8)
    }

    init(stringLiteral value: String) {
        self.init(value)
    }

    init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }

    var description: String {
        String(decoding: bytes, as: UTF8.self)
    }
}

extension JSONRPCServer {
    /// The reply to `body`: `nil` for no content, else the JSON bytes.
    func replyText(to body: String, context: Context) async -> WireText? {
        switch await handle(body: Array(body.utf8), context: context) {
        case .noContent:
            return nil
        case .json(let bytes):
            return WireText(bytes: bytes)
        }
    }
}
