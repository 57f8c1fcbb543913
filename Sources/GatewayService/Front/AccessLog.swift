import EventTransport
import GatewayMetrics
import Logging
import Tracing

/// What the gateway's handler tells the access log about a request, beside
/// what the HTTP server knows (``HTTPResponse/note``): which API key asked,
/// and for a request to `/rpc`, its trace. Made once per key (and for no
/// key and an unknown one); one per request only while access lines are
/// written (`LOG_LEVEL` `info` or lower), to carry its trace.
final class AccessNote: Sendable {
    /// ``APIKeyAuthenticator/Caller/logValue``: the key's fingerprint,
    /// `none` or `unknown`.
    let apiKey: String?
    /// The request's trace and span (its call's; a batch's first call's).
    let trace: SpanContext?

    init(apiKey: String?, trace: SpanContext? = nil) {
        self.apiKey = apiKey
        self.trace = trace
    }

    /// A request to `/rpc` without `Authorization`, keys being configured.
    static let missingKey = AccessNote(apiKey: "none")
    /// One whose `Authorization` held no configured key.
    static let unknownKey = AccessNote(apiKey: "unknown")
}

/// The main listener's answers, one by one: `gateway_http_requests_total`
/// by status, and one access line at `info` for each (``line(for:elapsed:)``).
///
/// Runs on the answer's loop, just before the answer is written. Below
/// `info` (the bench's `LOG_LEVEL=warning`) an answer costs one counter:
/// no record is made, and the line and its fields only when written.
final class AccessLog: HTTPAnswerObserver {
    let metrics: GatewayMetrics
    let logger: Logger
    let wantsRecords: Bool

    init(metrics: GatewayMetrics, logger: Logger) {
        self.metrics = metrics
        self.logger = logger
        self.wantsRecords = logger.logLevel <= .info
    }

    /// The message of every access line.
    static let message: Logger.Message = "http request"
    /// Paths longer than this are cut in the line (the request head may be
    /// 16 KiB).
    static let maxPathLength = 256

    func counted(status: Int) {
        metrics.recordHTTPRequest(status: status)
    }

    /// Called only when ``wantsRecords``: `info` lines are written.
    func answered(_ record: borrowing HTTPAnswerRecord) {
        let line = Self.line(for: record, elapsed: record.elapsed)
        logger.info(Self.message, metadata: line)
    }

    /// The fields of one access line; every field of the line is made
    /// here, and only here.
    ///
    /// `method` and `path` (the target without its query, which callers
    /// could fill with anything; at most 256 characters) are `-` when the
    /// request line could not be read; `status`, `bytes` (body bytes sent)
    /// and `durationMs` (`elapsed`: from the request's first byte to its
    /// answer handed to the socket, to the microsecond) are numbers; `requestId` is the
    /// answer's `X-Request-Id`; `apiKey` says which key asked, never the
    /// key, and `traceId`/`spanId` the trace of a request to `/rpc`
    /// (``AccessNote``).
    static func line(for record: borrowing HTTPAnswerRecord, elapsed: Duration) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "method": .string(record.requestLine.map { String($0.method.prefix(32)) } ?? "-"),
            "path": .string(record.requestLine.map { path(of: $0.target) } ?? "-"),
            "status": .stringConvertible(record.status),
            "bytes": .stringConvertible(record.bodyBytes),
            "durationMs": .stringConvertible(milliseconds(elapsed)),
            "requestId": .string(record.responseHeaders["X-Request-Id"] ?? "-"),
        ]
        if let note = record.note as? AccessNote {
            if let apiKey = note.apiKey { metadata["apiKey"] = .string(apiKey) }
            if let trace = note.trace {
                metadata["traceId"] = .string(trace.traceID.hex)
                metadata["spanId"] = .string(trace.spanID.hex)
            }
        }
        return metadata
    }

    /// The target up to its query, at most ``maxPathLength`` characters.
    static func path(of target: String) -> String {
        let path = target.utf8.firstIndex(of: UInt8(ascii: "?")).map { target[..<$0] } ?? target[...]
        return String(path.prefix(maxPathLength))
    }

    /// Milliseconds with three decimals (microseconds), as a JSON number.
    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        let microseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        return Double(microseconds) / 1000
    }
}
