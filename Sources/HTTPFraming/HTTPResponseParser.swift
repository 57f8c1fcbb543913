/// Reads the HTTP/1.1 responses to `GET` requests from a byte stream,
/// strictly (RFC 9112): the gateway's HTTPS client reads its upstream with it.
///
/// Pure: no I/O, no clock. The connection feeds it whatever the socket gave;
/// it returns how many bytes it used and what they completed. It refuses,
/// rather than guesses at, every response whose framing two parsers could
/// read differently: a repeated or non-numeric `Content-Length`,
/// `Content-Length` with `Transfer-Encoding`, a transfer coding other than
/// `chunked` alone, bare CR or LF, whitespace before a colon, folded lines,
/// malformed chunks.
///
/// Memory is bounded by the limits: the head is kept until complete (at
/// most `maxHeaderBytes`), the body until complete (at most `maxBodyBytes`,
/// checked against a declared length before any body byte is read).
public struct HTTPResponseParser: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Status line plus header section (and a chunked body's trailer).
        public var maxHeaderBytes: Int
        /// Most header fields in one response.
        public var maxHeaderFields: Int
        /// Largest body, declared or received.
        public var maxBodyBytes: Int

        public init(maxHeaderBytes: Int = 65536, maxHeaderFields: Int = 100, maxBodyBytes: Int) {
            self.maxHeaderBytes = maxHeaderBytes
            self.maxHeaderFields = maxHeaderFields
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// One whole final response.
    public struct Response: Sendable {
        /// 200 through 599 (interim 1xx responses are read and skipped).
        public let status: Int
        /// The header fields in order.
        public let headers: HTTPHeaders
        public let body: [UInt8]
        /// Whether the connection may carry another exchange: HTTP/1.1
        /// without `Connection: close`, or HTTP/1.0 with
        /// `Connection: keep-alive`; never when the body ran until the close.
        public let keepAlive: Bool
    }

    /// Why the stream cannot be read as a response; the connection must close.
    public enum Failure: Error, Sendable, Equatable {
        /// Not HTTP/1.1 as RFC 9112 frames it; says what was wrong.
        case malformed(String)
        /// The body, declared or received, is larger than `limit` bytes.
        case tooLarge(limit: Int)
        /// The status line and header section (or a chunked trailer) are
        /// larger than `limit` bytes, or hold more than the field limit.
        case headerTooLarge(limit: Int)
    }

    /// What the bytes given to ``parse(_:)`` completed.
    public enum Event: Sendable {
        /// Every byte was used; the response is not complete yet.
        case needMore
        /// One whole response. Bytes after it were not used.
        case response(Response)
        /// The stream cannot be framed.
        case failed(Failure)
    }

    private struct Head {
        let status: Int
        let headers: HTTPHeaders
        let keepAlive: Bool
        let framing: Framing
    }

    private enum Framing {
        case none
        case length(Int)
        case chunked
        case untilClose
    }

    private enum State {
        case head
        case fixedBody(Head, remaining: Int)
        case chunkedBody(Head)
        case untilClose(Head)
        case failed(Failure)
    }

    public let limits: Limits
    private var state: State = .head
    /// Head bytes of a head split over several reads.
    private var pending: [UInt8] = []
    private var chunked = ChunkedBodyReader()
    private var body: [UInt8] = []

    public init(limits: Limits) {
        self.limits = limits
    }

    /// Whether part of a response has arrived.
    public var isInsideResponse: Bool {
        if case .head = state { return !pending.isEmpty }
        return true
    }

    /// Reads as much of `bytes` as the current response needs.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer) -> (consumed: Int, event: Event) {
        var offset = 0
        while true {
            switch state {
            case .failed(let failure):
                return (offset, .failed(failure))
            case .head:
                if offset == bytes.count { return (offset, .needMore) }
                let (used, head) = readHead(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                offset += used
                guard let head else {
                    if case .failed(let failure) = state { return (offset, .failed(failure)) }
                    if offset == bytes.count { return (offset, .needMore) }
                    continue // an interim response was skipped
                }
                body = []
                switch head.framing {
                case .none:
                    return (offset, .response(Response(status: head.status, headers: head.headers, body: [], keepAlive: head.keepAlive)))
                case .length(let length):
                    body.reserveCapacity(length)
                    state = .fixedBody(head, remaining: length)
                case .chunked:
                    chunked = ChunkedBodyReader()
                    state = .chunkedBody(head)
                case .untilClose:
                    state = .untilClose(head)
                }
            case .fixedBody(let head, let remaining):
                let take = min(remaining, bytes.count - offset)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + take)]))
                offset += take
                if take == remaining {
                    state = .head
                    return (offset, .response(response(head)))
                }
                state = .fixedBody(head, remaining: remaining - take)
                return (offset, .needMore)
            case .chunkedBody(let head):
                let (used, outcome) = chunked.read(UnsafeRawBufferPointer(rebasing: bytes[offset...]), into: &body, maxBodyBytes: limits.maxBodyBytes, maxTrailerBytes: limits.maxHeaderBytes)
                offset += used
                switch outcome {
                case .success(true):
                    state = .head
                    return (offset, .response(response(head)))
                case .success(false):
                    return (offset, .needMore)
                case .failure(let failure):
                    let refusal = self.failure(failure)
                    fail(refusal)
                    return (offset, .failed(refusal))
                }
            case .untilClose:
                let count = bytes.count - offset
                guard count <= limits.maxBodyBytes - body.count else {
                    fail(.tooLarge(limit: limits.maxBodyBytes))
                    return (bytes.count, .failed(.tooLarge(limit: limits.maxBodyBytes)))
                }
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                return (bytes.count, .needMore)
            }
        }
    }

    /// The peer closed the stream. Completes a response whose body runs
    /// until the close; anything else in progress fails, naming what was cut
    /// short. With nothing in progress it returns ``Event/needMore``: an
    /// idle close is not a framing error, the caller decides what it means.
    public mutating func finish() -> Event {
        switch state {
        case .failed(let failure):
            return .failed(failure)
        case .head:
            guard pending.isEmpty else {
                fail(.malformed("the connection closed inside the status line or header section"))
                return .failed(.malformed("the connection closed inside the status line or header section"))
            }
            return .needMore
        case .untilClose(let head):
            state = .head
            return .response(Response(status: head.status, headers: head.headers, body: takeBody(), keepAlive: false))
        case .fixedBody(_, let remaining):
            let failure = Failure.malformed("the connection closed \(body.count) bytes into a \(body.count + remaining)-byte body")
            fail(failure)
            return .failed(failure)
        case .chunkedBody:
            let failure = Failure.malformed("the connection closed inside the chunked body, after \(body.count) bytes of data")
            fail(failure)
            return .failed(failure)
        }
    }

    private mutating func response(_ head: Head) -> Response {
        Response(status: head.status, headers: head.headers, body: takeBody(), keepAlive: head.keepAlive)
    }

    private mutating func takeBody() -> [UInt8] {
        defer { body = [] }
        return body
    }

    private mutating func fail(_ failure: Failure) {
        state = .failed(failure)
        pending = []
        body = []
    }

    // MARK: - Head

    /// Finds the end of the head (the empty line), checking every line ends
    /// in CRLF; parses it once complete. A complete interim (1xx) head is
    /// consumed and gives nil with the state still `.head`.
    private mutating func readHead(_ bytes: UnsafeRawBufferPointer) -> (Int, Head?) {
        let previousCount = pending.count
        var end: Int?
        var index = 0
        while index < bytes.count {
            guard bytes[index] == ASCII.lf else { index += 1; continue }
            let before = index + previousCount
            let previous = index > 0 ? bytes[index - 1] : pending.last
            guard previous == ASCII.cr else {
                fail(.malformed("a line ends in a bare LF; lines end in CRLF"))
                return (index + 1, nil)
            }
            // The empty line: LF, CR, LF.
            if before >= 2 {
                let twoBack = index >= 2 ? bytes[index - 2] : pending[previousCount + index - 2]
                if twoBack == ASCII.lf { end = index + 1; break }
            }
            index += 1
        }
        let used = end ?? bytes.count
        if previousCount + used > limits.maxHeaderBytes {
            fail(.headerTooLarge(limit: limits.maxHeaderBytes))
            return (used, nil)
        }
        guard let end else {
            pending.append(contentsOf: bytes)
            return (bytes.count, nil)
        }
        let parsed: Result<Head?, Failure>
        if previousCount == 0 {
            parsed = parseHead(UnsafeRawBufferPointer(rebasing: bytes[..<end]))
        } else {
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<end]))
            parsed = pending.withUnsafeBytes { parseHead($0) }
            pending.removeAll(keepingCapacity: true)
        }
        switch parsed {
        case .success(let head): return (end, head)
        case .failure(let failure):
            fail(failure)
            return (end, nil)
        }
    }

    /// Parses a complete head, every line known to end in CRLF. Nil for an
    /// interim response, which has no body and is skipped.
    private func parseHead(_ raw: UnsafeRawBufferPointer) -> Result<Head?, Failure> {
        // The status line: HTTP-version SP 3DIGIT [SP reason-phrase] CRLF.
        guard raw.count >= 14, let version = HeadParser.versionOf(UnsafeRawBufferPointer(rebasing: raw[..<8])), raw[8] == ASCII.space else {
            return .failure(.malformed("the status line does not start with an HTTP version such as HTTP/1.1 and one space"))
        }
        guard version.0 == 1 else {
            return .failure(.malformed("the response is HTTP/\(version.0).\(version.1); only HTTP/1.x is read"))
        }
        var status = 0
        for index in 9..<12 {
            let byte = raw[index]
            guard byte >= ASCII.zero, byte <= ASCII.nine else {
                return .failure(.malformed("the status code is not three digits"))
            }
            status = status * 10 + Int(byte - ASCII.zero)
        }
        guard (100...599).contains(status) else {
            return .failure(.malformed("the status code \(status) is outside 100 to 599"))
        }
        var index = 12
        if raw[index] == ASCII.space {
            index += 1
            // reason-phrase: HTAB, SP, VCHAR, obs-text.
            while raw[index] != ASCII.cr {
                guard ASCII.isFieldValueByte(raw[index]) else {
                    return .failure(.malformed("the reason phrase holds a control character"))
                }
                index += 1
            }
        }
        guard raw[index] == ASCII.cr, raw[index + 1] == ASCII.lf else {
            return .failure(.malformed("the status code is not followed by a space or the end of the line"))
        }
        if status == 101 {
            return .failure(.malformed("101 Switching Protocols answers a request that never asked to switch"))
        }
        index += 2

        var headers = HTTPHeaders(reservingCapacity: 12)
        var contentLengths = 0
        var declaredLength: Int?
        var transferCodings: [UInt8] = []
        var transferEncodings = 0
        var closeRequested = false
        var keepAliveRequested = false
        while index < raw.count - 2 {
            var lineEnd = index
            while raw[lineEnd] != ASCII.cr || raw[lineEnd + 1] != ASCII.lf { lineEnd += 1 }
            let line = UnsafeRawBufferPointer(rebasing: raw[index..<lineEnd])
            index = lineEnd + 2
            let field: (name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
            switch HeadParser.splitField(line) {
            case .failure(let error): return .failure(.malformed(error.message))
            case .success(let split): field = split
            }
            guard headers.count < limits.maxHeaderFields else {
                return .failure(.headerTooLarge(limit: limits.maxHeaderFields))
            }
            headers.add(String(decoding: field.name, as: UTF8.self), String(decoding: field.value, as: UTF8.self))
            switch field.name.count {
            case 10 where ASCII.equalsLowercase(field.name, "connection"):
                Self.forEachToken(field.value) { token in
                    if ASCII.equalsLowercase(token, "close") { closeRequested = true }
                    if ASCII.equalsLowercase(token, "keep-alive") { keepAliveRequested = true }
                }
            case 14 where ASCII.equalsLowercase(field.name, "content-length"):
                contentLengths += 1
                guard contentLengths == 1 else {
                    return .failure(.malformed("more than one Content-Length field"))
                }
                switch HeadParser.contentLength(field.value) {
                case .failure(let error): return .failure(.malformed(error.message))
                case .success(let length): declaredLength = length
                }
            case 17 where ASCII.equalsLowercase(field.name, "transfer-encoding"):
                transferEncodings += 1
                if !transferCodings.isEmpty { transferCodings.append(UInt8(ascii: ",")) }
                transferCodings.append(contentsOf: field.value)
            default:
                break
            }
        }
        if status < 200 { return .success(nil) }

        let keepAlive = version.1 >= 1 ? !closeRequested : (keepAliveRequested && !closeRequested)
        let framing: Framing
        if status == 204 || status == 304 {
            framing = .none
        } else if transferEncodings > 0 {
            guard contentLengths == 0 else {
                return .failure(.malformed("both Content-Length and Transfer-Encoding"))
            }
            // Only chunked: the gateway asks for no coding, so any other
            // (gzip, ...) would hand it bytes it cannot read.
            let onlyChunked = transferCodings.withUnsafeBytes { codings in
                var tokens = 0
                var chunked = 0
                Self.forEachToken(codings) { token in
                    tokens += 1
                    if ASCII.equalsLowercase(token, "chunked") { chunked += 1 }
                }
                return tokens == 1 && chunked == 1
            }
            guard onlyChunked else {
                return .failure(.malformed("a transfer coding other than chunked, which was not asked for"))
            }
            framing = .chunked
        } else if let declaredLength {
            guard declaredLength <= limits.maxBodyBytes else {
                return .failure(.tooLarge(limit: limits.maxBodyBytes))
            }
            framing = declaredLength == 0 ? .none : .length(declaredLength)
        } else {
            framing = .untilClose
        }
        if case .untilClose = framing {
            return .success(Head(status: status, headers: headers, keepAlive: false, framing: framing))
        }
        return .success(Head(status: status, headers: headers, keepAlive: keepAlive, framing: framing))
    }

    /// Calls `body` with each non-empty element of a comma-separated list,
    /// trimmed of spaces and tabs.
    private static func forEachToken(_ list: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        var start = 0
        while start <= list.count {
            var end = start
            while end < list.count, list[end] != UInt8(ascii: ",") { end += 1 }
            var first = start
            var last = end
            while first < last, list[first] == ASCII.space || list[first] == ASCII.tab { first += 1 }
            while last > first, list[last - 1] == ASCII.space || list[last - 1] == ASCII.tab { last -= 1 }
            if last > first { body(UnsafeRawBufferPointer(rebasing: list[first..<last])) }
            start = end + 1
        }
    }

    // MARK: - Chunked body

    /// A chunked body's refusal, as a response's.
    private func failure(_ failure: ChunkedBodyReader.Failure) -> Failure {
        switch failure {
        case .framing(let error): .malformed(error.message)
        case .bodyTooLarge: .tooLarge(limit: limits.maxBodyBytes)
        case .trailerTooLarge: .headerTooLarge(limit: limits.maxHeaderBytes)
        }
    }
}
