import HTTPFraming
import Testing

/// What one call to `parse` gave, in a form tests can compare.
enum Parsed: Equatable {
    case needMore
    case continueExpected
    case request(method: String, target: String, body: String)
    case failed(status: Int, message: String)
}

extension HTTPRequestParser {
    /// Feeds `text` in pieces of `chunkSize` bytes; returns every event and
    /// the bytes left unused after the last one.
    mutating func feed(_ text: String, chunkSize: Int = .max) -> (events: [Parsed], unused: String) {
        let bytes = Array(text.utf8)
        var events: [Parsed] = []
        var pending: [UInt8] = []
        var next = 0
        while next < bytes.count {
            let end = next + min(chunkSize, bytes.count - next)
            pending += bytes[next..<end]
            next = end
            while !pending.isEmpty {
                let (used, event) = pending.withUnsafeBytes { parse($0) }
                pending.removeFirst(used)
                switch event {
                case .needMore:
                    #expect(pending.isEmpty, "needMore leaves no byte unused")
                case .continueExpected:
                    events.append(.continueExpected)
                case .request(let head, let body):
                    events.append(.request(method: head.method, target: head.target, body: String(decoding: body, as: UTF8.self)))
                case .failed(let error):
                    events.append(.failed(status: error.status, message: error.message))
                    return (events, String(decoding: pending + bytes[next...], as: UTF8.self))
                }
            }
        }
        return (events, String(decoding: pending, as: UTF8.self))
    }
}

func parser(maxBody: Int = 1024, maxHeader: Int = 512, maxFields: Int = 10) -> HTTPRequestParser {
    HTTPRequestParser(limits: .init(maxHeaderBytes: maxHeader, maxHeaderFields: maxFields, maxBodyBytes: maxBody))
}

