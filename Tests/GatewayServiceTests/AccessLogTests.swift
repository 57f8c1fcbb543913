import EventTransport
@testable import GatewayMetrics
@testable import GatewayService
import Logging
import Synchronization
import Testing

/// The fields of the access line, made in one place (``AccessLog/line(for:elapsed:)``).
@Suite("AccessLog")
struct AccessLogTests {
    static func record(
        _ requestLine: (method: String, target: String)?, status: Int = 200, bodyBytes: Int = 12,
        requestID: String? = "rid-1", note: (any AnyObject & Sendable)? = nil
    ) -> HTTPAnswerRecord {
        var headers = HTTPHeaders()
        if let requestID { headers.add("X-Request-Id", requestID) }
        return HTTPAnswerRecord(requestLine: requestLine, status: status, bodyBytes: bodyBytes, started: .now, responseHeaders: headers, note: note)
    }

    @Test func aLineHoldsTheRequestTheAnswerAndTheCaller() {
        let line = AccessLog.line(for: Self.record(("POST", "/rpc"), status: 401, bodyBytes: 97, note: AccessNote(apiKey: "unknown")), elapsed: .microseconds(1234))
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
        #expect(AccessLog.line(for: Self.record(("GET", "/nowhere?token=abc")), elapsed: .microseconds(1234))["path"] == "/nowhere")
        #expect(AccessLog.line(for: Self.record(("GET", "/?")), elapsed: .microseconds(1234))["path"] == "/")
        let long = "/" + String(repeating: "a", count: 1000)
        #expect(AccessLog.line(for: Self.record(("GET", long)), elapsed: .microseconds(1234))["path"] == .string(String(long.prefix(256))))
    }

    @Test func anUnreadRequestLineIsADash() {
        let line = AccessLog.line(for: Self.record(nil, status: 400, requestID: nil), elapsed: .microseconds(1234))
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
        let observer = AccessLog(metrics: metrics, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        observer.counted(status: 200)
        observer.counted(status: 200)
        observer.counted(status: 404)
        observer.counted(status: 418)
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        let lines = Set(text.split(separator: "\n").map(String.init))
        #expect(lines.contains(#"gateway_http_requests_total{status="200"} 2"#))
        #expect(lines.contains(#"gateway_http_requests_total{status="404"} 1"#))
        #expect(lines.contains(#"gateway_http_requests_total{status="418"} 1"#))
        #expect(lines.contains(#"gateway_http_requests_total{status="503"} 0"#))
    }

    /// Below `info` nothing is asked of the connection but the count; at
    /// `info` each record becomes one line.
    @Test func onlyAnInfoLoggerWantsRecords() throws {
        let lines = Mutex<[String]>([])
        func logger(_ level: Logger.Level) -> Logger {
            Logger(label: "test") { _ in GatewayLogHandler(format: .json, level: level) { line in lines.withLock { $0.append(line) } } }
        }
        #expect(!AccessLog(metrics: GatewayMetrics(), logger: logger(.warning)).wantsRecords)
        let access = AccessLog(metrics: GatewayMetrics(), logger: logger(.info))
        #expect(access.wantsRecords)
        access.answered(Self.record(("GET", "/healthz"), status: 200, bodyBytes: 15, requestID: "rid-9"))
        let logged = lines.withLock { $0 }
        #expect(logged.count == 1)
        #expect(logged.first?.contains(#""msg":"http request""#) == true)
        #expect(logged.first?.contains(#""requestId":"rid-9""#) == true)
        #expect(logged.first?.contains(#""status":200"#) == true)
    }
}
