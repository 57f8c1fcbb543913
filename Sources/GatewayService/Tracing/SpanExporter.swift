import EventTransport
import GatewayMetrics
import Logging
import MonotonicTime
import Synchronization
import Tracing

/// OpenTelemetry's batch span processor and OTLP/HTTP exporter in one:
/// finished spans go into a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`; a
/// span that finds it full is dropped and counted in
/// `gateway_spans_dropped_total`), and one loop sends them to the collector
/// in batches of `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, every
/// `OTEL_BSP_SCHEDULE_DELAY` or as soon as a batch is full, one export at
/// a time, each bounded by the export timeout.
///
/// A call only appends to the queue under a lock: no export, encoding,
/// retry or failure ever reaches it. A collector that refuses, hangs or is
/// unreachable costs the loop its exchange (a connection, a timer), is
/// retried with backoff, and is logged at most once per 10 s.
final class SpanExporter: Sendable {
    private let endpoint: TracingSettings.Endpoint
    private let exportProtocol: TracingSettings.ExportProtocol
    private let client: HTTPSClient
    /// The loop that encodes and sends.
    let loop: EventLoop
    private let resource: OTLPResource
    private let headers: HTTPHeaders
    private let maxQueueSize: Int
    private let maxBatchSize: Int
    private let scheduleDelay: Duration
    private let exportTimeout: Duration
    private let metrics: GatewayMetrics
    private let logger: Logger
    private let queue: Mutex<Queue>
    /// What only `loop` touches.
    private let onLoop: LoopBoundBox<LoopState>

    /// The most attempts of one batch: the first, then retries after 1, 2,
    /// 4 and 8 s (jittered); then it is given up, and logged.
    static let maxAttempts = 5

    private struct Queue {
        var spans: [SpanData] = []
        /// An export is on its way (or waiting to be retried).
        var exporting = false
        /// An export was asked of the loop and has not begun.
        var kicked = false
        var failureLog = LogRateLimit(interval: .seconds(10))
        /// Spans sent and accepted, for tests and the shutdown's line.
        var exported = 0
    }

    private struct LoopState {
        var scheduleTimer: LoopTimer?
        var retryTimer: LoopTimer?
        /// The shutdown waiting for the queue to be sent.
        var drained: CheckedContinuation<Void, Never>?
        var drainDeadline: LoopTimer?
        var stopped = false
    }

    init(settings: TracingSettings, endpoint: TracingSettings.Endpoint, client: HTTPSClient, loop: EventLoop, resource: OTLPResource, metrics: GatewayMetrics, logger: Logger) {
        self.endpoint = endpoint
        self.exportProtocol = settings.exportProtocol
        self.client = client
        self.loop = loop
        self.resource = resource
        var headers = HTTPHeaders(reservingCapacity: 2 + settings.headers.count)
        headers.add("Content-Type", settings.exportProtocol.contentType)
        for header in settings.headers { headers.add(header.name, header.value) }
        self.headers = headers
        self.maxQueueSize = settings.maxQueueSize
        self.maxBatchSize = settings.maxExportBatchSize
        self.scheduleDelay = .milliseconds(settings.scheduleDelayMS)
        self.exportTimeout = .milliseconds(settings.exportTimeoutMS)
        self.metrics = metrics
        self.logger = logger
        self.queue = Mutex(Queue())
        self.onLoop = LoopBoundBox(sending: LoopState(), loop: loop)
    }

    /// Arms the schedule. From any thread.
    func start() {
        _ = loop.execute { [self] in armSchedule() }
    }

    /// Queues a finished span; from any thread, never blocking on more
    /// than the queue's lock.
    func enqueue(_ span: SpanData) {
        let (dropped, kick) = queue.withLock { queue -> (Bool, Bool) in
            guard queue.spans.count < maxQueueSize else { return (true, false) }
            queue.spans.append(span)
            guard queue.spans.count >= maxBatchSize, !queue.exporting, !queue.kicked else { return (false, false) }
            queue.kicked = true
            return (false, true)
        }
        if dropped { metrics.recordSpansDropped(1) }
        if kick { _ = loop.execute { [self] in exportNext() } }
    }

    /// Spans the collector accepted so far.
    var exportedCount: Int { queue.withLock { $0.exported } }

    /// Spans waiting in the queue now.
    var queuedCount: Int { queue.withLock { $0.spans.count } }

    private func armSchedule() {
        guard !onLoop.value.stopped else { return }
        onLoop.value.scheduleTimer = loop.scheduleTimer(after: scheduleDelay) { [self] in
            onLoop.value.scheduleTimer = nil
            exportNext()
            armSchedule()
        }
    }

