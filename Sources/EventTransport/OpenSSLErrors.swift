import COpenSSL

/// Drains OpenSSL's thread-local error queue into readable lines, so a
/// failure names its cause instead of leaving stale errors for the next call.
enum OpenSSLErrors {
    static func drain() -> [String] {
        var lines: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            lines.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return lines
    }

    static func describe(_ code: UInt) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The reason of an error code in words (`wrong version number`,
    /// `sslv3 alert handshake failure`), or its whole line when OpenSSL has
    /// no reason text for it.
    static func reason(_ code: UInt) -> String {
        guard let text = ERR_reason_error_string(code) else { return describe(code) }
        return String(cString: text)
    }

    static func error(_ call: String) -> TransportError {
        let stack = drain()
        return TransportError(call: call, message: stack.isEmpty ? "failed" : stack.joined(separator: "; "))
    }
}
