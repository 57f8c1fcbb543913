import EventTransport
@testable import GatewayMetrics
@testable import GatewayService
import Logging
import Testing

/// The fields of the access line, made in one place (``AccessLog/line(for:)``).
@Suite("AccessLog")
struct AccessLogTests {
    static func record(
        _ requestLine: (method: String, target: String)?, status: Int = 200, bodyBytes: Int = 12,
        duration: Duration = .microseconds(1234), requestID: String? = "rid-1", note: (any Sendable)? = nil
    ) -> HTTPAnswerRecord {
        var headers = HTTPHeaders()
        if let requestID { headers.add("X-Request-Id", requestID) }
        return HTTPAnswerRecord(requestLine: requestLine, status: status, bodyBytes: bodyBytes, duration: duration, responseHeaders: headers, note: note)
    }

    @Test func aLineHoldsTheRequestTheAnswerAndTheCaller() {
        let line = AccessLog.line(for: Self.record(("POST", "/rpc"), status: 401, bodyBytes: 97, note: AccessNote(apiKey: "unknown")))
        #expect(line == [
            "method": "POST",
            "path": "/rpc",
            "status": .stringConvertible(401),
            "bytes": .stringConvertible(97),
            "durationMs": .stringConvertible(1.234),
            "requestId": "rid-1",
            "apiKey": "unknown",
        ])
    }

    @Test func theQueryIsLeftOutAndLongPathsAreCut() {
        #expect(AccessLog.line(for: Self.record(("GET", "/nowhere?token=abc")))["path"] == "/nowhere")
        #expect(AccessLog.line(for: Self.record(("GET", "/?")))["path"] == "/")
        let long = "/" + String(repeating: "a", count: 1000)
        #expect(AccessLog.line(for: Self.record(("GET", long)))["path"] == .string(String(long.prefix(256))))
    }

    @Test func anUnreadRequestLineIsADash() {
        let line = AccessLog.line(for: Self.record(nil, status: 400, requestID: nil))
        #expect(line["method"] == "-")
        #expect(line["path"] == "-")
        #expect(line["requestId"] == "-")
        #expect(line["apiKey"] == nil)
    }

    @Test func millisecondsKeepMicroseconds() {
        #expect(AccessLog.milliseconds(.zero) == 0)
        #expect(AccessLog.milliseconds(.nanoseconds(999)) == 0)
        #expect(AccessLog.milliseconds(.microseconds(1)) == 0.001)
        #expect(AccessLog.milliseconds(.milliseconds(2500)) == 2500)
        #expect(AccessLog.milliseconds(.seconds(3) + .microseconds(5)) == 3000.005)
    }

    /// One count per answer, by status; a status outside the usual ones
    /// gets a series of its own.
    @Test func eachAnswerCountsByItsStatus() {
        let metrics = GatewayMetrics()
        let observer = AccessLog(metrics: metrics, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }).observer
        observer(Self.record(("GET", "/healthz")))
        observer(Self.record(("GET", "/healthz")))
        observer(Self.record(("GET", "/x"), status: 404))
        observer(Self.record(("GET", "/x"), status: 418))
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        let lines = Set(text.split(separator: "\n").map(String.init))
        #expect(lines.contains(#"gateway_http_requests_total{status="200"} 2"#))
        #expect(lines.contains(#"gateway_http_requests_total{status="404"} 1"#))
        #expect(lines.contains(#"gateway_http_requests_total{status="418"} 1"#))
        #expect(lines.contains(#"gateway_http_requests_total{status="503"} 0"#))
    }
}