    /// Sends the next batch, unless one is on its way. On `loop`.
    private func exportNext() {
        // Stopped and no longer draining: what comes now stays unsent.
        guard !onLoop.value.stopped || onLoop.value.drained != nil else { return }
        let batch = queue.withLock { queue -> [SpanData]? in
            queue.kicked = false
            guard !queue.exporting, !queue.spans.isEmpty else { return nil }
            queue.exporting = true
            guard queue.spans.count > maxBatchSize else {
                // The usual case: the whole queue is the batch, taken
                // with no copy.
                defer { queue.spans = [] }
                return queue.spans
            }
            let batch = Array(queue.spans.prefix(maxBatchSize))
            queue.spans.removeFirst(maxBatchSize)
            return batch
        }
        guard let batch else {
            finishDrainIfIdle()
            return
        }
        let body = switch exportProtocol {
        case .protobuf: OTLPProtobufEncoder.encode(batch, resource: resource)
        case .json: OTLPJSONEncoder.encode(batch, resource: resource)
        }
        send(body, spans: batch.count, attempt: 1)
    }

    private func send(_ body: [UInt8], spans: Int, attempt: Int) {
        client.send(on: loop, method: "POST", path: endpoint.path, headers: headers, body: body, leaseDeadline: .now + exportTimeout) { [self] result in
            // The client answers on `loop`: the exporter's requests run there.
            let failure: (message: String, retryable: Bool)?
            switch result {
            case .success(let response) where (200..<300).contains(response.status):
                failure = nil
            case .success(let response):
                // OTLP/HTTP: 429, 502, 503 and 504 may be retried; any other
                // refusal will be refused again.
                failure = ("the collector answered \(response.status)", [429, 502, 503, 504].contains(response.status))
            case .failure(let error):
                failure = (error.message, error.kind != .malformedResponse && error.kind != .responseTooLarge)
            }
            guard let failure else {
                queue.withLock {
                    $0.exporting = false
                    $0.exported += spans
                }
                exportAgainIfFull()
                return
            }
            let retry = failure.retryable && attempt < Self.maxAttempts && !onLoop.value.stopped && onLoop.value.drained == nil
            logFailure(failure.message, spans: spans, attempt: attempt, retrying: retry)
            guard retry else {
                queue.withLock { $0.exporting = false }
                exportAgainIfFull()
                return
            }
            let ceiling = Duration.seconds(1) * (1 << (attempt - 1))
            let backoff = ceiling * Double.random(in: 0.5...1.0)
            onLoop.value.retryTimer = loop.scheduleTimer(after: backoff) { [self] in
                onLoop.value.retryTimer = nil
                send(body, spans: spans, attempt: attempt + 1)
            }
        }
    }

    /// After an export: the next batch now when a full one waits (or the
    /// shutdown is draining), else at the schedule.
    private func exportAgainIfFull() {
        let full = queue.withLock { $0.spans.count >= maxBatchSize || (onLoop.value.drained != nil && !$0.spans.isEmpty) }
        if full { exportNext() } else { finishDrainIfIdle() }
    }

    private func logFailure(_ message: String, spans: Int, attempt: Int, retrying: Bool) {
        guard let heldBack = queue.withLock({ $0.failureLog.permit(now: .now) }) else { return }
        var metadata: Logger.Metadata = [
            "endpoint": "\(endpoint.url)", "detail": "\(message)", "spans": .stringConvertible(spans),
            "attempt": .stringConvertible(attempt), "retrying": .stringConvertible(retrying),
        ]
        if heldBack > 0 { metadata["suppressed"] = .stringConvertible(heldBack) }
        logger.warning("trace export failed; calls are not affected", metadata: metadata)
    }

    /// Sends what is queued, for at most `within`, then stops: no schedule,
    /// no retry. Calls made after it are not exported. From a thread that
    /// is not the loop's.
    func shutdown(within: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let accepted = loop.execute { [self] in
                onLoop.value.stopped = true
                onLoop.value.scheduleTimer?.cancel()
                onLoop.value.scheduleTimer = nil
                onLoop.value.drained = continuation
                onLoop.value.drainDeadline = loop.scheduleTimer(after: within) { [self] in
                    onLoop.value.drainDeadline = nil
                    resumeDrain()
                }
                if onLoop.value.retryTimer != nil {
                    // A retry in its backoff: given up, not waited for.
                    onLoop.value.retryTimer?.cancel()
                    onLoop.value.retryTimer = nil
                    queue.withLock { $0.exporting = false }
                }
                exportNext()
            }
            if !accepted { continuation.resume() }
        }
    }

    private func finishDrainIfIdle() {
        guard onLoop.value.drained != nil else { return }
        let idle = queue.withLock { !$0.exporting && $0.spans.isEmpty }
        if idle { resumeDrain() }
    }

    private func resumeDrain() {
        onLoop.value.drainDeadline?.cancel()
        onLoop.value.drainDeadline = nil
        onLoop.value.retryTimer?.cancel()
        onLoop.value.retryTimer = nil
        let waiter = onLoop.value.drained
        onLoop.value.drained = nil
        waiter?.resume()
    }
}