@Suite struct RequestParserTests {
    @Test(arguments: [1, 2, 3, 7, 1000])
    func readsTheSameRequestsWhateverTheReadSizes(chunkSize: Int) {
        var parser = parser()
        let stream = "\r\nPOST /rpc?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"
            + "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
            + "POST /rpc HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\n[1,\r\na\r\n2,3]      \r\n0\r\nX-Trailer: t\r\n\r\n"
        let (events, unused) = parser.feed(stream, chunkSize: chunkSize)
        #expect(events == [
            .request(method: "POST", target: "/rpc?x=1", body: "{}"),
            .request(method: "GET", target: "/healthz", body: ""),
            .request(method: "POST", target: "/rpc", body: "[1,2,3]      "),
        ])
        #expect(unused == "")
        #expect(!parser.isInsideRequest)
    }

    @Test(arguments: [
        ("/rpc", "/rpc"),
        ("/rpc?x=1", "/rpc"),
        ("/?", "/"),
        ("/a/b?c?d", "/a/b"),
        ("*", "*"),
        ("http://example.com", "/"),
        ("http://example.com?q", "/"),
        ("https://example.com:8443/rpc?q=1", "/rpc"),
        ("http://example.com/", "/"),
    ])
    func pathIsTheTargetWithoutAuthorityAndQuery(target: String, path: String) {
        var parser = parser()
        let text = "OPTIONS \(target) HTTP/1.1\r\nHost: example.com\r\n\r\n"
        let (_, event) = Array(text.utf8).withUnsafeBytes { parser.parse($0) }
        guard case .request(let head, _) = event else {
            Issue.record("expected a request for \(target), got \(event)")
            return
        }
        #expect(head.path == path)
    }

    @Test func headFieldsAndVersionAreRead() {
        var parser = parser()
        let text = "GET http://example.com/readyz?probe=1 HTTP/1.0\r\nHost: example.com\r\nX-Request-Id:  abc \t\r\nConnection: keep-alive\r\n\r\n"
        let (_, event) = Array(text.utf8).withUnsafeBytes { parser.parse($0) }
        guard case .request(let head, let body) = event else {
            Issue.record("expected a request, got \(event)")
            return
        }
        #expect(head.version == .http10)
        #expect(head.keepAlive)
        #expect(head.path == "/readyz")
        #expect(head.headers["x-request-id"] == "abc")
        #expect(head.headers.fields.map(\.name) == ["Host", "X-Request-Id", "Connection"])
        #expect(body.isEmpty)
    }

    /// Every tchar of RFC 9110 section 5.6.2 may make a field name (and a
    /// method); nothing else may.
    @Test func fieldNamesAreExactlyTokens() {
        let tchars = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        var accepting = HTTPFramingTests.parser(maxHeader: 4096, maxFields: 10)
        let (events, _) = accepting.feed("GET / HTTP/1.1\r\nHost: a\r\n\(tchars): v\r\n\r\n")
        #expect(events == [.request(method: "GET", target: "/", body: "")])
        for byte in UInt8(0x21)...UInt8(0x7E) where !tchars.utf8.contains(byte) && byte != UInt8(ascii: ":") {
            var refusing = HTTPFramingTests.parser()
            let name = String(decoding: [UInt8(ascii: "X"), byte], as: UTF8.self)
            let (refused, _) = refusing.feed("GET / HTTP/1.1\r\nHost: a\r\n\(name): v\r\n\r\n")
            #expect(refused == [.failed(status: 400, message: "a header name holds a character that is not a token character")], "\(name)")
        }
    }

    @Test func keepAliveFollowsTheVersionAndConnection() {
        func keepAlive(_ head: String) -> Bool? {
            var parser = parser()
            let (_, event) = Array((head + "\r\n").utf8).withUnsafeBytes { parser.parse($0) }
            if case .request(let parsed, _) = event { return parsed.keepAlive }
            return nil
        }
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\n") == true)
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.0\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n") == true)
        #expect(keepAlive("GET / HTTP/1.2\r\nHost: a\r\n") == true)
    }

    /// RFC 9112 sections 2.2, 3, 5, 6.1, 6.3 and 7.1: each of these could be
    /// framed differently by another parser on the path, so each is refused.
    @Test(arguments: [
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "more than one Content-Length field"),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400, "more than one Content-Length field"),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\n{}", 400, "Content-Length is not plain decimal digits"),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\n\r\n{}", 400, "Content-Length is not plain decimal digits"),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x2\r\n\r\n{}", 400, "Content-Length is not plain decimal digits"),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\u{0}35\r\n\r\n{}", 400, "a header value holds a control character"),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "both Content-Length and Transfer-Encoding"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", 501, "the only transfer coding accepted is chunked"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", 501, "the only transfer coding accepted is chunked"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "the only transfer coding accepted is chunked"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501, "the only transfer coding accepted is chunked"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \u{0B}chunked\r\n\r\n", 400, "a header value holds a control character"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n", 400, "whitespace between a header name and its colon"),
        ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "Transfer-Encoding in an HTTP/1.0 request"),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400, "a header line starts with whitespace (obsolete line folding)"),
        ("GET / HTTP/1.1\r\nHost: a\r\nX\u{7F}: a\r\n\r\n", 400, "a header name holds a character that is not a token character"),
        ("GET / HTTP/1.1\r\nHost: a\r\n: a\r\n\r\n", 400, "a header field without a name"),
        ("GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", 400, "a line ends in a bare LF; lines end in CRLF"),
        ("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 400, "a header value holds a control character"),
        ("GET / HTTP/1.1\r\n\r\n", 400, "an HTTP/1.1 request without a Host field"),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "more than one Host field"),
        ("GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400, "the request line does not end in an HTTP version such as HTTP/1.1"),
        ("GET / http/1.1\r\nHost: a\r\n\r\n", 400, "the request line does not end in an HTTP version such as HTTP/1.1"),
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "HTTP/2.0 is not supported; send HTTP/1.1"),
        ("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "the request target is missing or holds a character that is not visible ASCII"),
        ("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400, "the request line does not end in an HTTP version such as HTTP/1.1"),
        (" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "the request line does not start with a method token and one space"),
        ("GET rpc HTTP/1.1\r\nHost: a\r\n\r\n", 400, "the request target is neither a path, an absolute URI nor * for OPTIONS"),
        ("POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}", 417, "Expect holds something other than 100-continue"),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1025\r\n\r\n", 413, "the request body is larger than 1024 bytes"),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413, "the request body is larger than 1024 bytes"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n", 400, "a chunk size is followed by something other than an extension"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2 junk\r\n{}\r\n0\r\n\r\n", 400, "a chunk size is followed by something other than an extension"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n;x\r\n{}\r\n0\r\n\r\n", 400, "a chunk size is not hexadecimal digits"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", 400, "chunk data is not followed by CRLF"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\n{}\r\n0\r\n\r\n", 400, "a line of the chunked body ends in a bare LF; lines end in CRLF"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n401\r\n", 413, "the request body is larger than 1024 bytes"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + String(repeating: "x", count: 1024) + "\r\n1\r\n", 413, "the request body is larger than 1024 bytes"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF\r\n", 413, "a chunk size does not fit in 63 bits"),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX : y\r\n\r\n", 400, "whitespace between a header name and its colon"),
    ])
    func refusesAmbiguousFraming(text: String, status: Int, message: String) {
        for chunkSize in [1, 5, .max] {
            var parser = parser()
            let (events, _) = parser.feed(text + "GET /next HTTP/1.1\r\nHost: a\r\n\r\n", chunkSize: chunkSize)
            // The failure is final: nothing after it is read as a request.
            #expect(events == [.failed(status: status, message: message)], "read \(chunkSize) bytes at a time")
        }
    }

    @Test func headersOverTheLimitAre431() {
        var parser = parser(maxHeader: 64)
        let (events, _) = parser.feed("GET / HTTP/1.1\r\nHost: a\r\nX-Padding: " + String(repeating: "p", count: 64) + "\r\n\r\n", chunkSize: 10)
        #expect(events == [.failed(status: 431, message: "the request line and headers are larger than 64 bytes")])
    }

    @Test func tooManyFieldsAre431() {
        var parser = parser(maxFields: 3)
        let (events, _) = parser.feed("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n")
        #expect(events == [.failed(status: 431, message: "more than 3 header fields")])
    }

    @Test func aTrailerOverTheLimitIs431() {
        var parser = parser(maxHeader: 64)
        let trailer = "X: " + String(repeating: "t", count: 80) + "\r\n"
        let (events, _) = parser.feed("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + trailer + "\r\n", chunkSize: 7)
        #expect(events == [.failed(status: 431, message: "the chunked trailer is larger than 64 bytes")])
    }

    @Test func expectContinueIsReportedOnlyBeforeTheBody() {
        var waiting = parser()
        let head = "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n"
        #expect(waiting.feed(head).events == [.continueExpected])
        #expect(waiting.feed("{}").events == [.request(method: "POST", target: "/", body: "{}")])

        // The body came with the head: no interim answer is due.
        var eager = parser()
        #expect(eager.feed(head + "{}").events == [.request(method: "POST", target: "/", body: "{}")])

        // HTTP/1.0 clients do not wait for 100 Continue.
        var old = parser()
        #expect(old.feed("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n").events == [])
    }

    @Test func isInsideRequestFromTheFirstByte() {
        var parser = parser()
        #expect(!parser.isInsideRequest)
        _ = parser.feed("G")
        #expect(parser.isInsideRequest)
        _ = parser.feed("ET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n{")
        #expect(parser.isInsideRequest)
        _ = parser.feed("}]")
        #expect(!parser.isInsideRequest)
    }
}

