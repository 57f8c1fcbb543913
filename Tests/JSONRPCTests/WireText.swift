import JSONRPC
import Synchronization

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
    /// The reply to `body`, however its methods answer (now, or later from
    /// any thread).
    func handle(body: [UInt8], context: Context) async -> JSONRPCReply {
        await withCheckedContinuation { continuation in
            handle(body: body, context: context) { continuation.resume(returning: $0) }
        }
    }

    /// The reply to `body` when every method answers before `handle`
    /// returns; nil when none came by then.
    func replyNow(to body: String, context: Context) -> JSONRPCReply? {
        let reply = Mutex<JSONRPCReply?>(nil)
        handle(body: Array(body.utf8), context: context) { answer in reply.withLock { $0 = answer } }
        return reply.withLock { $0 }
    }

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
