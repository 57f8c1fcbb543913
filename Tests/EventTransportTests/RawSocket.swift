import Glibc

/// A blocking TCP client for talking to a server byte by byte: what a
/// misbehaving client does, without any HTTP library's help.
final class RawSocket: @unchecked Sendable {
    // @unchecked: a socket fd; one thread sends while another reads, as sockets allow.
    let fd: Int32

    /// Connects to 127.0.0.1:`port`; reads give up after `timeoutSeconds`.
    init(port: Int, timeoutSeconds: Int = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawSocketError.failed("socket") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            // No close here: deinit runs for a class whose init throws after
            // every property is set, and closes it. A second close would
            // close whatever another test opened under that number meanwhile.
            throw RawSocketError.failed("connect")
        }
    }

    deinit { Glibc.close(fd) }

    /// Sends every byte; false when the peer has gone.
    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Everything until the peer closes, the timeout, or a reset.
    func readToEnd() -> Reading {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { bytes += buffer[..<count]; continue }
            let end: Reading.End = count == 0 ? .closed : (errno == ECONNRESET ? .reset : .timedOut)
            return Reading(text: String(decoding: bytes, as: UTF8.self), end: end)
        }
    }

    /// The next `count` bytes (fewer at the end, the timeout or a reset).
    func read(_ count: Int) -> String {
        var bytes = [UInt8](repeating: 0, count: count)
        let received = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_WAITALL)) }
        return String(decoding: bytes.prefix(max(received, 0)), as: UTF8.self)
    }

    /// Reads until `count` responses' heads and bodies (by Content-Length)
    /// have arrived.
    func readResponses(_ count: Int) -> [String] {
        var bytes: [UInt8] = []
        var responses: [String] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while responses.count < count {
            if let (length, _) = Self.firstResponse(in: bytes) {
                responses.append(String(decoding: bytes[..<length], as: UTF8.self))
                bytes.removeFirst(length)
                continue
            }
            let received = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard received > 0 else { break }
            bytes += buffer[..<received]
        }
        return responses
    }

    /// The length of the first complete response in `bytes`, if there is one.
    static func firstResponse(in bytes: [UInt8]) -> (Int, String)? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let headEnd = text.utf8.firstRange(of: "\r\n\r\n".utf8) else { return nil }
        let head = String(text[..<headEnd.lowerBound])
        let bodyStart = text.utf8.distance(from: text.utf8.startIndex, to: headEnd.upperBound)
        let length = head.split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: " ")) } ?? 0
        guard bytes.count >= bodyStart + length else { return nil }
        return (bodyStart + length, head)
    }
}

struct Reading: Equatable {
    enum End { case closed, reset, timedOut }
    let text: String
    let end: End
}

enum RawSocketError: Error { case failed(String) }

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
