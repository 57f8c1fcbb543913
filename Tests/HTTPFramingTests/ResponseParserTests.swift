import HTTPFraming
import Testing

/// The upstream client's reading of responses: exact statuses, fields,
/// bodies and refusals (RFC 9112), and the same answer however the bytes
/// were split.
@Suite struct ResponseParserTests {
    /// Everything a stream of bytes gave, fed whole or in reads of
    /// `readSize`, then closed when `close` is set: each response as text,
    /// each failure by name.
    static func events(_ text: String, maxBody: Int = 64, maxHeader: Int = 256, maxFields: Int = 8, readSize: Int? = nil, close: Bool = false) -> [String] {
        var parser = HTTPResponseParser(limits: .init(maxHeaderBytes: maxHeader, maxHeaderFields: maxFields, maxBodyBytes: maxBody))
        let stream = Array(text.utf8)
        var events: [String] = []
        var pending: [UInt8] = []
        var next = 0
        func describe(_ event: HTTPResponseParser.Event) -> String? {
            switch event {
            case .needMore: nil
            case .response(let response):
                "\(response.status) \(response.headers.fields.map { "\($0.name)=\($0.value)" }) \(String(decoding: response.body, as: UTF8.self)) keepAlive=\(response.keepAlive)"
            case .failed(let failure): "failed \(failure)"
            }
        }
        reading: while next < stream.count {
            let end = min(stream.count, next + (readSize ?? stream.count))
            pending += stream[next..<end]
            next = end
            while !pending.isEmpty {
                let (used, event) = pending.withUnsafeBytes { parser.parse($0) }
                pending.removeFirst(used)
                guard let text = describe(event) else { break }
                events.append(text)
                if case .failed = event { break reading }
            }
        }
        if close, !(events.last?.hasPrefix("failed") ?? false), let text = describe(parser.finish()) { events.append(text) }
        return events
    }

