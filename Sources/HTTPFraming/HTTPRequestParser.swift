/// Reads HTTP/1.1 requests from a byte stream, strictly (RFC 9112).
///
/// Pure: no I/O, no clock. The connection feeds it whatever the socket gave;
/// it returns how many bytes it used and what they completed. It refuses,
/// rather than guesses at, every message whose framing two parsers could
/// read differently (request smuggling): repeated or non-numeric
/// `Content-Length`, `Content-Length` with `Transfer-Encoding`, a transfer
/// coding other than `chunked`, bare CR or LF, whitespace before a colon,
/// folded lines, malformed chunks, a missing or repeated `Host`.
///
/// Memory is bounded by the limits: the head is kept until complete (at
/// most `maxHeaderBytes`), the body until complete (at most `maxBodyBytes`).
public struct HTTPRequestParser: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Request line plus header section (and a chunked body's trailer).
        public var maxHeaderBytes: Int
        /// Most header fields in one request.
        public var maxHeaderFields: Int
        /// Largest body, declared or chunked.
        public var maxBodyBytes: Int

        public init(maxHeaderBytes: Int = 16384, maxHeaderFields: Int = 100, maxBodyBytes: Int = 65536) {
            self.maxHeaderBytes = maxHeaderBytes
            self.maxHeaderFields = maxHeaderFields
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// What the bytes given to ``parse(_:)`` completed.
    public enum Event: Sendable {
        /// Every byte was used; the request is not complete yet.
        case needMore
        /// The head asked for `100 Continue` and its body has yet to come.
        case continueExpected
        /// One whole request. Bytes after it were not used: they belong to
        /// the next request on the connection.
        case request(HTTPRequestHead, body: [UInt8])
        /// The stream cannot be framed; answer `error.status` and close.
        case failed(HTTPFramingError)
    }

    private enum State {
        case head
        case fixedBody(HTTPRequestHead, remaining: Int)
        case chunkedBody(HTTPRequestHead)
        case failed(HTTPFramingError)
    }

    public let limits: Limits
    private var state: State = .head
    /// Head bytes of a head split over several reads.
    private var pending: [UInt8] = []
    private var chunked = ChunkedBodyReader()
    /// CR and LF bytes seen before the request line.
    private var leadingEmptyBytes = 0
    private var body: [UInt8] = []

    public init(limits: Limits) {
        self.limits = limits
    }

    /// Whether part of a request has arrived (the read deadline runs).
    public var isInsideRequest: Bool {
        if case .head = state { return !pending.isEmpty || leadingEmptyBytes > 0 }
        return true
    }

    /// Reads as much of `bytes` as the current request needs.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer) -> (consumed: Int, event: Event) {
        var offset = 0
        while true {
            switch state {
            case .failed(let error):
                return (offset, .failed(error))
            case .head:
                let (used, head) = readHead(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                offset += used
                guard let head else {
                    if case .failed(let error) = state { return (offset, .failed(error)) }
                    return (offset, .needMore)
                }
                switch head.bodyFraming {
                case .none:
                    return (offset, .request(head, body: []))
                case .length(let length):
                    body = []
                    body.reserveCapacity(length)
                    state = .fixedBody(head, remaining: length)
                case .chunked:
                    body = []
                    chunked = ChunkedBodyReader()
                    state = .chunkedBody(head)
                }
                if head.expectsContinue && offset == bytes.count {
                    return (offset, .continueExpected)
                }
            case .fixedBody(let head, let remaining):
                let take = min(remaining, bytes.count - offset)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + take)]))
                offset += take
                if take == remaining {
                    state = .head
                    return (offset, .request(head, body: takeBody()))
                }
                state = .fixedBody(head, remaining: remaining - take)
                return (offset, .needMore)
            case .chunkedBody(let head):
                let (used, outcome) = chunked.read(UnsafeRawBufferPointer(rebasing: bytes[offset...]), into: &body, maxBodyBytes: limits.maxBodyBytes, maxTrailerBytes: limits.maxHeaderBytes)
                offset += used
                switch outcome {
                case .success(true):
                    state = .head
                    return (offset, .request(head, body: takeBody()))
                case .success(false):
                    return (offset, .needMore)
                case .failure(let failure):
                    fail(Self.error(failure, limits: limits))
                    if case .failed(let error) = state { return (offset, .failed(error)) }
                    return (offset, .needMore)
                }
            }
        }
    }

    /// A chunked body's refusal, as this parser answers it.
    private static func error(_ failure: ChunkedBodyReader.Failure, limits: Limits) -> HTTPFramingError {
        switch failure {
        case .framing(let error): error
        case .bodyTooLarge: HTTPFramingError(status: 413, message: "the request body is larger than \(limits.maxBodyBytes) bytes")
        case .trailerTooLarge: HTTPFramingError(status: 431, message: "the chunked trailer is larger than \(limits.maxHeaderBytes) bytes")
        }
    }

    private mutating func takeBody() -> [UInt8] {
        defer { body = [] }
        return body
    }

    private mutating func fail(_ error: HTTPFramingError) {
        var error = error
        if error.requestHeaders == nil {
            switch state {
            case .fixedBody(let head, _), .chunkedBody(let head):
                error.requestHeaders = head.headers
                error.requestLine = (head.method, head.target)
            case .head, .failed: break
            }
        }
        state = .failed(error)
        pending = []
        body = []
    }

    // MARK: - Head

    /// Finds the end of the head (the empty line), checking every line ends
    /// in CRLF; parses it once complete.
    private mutating func readHead(_ bytes: UnsafeRawBufferPointer) -> (Int, HTTPRequestHead?) {
        var start = 0
        // RFC 9112 section 2.2: ignore empty lines before the request line
        // (a few: they are the start of a request, under its deadline).
        while pending.isEmpty, start < bytes.count {
            let byte = bytes[start]
            if leadingEmptyBytes % 2 == 1 {
                guard byte == ASCII.lf else {
                    fail(.badRequest("a bare CR before the request line"))
                    return (start, nil)
                }
            } else if byte == ASCII.lf {
                fail(.badRequest("a line ends in a bare LF; lines end in CRLF"))
                return (start, nil)
            } else if byte != ASCII.cr {
                break
            }
            leadingEmptyBytes += 1
            start += 1
            if leadingEmptyBytes > 8 {
                fail(.badRequest("more than 4 empty lines before the request line"))
                return (start, nil)
            }
        }
        if start == bytes.count && pending.isEmpty { return (start, nil) }
        let previousCount = pending.count
        var end: Int?
        var index = start
        while index < bytes.count {
            guard bytes[index] == ASCII.lf else { index += 1; continue }
            let before = index - start + previousCount
            let previous = index > start ? bytes[index - 1] : pending.last
            guard previous == ASCII.cr else {
                fail(.badRequest("a line ends in a bare LF; lines end in CRLF"))
                return (index + 1, nil)
            }
            // The empty line: LF, CR, LF.
            if before >= 2 {
                let twoBack = index - 2 >= start ? bytes[index - 2] : pending[previousCount + (index - 2 - start)]
                if twoBack == ASCII.lf { end = index + 1; break }
            }
            index += 1
        }
        let used = (end ?? bytes.count)
        if previousCount + (used - start) > limits.maxHeaderBytes {
            fail(HTTPFramingError(status: 431, message: "the request line and headers are larger than \(limits.maxHeaderBytes) bytes"))
            return (used, nil)
        }
        guard let end else {
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...]))
            return (bytes.count, nil)
        }
        leadingEmptyBytes = 0
        let parsed: Result<HTTPRequestHead, HTTPFramingError>
        if previousCount == 0 {
            parsed = HeadParser.parse(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), limits: limits)
        } else {
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
            parsed = pending.withUnsafeBytes { HeadParser.parse($0, limits: limits) }
            pending.removeAll(keepingCapacity: true)
        }
        switch parsed {
        case .success(let head): return (end, head)
        case .failure(let error):
            fail(error)
            return (end, nil)
        }
    }
}
