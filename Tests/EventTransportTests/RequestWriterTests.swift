@testable import EventTransport
import Testing

/// The upstream request's head, byte for byte.
@Suite("RequestWriter")
struct RequestWriterTests {
    func text(_ path: String, host: String = "api.onside.test", _ headers: HTTPHeaders) -> String {
        String(decoding: RequestWriter.head(path: path, host: host, headers: headers), as: UTF8.self)
    }

    @Test func writesTheRequestLineHostThenTheFieldsInOrder() {
        var headers = HTTPHeaders()
        headers.add("Accept", "application/json")
        headers.add("X-Request-Id", "r-1")
        headers.add("Authorization", "Bearer t0ken")
        #expect(text("/v1/apps/a/products?ids=x,y&country=DE", headers) ==
            "GET /v1/apps/a/products?ids=x,y&country=DE HTTP/1.1\r\nHost: api.onside.test\r\nAccept: application/json\r\nX-Request-Id: r-1\r\nAuthorization: Bearer t0ken\r\n\r\n")
    }

    @Test func aPostWithABodyGetsItsContentLengthAfterTheFields() {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/x-protobuf")
        let head = String(decoding: RequestWriter.head(method: "POST", path: "/v1/traces", host: "collector:4318", headers: headers, bodyLength: 321), as: UTF8.self)
        #expect(head == "POST /v1/traces HTTP/1.1\r\nHost: collector:4318\r\nContent-Type: application/x-protobuf\r\nContent-Length: 321\r\n\r\n")
    }

    @Test func aHostAmongTheFieldsIsReplacedByTheConnectionsOwn() {
        var headers = HTTPHeaders()
        headers.add("host", "evil.test")
        headers.add("HOST", "evil.test")
        headers.add("Accept", "*/*")
        #expect(text("/", host: "127.0.0.1:8443", headers) == "GET / HTTP/1.1\r\nHost: 127.0.0.1:8443\r\nAccept: */*\r\n\r\n")
    }

    @Test(arguments: ["a\rb", "a\nb", "a\u{0}b"])
    func aFieldHoldingCRLFOrNULIsDroppedRatherThanSplitTheRequest(_ bad: String) {
        var headers = HTTPHeaders()
        headers.add("X-Request-Id", bad)
        headers.add(bad, "value")
        headers.add("Accept", "application/json")
        #expect(text("/p", headers) == "GET /p HTTP/1.1\r\nHost: api.onside.test\r\nAccept: application/json\r\n\r\n")
    }

    @Test func noFieldsGivesRequestLineAndHostOnly() {
        #expect(text("/x", HTTPHeaders()) == "GET /x HTTP/1.1\r\nHost: api.onside.test\r\n\r\n")
    }
}
