import EventTransport
import Logging
import ProductsDomain

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

        public init(basePath: String, apiToken: String?, retries: Int, attemptTimeout: Duration) {
            self.basePath = basePath
            self.apiToken = apiToken
            self.retries = retries
            self.attemptTimeout = attemptTimeout
        }
    }

    private let client: HTTPSClient
    private let settings: Settings
    private let concurrency: AsyncSemaphore
    private let metrics: GatewayMetrics
    private let logger: Logger

    init(client: HTTPSClient, settings: Settings, concurrency: AsyncSemaphore, metrics: GatewayMetrics, logger: Logger) {
        self.client = client
        self.settings = settings
        self.concurrency = concurrency
        self.metrics = metrics
        self.logger = logger
    }

    public func fetch(_ request: SourceRequest) async -> Result<SourcePage, ProductsFetchFailure> {
        let path = UpstreamRequestPath.make(basePath: settings.basePath, request: request)
        var headers: HTTPHeaders = ["Accept": "application/json", "X-Request-Id": request.requestID]
        if let token = settings.apiToken { headers.add("Authorization", "Bearer \(token)") }
        if let language = request.scope.language { headers.add("Accept-Language", language.text) }
        var logger = self.logger
        logger[metadataKey: "requestId"] = "\(request.requestID)"

        var attempt = 0
        while true {
            let outcome = await attemptOnce(path: path, headers: headers)
            let verdict = UpstreamResponseClassifier.classify(outcome)
            switch verdict {
            case .success(let page):
                return .success(page)
            case .failure(let failure, let retryable, let retryAfter):
                let canRetry = retryable && attempt < settings.retries
                guard canRetry else { return .failure(failure) }
                let backoff = retryAfter.map { Duration.seconds($0) } ?? jitteredBackoff(attempt: attempt)
                // A retry that cannot finish before the deadline is not worth
                // starting; the caller gets the real failure instead.
                if ContinuousClock.now + backoff >= request.deadline {
                    return .failure(failure)
                }
                logger.debug("upstream attempt failed, retrying", metadata: [
                    "attempt": "\(attempt + 1)", "reason": "\(failure.reason)", "backoffMs": "\(backoff.milliseconds)",
                ])
                try? await Task.sleep(for: backoff)
                attempt += 1
            }
        }
    }

    /// One attempt, bounded as a whole by `UPSTREAM_TIMEOUT_MS` (libevent's
    /// own timeouts only bound each wait for a byte, so a peer trickling
    /// bytes could otherwise hold the shared fetch). An attempt given up on
    /// finishes in the background: it keeps its concurrency permit until
    /// then, and its connection goes back to the pool or is closed.
    private func attemptOnce(path: String, headers: HTTPHeaders) async -> Result<HTTPClientResponse, HTTPClientError> {
        await concurrency.acquire()
        metrics.upstreamStarted()
        let started = ContinuousClock.now
        let winner = FirstResult<Result<HTTPClientResponse, HTTPClientError>>()
        let timeout = settings.attemptTimeout
        let (client, metrics, concurrency) = (self.client, self.metrics, self.concurrency)
        return await withCheckedContinuation { continuation in
            winner.install(continuation)
            // Whichever ends first answers the attempt and is the one counted
            // in gateway_upstream_requests_total.
            let timer = Task {
                try? await Task.sleep(for: timeout)
                guard !Task.isCancelled else { return }
                let timedOut = HTTPClientError(
                    kind: .timeout,
                    message: "no complete answer within \(timeout.milliseconds) ms (UPSTREAM_TIMEOUT_MS)"
                )
                if winner.offer(.failure(timedOut)) {
                    metrics.recordUpstream(status: "connection_error", duration: ContinuousClock.now - started)
                }
            }
            Task {
                let result = await client.get(path: path, headers: headers)
                timer.cancel()
                metrics.upstreamEnded()
                concurrency.release()
                if winner.offer(result) {
                    let status: String
                    switch result {
                    case .success(let response): status = "\(response.status)"
                    case .failure: status = "connection_error"
                    }
                    metrics.recordUpstream(status: status, duration: ContinuousClock.now - started)
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

extension Duration {
    var milliseconds: Int64 { nanoseconds / 1_000_000 }
}

/// Builds `{base}/v1/apps/{appId}/products?ids=a,b&country=DE`.
enum UpstreamRequestPath {
    static func make(basePath: String, request: SourceRequest) -> String {
        let ids = request.identifiers.map { percentEncode($0) }.joined(separator: ",")
        return "\(basePath)/v1/apps/\(percentEncode(request.scope.appID))/products?ids=\(ids)&country=\(request.scope.country.text)"
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters.
    static func percentEncode(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                result += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]], as: UTF8.self)
            }
        }
        return result
    }
}