@Suite struct ResponseHeadTests {
    @Test func writesStatusDateLengthAndFields() {
        var buffer: [UInt8] = []
        HTTPResponseHead.write(
            status: 200,
            headers: ["Content-Type": "application/json", "X-Request-Id": "abc"],
            contentLength: 15,
            close: false,
            date: Array("Sun, 06 Nov 1994 08:49:37 GMT".utf8),
            into: &buffer
        )
        #expect(String(decoding: buffer, as: UTF8.self) == "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 15\r\nContent-Type: application/json\r\nX-Request-Id: abc\r\n\r\n")
    }

    @Test func ownsFramingFieldsAndDropsFieldsThatWouldSplitTheResponse() {
        var buffer: [UInt8] = []
        HTTPResponseHead.write(
            status: 204,
            headers: ["Content-Length": "99", "Connection": "keep-alive", "X-Evil": "a\r\nSet-Cookie: x", "Bad Name": "v", "X-Ok": "ok"],
            contentLength: nil,
            close: true,
            date: Array("D".utf8),
            into: &buffer
        )
        #expect(String(decoding: buffer, as: UTF8.self) == "HTTP/1.1 204 No Content\r\nDate: D\r\nConnection: close\r\nX-Ok: ok\r\n\r\n")
    }

    @Test(arguments: [
        (784111777, "Sun, 06 Nov 1994 08:49:37 GMT"),
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (951782400, "Tue, 29 Feb 2000 00:00:00 GMT"),
        (1795392000, "Mon, 23 Nov 2026 00:00:00 GMT"),
    ])
    func imfFixdate(seconds: Int, text: String) {
        #expect(String(decoding: HTTPDate.imfFixdate(secondsSince1970: seconds), as: UTF8.self) == text)
    }
}

@Suite struct HeaderLookupTests {
    @Test func namesCompareIgnoringASCIICaseOnly() {
        let headers: HTTPHeaders = ["Content-Type": "a", "X-Request-Id": "b", "x-request-id": "c", "K\u{212A}": "kelvin"]
        #expect(headers["content-type"] == "a")
        #expect(headers["X-REQUEST-ID"] == "b")
        #expect(headers.values("x-Request-ID") == ["b", "c"])
        #expect(headers["Content-Typf"] == nil)
        // "[" and "{" differ by 0x20 but are not letters.
        #expect(HTTPHeaders([("a[", "1")])["a{"] == nil)
        // The Kelvin sign is not an ASCII K.
        #expect(headers["kk"] == nil)
    }
}
