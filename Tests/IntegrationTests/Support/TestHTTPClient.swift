import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A response as read off the socket.
struct RawHTTPResponse: Sendable {
    let status: Int
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A blocking HTTP/1.1 client over a real TCP socket, for tests. Every call
/// runs on a thread of its own so it never blocks Swift's cooperative pool
/// (which the server under test needs).
final class TestHTTPConnection: @unchecked Sendable {
    // @unchecked: used by one test at a time; each call completes before the next.
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// Why the last read brought nothing, for the error that follows.
    private var readEnd = "connection closed"

    /// How long a read waits for the server's next bytes.
    static let readTimeoutSeconds = 20

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestHTTPError("socket failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            // No close here: a class whose init throws after every property
            // is set still runs its deinit, which closes the descriptor. A
            // second close here could close whatever another thread opened
            // under the same number in between (a child's stderr pipe, seen
            // as a gateway that "never logged its port").
            throw TestHTTPError("connect to port \(port) failed: \(String(cString: strerror(errno)))")
        }
        var timeout = timeval(tv_sec: Self.readTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Sends raw bytes (a request, or garbage).
    func sendRaw(_ bytes: [UInt8]) async throws {
        try await onThread {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard written > 0 else { throw TestHTTPError("send failed: \(String(cString: strerror(errno)))") }
                offset += written
            }
        }
    }

    /// Sends `bytes[i]` on `connections[i]`, all from one thread, back to
    /// back: requests that reach the server in the same moment.
    static func sendAll(_ connections: [TestHTTPConnection], _ bytes: [[UInt8]]) async throws {
        precondition(connections.count == bytes.count, "one message per connection")
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            Thread {
                continuation.resume(with: Result {
                    for (connection, message) in zip(connections, bytes) {
                        var offset = 0
                        while offset < message.count {
                            let written = message[offset...].withUnsafeBytes { send(connection.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                            guard written > 0 else { throw TestHTTPError("send failed: \(String(cString: strerror(errno)))") }
                            offset += written
                        }
                    }
                })
            }.start()
        }
    }

    /// The bytes of a `POST /rpc` of `json`.
    static func rpcRequest(_ json: String) -> [UInt8] {
        Array("POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n\(json)".utf8)
    }

    /// Sends one request and reads its response.
    func request(
        _ method: String,
        _ path: String,
        headers: [(String, String)] = [],
        body: [UInt8] = [],
        contentType: String? = "application/json"
    ) async throws -> RawHTTPResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if method != "GET" && method != "HEAD" || !body.isEmpty { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try await sendRaw(Array(head.utf8) + body)
        return try await readResponse(isHead: method == "HEAD")
    }

    /// Reads one response (Content-Length, chunked, or to end of stream).
    func readResponse(isHead: Bool = false) async throws -> RawHTTPResponse {
        try await onThread { try self.readResponseBlocking(isHead: isHead) }
    }

    /// Shuts the connection both ways now, as a caller hanging up does (the
    /// descriptor itself is closed with this object).
    func hangUp() {
        _ = shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Reads until at least `count` bytes have arrived, and returns them
    /// (exactly those, so a partial answer can be looked at and the rest
    /// left unread); they are not read again.
    func readBytes(_ count: Int) async throws -> [UInt8] {
        try await onThread {
            try self.fill(count)
            let bytes = Array(self.buffer[..<count])
            self.buffer.removeFirst(count)
            return bytes
        }
    }

    /// How a stream read to its end ended.
    enum StreamEnd: Sendable, Equatable { case closed, reset, timedOut }

    /// Reads and drops everything until the server closes or resets the
    /// connection, or the read timeout; returns how many bytes came and how
    /// the stream ended.
    func drain() async -> (bytes: Int, end: StreamEnd) {
        (try? await onThread { () -> (Int, StreamEnd) in
            var total = self.buffer.count
            self.buffer = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = recv(self.fd, &chunk, chunk.count, 0)
                if count > 0 { total += count; continue }
                return (total, count == 0 ? .closed : (errno == ECONNRESET ? .reset : .timedOut))
            }
        }) ?? (0, .timedOut)
    }

    /// Without waiting: true once the server has written to the
    /// connection or closed it (a byte or the end of stream is there to
    /// read), false while it is open and has said nothing. Reads nothing.
    var serverHasActed: Bool {
        if !buffer.isEmpty { return true }
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        return count >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// True when the server has closed the connection (reads end of stream).
    func isClosedByPeer() async -> Bool {
        (try? await onThread { () -> Bool in
            if !self.buffer.isEmpty { return false }
            var byte: UInt8 = 0
            return recv(self.fd, &byte, 1, 0) <= 0
        }) ?? true
    }

    private func readResponseBlocking(isHead: Bool) throws -> RawHTTPResponse {
        let headerEnd = try readUntil(Array("\r\n\r\n".utf8))
        let head = String(decoding: buffer[..<headerEnd], as: UTF8.self)
        buffer.removeFirst(headerEnd + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw TestHTTPError("bad status line: \(head)") }
        let headers = lines.compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name }?.value }
        var body: [UInt8] = []
        if isHead || status == 204 || status == 304 {
            body = []
        } else if let length = header("content-length").flatMap(Int.init) {
            try fill(length)
            body = Array(buffer[..<length])
            buffer.removeFirst(length)
        } else if header("transfer-encoding")?.lowercased() == "chunked" {
            while true {
                let lineEnd = try readUntil(Array("\r\n".utf8))
                let size = Int(String(decoding: buffer[..<lineEnd], as: UTF8.self), radix: 16) ?? 0
                buffer.removeFirst(lineEnd + 2)
                try fill(size + 2)
                body += buffer[..<size]
                buffer.removeFirst(size + 2)
                if size == 0 { break }
            }
        } else {
            while readMore() {}
            body = buffer
            buffer = []
        }
        return RawHTTPResponse(status: status, headers: headers, body: body)
    }

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        while true {
            if let index = find(marker) { return index }
            guard readMore() else { throw TestHTTPError("\(readEnd) before \(String(decoding: marker, as: UTF8.self).debugDescription)") }
        }
    }

