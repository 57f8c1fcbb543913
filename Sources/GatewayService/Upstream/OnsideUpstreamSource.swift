public import EventTransport
import GatewayMetrics
import Logging
public import MemoryTier
import MonotonicTime
public import ProductsDomain
import SharedTier
import Tracing

/// The Onside products API over verified HTTPS (contract section 2), with
/// retries after connection errors, 502, 503 and 504, jittered exponential
/// backoff, `Retry-After`, and never past the fetch's deadline.
public struct OnsideUpstreamSource: ProductSource {
    public struct Settings: Sendable {
        public var basePath: String
        public var apiToken: String?
        public var retries: Int
        /// The longest one attempt may take, from start to the last byte.
        public var attemptTimeout: Duration
        /// First backoff; doubled after each attempt, with full jitter in its upper half.
        public var initialBackoff: Duration = .milliseconds(100)
        /// The upstream's host and port, for the CLIENT spans' attributes.
        public var serverHost = ""
        public var serverPort = 443

        public init(basePath: String, apiToken: String?, retries: Int, attemptTimeout: Duration, serverHost: String = "", serverPort: Int = 443) {
            self.serverHost = serverHost
            self.serverPort = serverPort
            self.basePath = basePath
            self.apiToken = apiToken
            self.retries = retries
            self.attemptTimeout = attemptTimeout
        }
    }

    private let client: HTTPSClient
    private let settings: Settings
    private let metrics: GatewayMetrics
    private let logger: Logger
    /// `Bearer <token>`, made once rather than per request.
    private let authorization: String?
    /// Where each attempt's CLIENT span goes (when its call is recorded).
    private let tracer: Tracer
    /// `https://host:port`, the start of each span's `url.full`.
    private let origin: String

    /// - Parameter client: Caps exchanges in flight (`UPSTREAM_CONCURRENCY`)
    ///   and bounds each one (`UPSTREAM_TIMEOUT_MS`) itself.
    init(client: HTTPSClient, settings: Settings, metrics: GatewayMetrics, logger: Logger, tracer: Tracer = Tracer()) {
        self.tracer = tracer
        let host = settings.serverHost.contains(":") ? "[\(settings.serverHost)]" : settings.serverHost
        self.origin = settings.serverPort == 443 ? "https://\(host)" : "https://\(host):\(settings.serverPort)"
        self.client = client
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.authorization = settings.apiToken.map { "Bearer \($0)" }
    }