    @Test func aResponseWithContentLength() {
        #expect(Self.events("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}") ==
            [#"200 ["Content-Type=application/json", "Content-Length=2"] {} keepAlive=true"#])
    }

    @Test func bytesAfterAResponseAreNotUsed() {
        var parser = HTTPResponseParser(limits: .init(maxBodyBytes: 64))
        let bytes = Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 204 No Content\r\n\r\n".utf8)
        let (used, event) = bytes.withUnsafeBytes { parser.parse($0) }
        #expect(used == 39)
        guard case .response(let first) = event else { Issue.record("\(event)"); return }
        #expect(first.status == 200 && first.body == Array("x".utf8))
        let (usedNext, second) = bytes[used...].withUnsafeBytes { parser.parse($0) }
        #expect(usedNext == bytes.count - 39)
        guard case .response(let noContent) = second else { Issue.record("\(second)"); return }
        #expect(noContent.status == 204 && noContent.body.isEmpty && noContent.keepAlive)
    }

    @Test(arguments: [
        ("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", "200 [\"Content-Length=0\"]  keepAlive=true"),
        ("HTTP/1.1 503\r\nContent-Length: 1\r\n\r\nx", "503 [\"Content-Length=1\"] x keepAlive=true"),
        ("HTTP/1.1 429 Too  Many\tRequests\r\nRetry-After:  7 \r\nContent-Length: 0\r\n\r\n", "429 [\"Retry-After=7\", \"Content-Length=0\"]  keepAlive=true"),
    ])
    func theReasonPhraseMayBeEmptyOrAbsent(_ text: String, _ expected: String) {
        #expect(Self.events(text) == [expected])
    }

    @Test func aChunkedBodyWithExtensionsAndATrailer() {
        #expect(Self.events("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n5;a=\"b;c\"\r\nhello\r\n3\r\n{}!\r\n0\r\nX-Sum: 1\r\n\r\n") ==
            [#"200 ["Transfer-Encoding=Chunked"] hello{}! keepAlive=true"#])
    }

    @Test(arguments: [
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: gzip, chunked",
        "Transfer-Encoding: chunked, chunked",
        "Transfer-Encoding: chunked, gzip",
        "Transfer-Encoding: identity",
    ])
    func aCodingOtherThanChunkedAloneIsRefused(_ fields: String) {
        #expect(Self.events("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\n0\r\n\r\n") ==
            [#"failed malformed("a transfer coding other than chunked, which was not asked for")"#])
    }

    @Test(arguments: [204, 304])
    func noContentAndNotModifiedHaveNoBodyWhateverTheyDeclare(_ status: Int) {
        #expect(Self.events("HTTP/1.1 \(status) X\r\nContent-Length: 5\r\n\r\n") == ["\(status) [\"Content-Length=5\"]  keepAlive=true"])
    }

    @Test func aBodyWithoutLengthRunsUntilTheClose() {
        let text = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n{\"a\":1}"
        #expect(Self.events(text) == [])
        #expect(Self.events(text, close: true) == [#"200 ["Connection=keep-alive"] {"a":1} keepAlive=false"#])
        #expect(Self.events(text, readSize: 3, close: true) == [#"200 ["Connection=keep-alive"] {"a":1} keepAlive=false"#])
        #expect(Self.events(text + String(repeating: "x", count: 60), close: true) == ["failed tooLarge(limit: 64)"])
    }

    @Test(arguments: [
        ("", nil),
        ("HTTP/1.1 200 OK\r\nContent-Le", "the connection closed inside the status line or header section"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n1234", "the connection closed 4 bytes into a 10-byte body"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n5\r\nab", "the connection closed inside the chunked body, after 5 bytes of data"),
    ] as [(String, String?)])
    func aCloseCutsShortWhatIsInProgress(_ text: String, _ message: String?) {
        var parser = HTTPResponseParser(limits: .init(maxBodyBytes: 64))
        let bytes = Array(text.utf8)
        if !bytes.isEmpty {
            let (used, event) = bytes.withUnsafeBytes { parser.parse($0) }
            #expect(used == bytes.count)
            guard case .needMore = event else { Issue.record("\(event)"); return }
        }
        #expect(parser.isInsideResponse == (message != nil))
        switch parser.finish() {
        case .needMore: #expect(message == nil)
        case .failed(let failure): #expect(failure == .malformed(message ?? "-"))
        case .response(let response): Issue.record("\(response)")
        }
    }

    @Test func interimResponsesAreSkipped() {
        #expect(Self.events("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") ==
            [#"200 ["Content-Length=2"] ok keepAlive=true"#])
        #expect(Self.events("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n") ==
            [#"failed malformed("101 Switching Protocols answers a request that never asked to switch")"#])
    }

    @Test(arguments: [
        ("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
        ("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", true),
        ("HTTP/1.1 200 OK\r\nConnection: upgrade, close\r\nContent-Length: 0\r\n\r\n", false),
        ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
    ])
    func keepAliveFollowsTheVersionAndConnection(_ text: String, _ keepAlive: Bool) {
        var parser = HTTPResponseParser(limits: .init(maxBodyBytes: 64))
        let (_, event) = Array(text.utf8).withUnsafeBytes { parser.parse($0) }
        guard case .response(let response) = event else { Issue.record("\(event)"); return }
        #expect(response.keepAlive == keepAlive)
    }

    @Test(arguments: [
        ("HTTP/2 200 OK\r\n\r\n", "the status line does not start with an HTTP version such as HTTP/1.1 and one space"),
        ("HTTP/2.0 200 OK\r\n\r\n", "the response is HTTP/2.0; only HTTP/1.x is read"),
        ("ICY 200 OK\r\nContent-Length: 0\r\n\r\n", "the status line does not start with an HTTP version such as HTTP/1.1 and one space"),
        ("HTTP/1.1  200 OK\r\n\r\n", "the status code is not three digits"),
        ("HTTP/1.1 2000 OK\r\n\r\n", "the status code is not followed by a space or the end of the line"),
        ("HTTP/1.1 099 Low\r\n\r\n", "the status code 99 is outside 100 to 599"),
        ("HTTP/1.1 600 High\r\n\r\n", "the status code 600 is outside 100 to 599"),
        ("HTTP/1.1 200 O\u{1}K\r\n\r\n", "the reason phrase holds a control character"),
        ("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", "a line ends in a bare LF; lines end in CRLF"),
        ("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", "a header line starts with whitespace (obsolete line folding)"),
        ("HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", "whitespace between a header name and its colon"),
        ("HTTP/1.1 200 OK\r\n: v\r\n\r\n", "a header field without a name"),
        ("HTTP/1.1 200 OK\r\nA(b: v\r\n\r\n", "a header name holds a character that is not a token character"),
        ("HTTP/1.1 200 OK\r\nA: b\u{7F}\r\n\r\n", "a header value holds a control character"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "both Content-Length and Transfer-Encoding"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", "more than one Content-Length field"),
        ("HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n", "Content-Length is not plain decimal digits"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n", "Content-Length is not plain decimal digits"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n", "a chunk size is not hexadecimal digits"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "chunk data is not followed by CRLF"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n", "a line of the chunked body ends in a bare LF; lines end in CRLF"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Name: x\r\n\r\n", "whitespace between a header name and its colon"),
    ])
    func malformedResponsesAreRefusedSayingWhy(_ text: String, _ message: String) {
        #expect(Self.events(text) == ["failed malformed(\(String(reflecting: message)))"])
        #expect(Self.events(text, readSize: 1) == ["failed malformed(\(String(reflecting: message)))"])
    }

    @Test func aDeclaredBodyOverTheLimitIsRefusedBeforeItArrives() {
        var parser = HTTPResponseParser(limits: .init(maxBodyBytes: 64))
        let head = Array("HTTP/1.1 200 OK\r\nContent-Length: 65\r\n\r\n".utf8)
        let (used, event) = head.withUnsafeBytes { parser.parse($0) }
        #expect(used == head.count)
        guard case .failed(let failure) = event else { Issue.record("\(event)"); return }
        #expect(failure == .tooLarge(limit: 64))
        #expect(Self.events("HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n" + String(repeating: "y", count: 64)).count == 1)
    }

    @Test func aChunkedBodyOverTheLimitFailsAtTheChunkThatPassesIt() {
        #expect(Self.events("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + String(repeating: "a", count: 64) + "\r\n1\r\n") ==
            ["failed tooLarge(limit: 64)"])
        #expect(Self.events("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n") ==
            [#"failed malformed("a chunk size does not fit in 63 bits")"#])
    }

    @Test func headsAndTrailersOverTheirLimitsAreRefused() {
        let big = "HTTP/1.1 200 OK\r\nX: " + String(repeating: "v", count: 300) + "\r\n\r\n"
        #expect(Self.events(big) == ["failed headerTooLarge(limit: 256)"])
        #expect(Self.events(big, readSize: 7) == ["failed headerTooLarge(limit: 256)"])
        let fields = (0..<9).map { "F\($0): v\r\n" }.joined()
        #expect(Self.events("HTTP/1.1 200 OK\r\n" + fields + "\r\n") == ["failed headerTooLarge(limit: 8)"])
        let trailer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " + String(repeating: "t", count: 300) + "\r\n\r\n"
        #expect(Self.events(trailer) == ["failed headerTooLarge(limit: 256)"])
    }

    @Test func aFailureStays() {
        var parser = HTTPResponseParser(limits: .init(maxBodyBytes: 64))
        _ = Array("HTTP/9.9 200 OK\r\n\r\n".utf8).withUnsafeBytes { parser.parse($0) }
        let (used, event) = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8).withUnsafeBytes { parser.parse($0) }
        #expect(used == 0)
        guard case .failed(let failure) = event else { Issue.record("\(event)"); return }
        #expect(failure == .malformed("the response is HTTP/9.9; only HTTP/1.x is read"))
        guard case .failed = parser.finish() else { Issue.record("finish after a failure"); return }
    }

    static let splitCases: [String] = [
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}HTTP/1.1 204 No Content\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n3\r\nabc\r\n0\r\nT: v\r\n\r\n",
        "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nuntil the close",
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nA: b\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n" + String(repeating: "z", count: 65) + "\r\n0\r\n\r\n",
    ]

    @Test(arguments: splitCases)
    func theSameEventsWhateverTheReadSizes(_ text: String) {
        let whole = Self.events(text, close: true)
        #expect(!whole.isEmpty)
        for size in 1...9 {
            #expect(Self.events(text, readSize: size, close: true) == whole, "read size \(size)")
        }
    }
}