    private func fill(_ count: Int) throws {
        while buffer.count < count {
            guard readMore() else { throw TestHTTPError("\(readEnd) with \(buffer.count) of \(count) bytes") }
        }
    }

    private func find(_ marker: [UInt8]) -> Int? {
        guard buffer.count >= marker.count else { return nil }
        for index in 0...(buffer.count - marker.count) where buffer[index..<(index + marker.count)].elementsEqual(marker) {
            return index
        }
        return nil
    }

    /// Reads what has come; false at the end of the stream, on an error, or
    /// when nothing came within the read timeout (`readEnd` says which:
    /// a server that never answers is not one that closed).
    private func readMore() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else {
            let error = errno
            readEnd = switch (count, error) {
            case (0, _): "connection closed"
            case (_, EAGAIN), (_, EWOULDBLOCK): "nothing came within the \(Self.readTimeoutSeconds) s read timeout"
            case (_, ECONNRESET): "connection reset"
            default: "recv failed: \(String(cString: strerror(error)))"
            }
            return false
        }
        buffer += chunk[..<count]
        return true
    }

    private func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }
}

struct TestHTTPError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One-shot helpers: a fresh connection per call.
enum TestHTTP {
    static func post(port: Int, path: String = "/rpc", json: String, headers: [(String, String)] = []) async throws -> RawHTTPResponse {
        try await TestHTTPConnection(port: port).request("POST", path, headers: headers, body: Array(json.utf8))
    }

    static func get(port: Int, path: String, headers: [(String, String)] = []) async throws -> RawHTTPResponse {
        try await TestHTTPConnection(port: port).request("GET", path, headers: headers, contentType: nil)
    }
}