    /// The fetch with no task: each attempt's answer comes back by the
    /// client's callback, on `loop`, and the backoff before a retry is a
    /// timer of `loop`.
    public func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
        let path = UpstreamRequestPath.make(basePath: settings.basePath, request: request)
        var headers = HTTPHeaders(reservingCapacity: 6)
        headers.add("Accept", "application/json")
        headers.add("X-Request-Id", request.requestID)
        if let authorization { headers.add("Authorization", authorization) }
        if let language = request.scope.language { headers.add("Accept-Language", language.text) }
        attempt(0, path: path, headers: headers, request: request, on: loop, completion: completion)
    }

    /// The CLIENT span of one attempt (OpenTelemetry's HTTP client
    /// conventions): method, server, `url.full` (never credentials: the
    /// token travels in a header), the status, and `error.type` on a
    /// failure (the status, or the client's kind of error).
    private func clientSpan(_ span: SpanContext, parent: SpanID, traceState: String?, path: String, start: UInt64, outcome: Result<HTTPClientResponse, HTTPClientError>) -> SpanData {
        var attributes = [
            SpanAttribute("http.request.method", "GET"),
            SpanAttribute("server.address", settings.serverHost),
            SpanAttribute("server.port", settings.serverPort),
            SpanAttribute("url.full", origin + path),
        ]
        var status = SpanData.Status.unset
        switch outcome {
        case .success(let response):
            attributes.append(SpanAttribute("http.response.status_code", response.status))
            if response.status >= 400 {
                attributes.append(SpanAttribute("error.type", String(response.status)))
                status = .error(message: "")
            }
        case .failure(let error):
            attributes.append(SpanAttribute("error.type", error.kind.rawValue))
            status = .error(message: error.message)
        }
        return SpanData(
            context: span, parentSpanID: parent.isValid ? parent : nil, traceState: traceState,
            name: "GET", kind: .client, startUnixNanos: start, endUnixNanos: UnixClock.nanoseconds(),
            attributes: attributes, status: status
        )
    }

    /// One attempt. The client bounds it as a whole by `UPSTREAM_TIMEOUT_MS`
    /// with a loop timer that closes its connection and frees its lease at
    /// once; the wait for a lease is bounded by the fetch's deadline.
    private func attempt(_ attempt: Int, path: String, headers: HTTPHeaders, request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
        let started = MonotonicInstant.now
        // Each attempt is a span of its own, under the span of the call
        // that started the fetch (its trace and sampled flag), and says so
        // upstream: `traceparent` with that span's id, and the caller's
        // `tracestate`. A fetch no call started begins a trace.
        let parent = request.trace?.span ?? SpanContext(traceID: TraceIDGenerator.traceID(), spanID: SpanID(0), flags: .sampled)
        let span = SpanContext(traceID: parent.traceID, spanID: TraceIDGenerator.spanID(), flags: parent.flags)
        var attemptHeaders = headers
        attemptHeaders.add("traceparent", span.traceparent)
        if let state = request.trace?.traceState { attemptHeaders.add("tracestate", state) }
        let recorded = request.trace?.links != nil && tracer.isExporting
        let startedUnixNanos = recorded ? UnixClock.nanoseconds() : 0
        client.get(on: loop, path: path, headers: attemptHeaders, leaseDeadline: request.deadline) { [self] outcome in
            switch outcome {
            case .success(let response): metrics.recordUpstream(status: response.status, duration: MonotonicInstant.now - started)
            case .failure: metrics.recordUpstream(status: nil, duration: MonotonicInstant.now - started)
            }
            if recorded {
                tracer.record(clientSpan(span, parent: parent.spanID, traceState: request.trace?.traceState, path: path, start: startedUnixNanos, outcome: outcome))
            }
            metrics.recordUpstreamIdentifiers(request.identifiers.count)
            switch UpstreamResponseClassifier.classify(outcome) {
            case .success(let page):
                // What was not asked for goes no further (the shared tier
                // stores and publishes what this returns).
                completion(.success(page.restricted(to: request.identifiers)))
            case .failure(let failure, let retryable, let retryAfter):
                // Not after the client shut down: nothing would start.
                guard retryable && attempt < settings.retries && !client.isShutDown else { return completion(.failure(failure)) }
                let backoff = retryAfter.map { Duration.seconds($0) } ?? jitteredBackoff(attempt: attempt)
                // A retry that cannot finish before the deadline is not worth
                // starting; the caller gets the real failure instead.
                if MonotonicInstant.now + backoff >= request.deadline {
                    return completion(.failure(failure))
                }
                logger.debug("upstream attempt failed, retrying", metadata: [
                    "requestId": "\(request.requestID)", "traceId": .string(span.traceID.hex), "spanId": .string(parent.spanID.hex),
                    "attempt": .stringConvertible(attempt + 1), "reason": "\(failure.reason)", "backoffMs": .stringConvertible(backoff.milliseconds),
                ])
                // The client answers on `loop`: the backoff is its timer.
                _ = loop.scheduleTimer(after: backoff) { [self] in
                    self.attempt(attempt + 1, path: path, headers: headers, request: request, on: loop, completion: completion)
                }
            }
        }
    }

    private func jitteredBackoff(attempt: Int) -> Duration {
        let ceiling = settings.initialBackoff * (1 << min(attempt, 10))
        let fraction = Double.random(in: 0.5...1.0)
        return ceiling * fraction
    }
}

/// Builds `{base}/v1/apps/{appId}/products?ids=a,b&country=DE`.
enum UpstreamRequestPath {
    static func make(basePath: String, request: SourceRequest) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(basePath.utf8.count + 48 + request.identifiers.reduce(0) { $0 + $1.utf8.count + 1 })
        bytes.append(contentsOf: basePath.utf8)
        bytes.append(contentsOf: "/v1/apps/".utf8)
        appendPercentEncoded(request.scope.appID, to: &bytes)
        bytes.append(contentsOf: "/products?ids=".utf8)
        for (index, identifier) in request.identifiers.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            appendPercentEncoded(identifier, to: &bytes)
        }
        bytes.append(contentsOf: "&country=".utf8)
        bytes.append(contentsOf: request.scope.country.text.utf8)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters.
    static func percentEncode(_ text: String) -> String {
        var bytes: [UInt8] = []
        appendPercentEncoded(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func appendPercentEncoded(_ text: String, to bytes: inout [UInt8]) {
        var text = text
        text.withUTF8 { utf8 in
            // Identifiers are usually unreserved characters only: checked,
            // then copied in one append instead of byte by byte.
            guard utf8.contains(where: { !isUnreserved($0) }) else {
                bytes.append(contentsOf: utf8)
                return
            }
            let hex: StaticString = "0123456789ABCDEF"
            for byte in utf8 {
                if isUnreserved(byte) {
                    bytes.append(byte)
                } else {
                    bytes.append(UInt8(ascii: "%"))
                    bytes.append(hex.utf8Start[Int(byte >> 4)])
                    bytes.append(hex.utf8Start[Int(byte & 0xF)])
                }
            }
        }
    }

    /// RFC 3986 unreserved: `ALPHA / DIGIT / "-" / "." / "_" / "~"`.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}

/// `gateway_upstream_inflight`, fed by the client as exchanges go out and end.
struct UpstreamInflightGauge: HTTPSClientObserver {
    let metrics: GatewayMetrics

    func exchangeStarted() { metrics.upstreamStarted() }
    func exchangeEnded() { metrics.upstreamEnded() }
}
