public import EventTransport
import GatewayMetrics
public import Logging
import MemoryTier
public import MonotonicTime
import SharedTier
import Tracing

/// What every JSON-RPC call of one HTTP request shares.
public struct RPCCallContext: Sendable {
    /// The `X-Request-Id`, sent upstream and put in `error.data.requestId`.
    public let requestID: String
    /// When the HTTP request was handed to the engine: its calls' deadlines
    /// count from here (a batch may wait for its turn first).
    public let arrived: MonotonicInstant
    /// The loop of the HTTP request: every call of it runs there, its
    /// callbacks and timers come back there, and its answer is written
    /// from there. It carries the loop's context (`loop.context`), where
    /// each component keeps its part for this loop (the Redis connection,
    /// the turn's batches, the merge buffer, the upstream pool).
    public let loop: EventLoop
    /// The call's trace: the caller's continued or a new one, the call's
    /// own span, whether it is sampled and recorded.
    public let trace: CallTrace
    private let logs: CallLogs

    /// A logger with `requestId`, `traceId` and `spanId` metadata; made
    /// when asked for, since most calls log nothing of their own (a
    /// metadata dictionary per call cost more than a cache lookup), and
    /// the ids are written as hex only then.
    public var logger: Logger {
        var logger = logs.logger
        logger[metadataKey: "requestId"] = "\(requestID)"
        logger[metadataKey: "traceId"] = .string(trace.span.traceID.hex)
        logger[metadataKey: "spanId"] = .string(trace.span.spanID.hex)
        return logger
    }

    /// The level below which `logger` writes nothing; cheap to ask.
    public var logLevel: Logger.Level { logs.level }

    /// A context for the calls of one HTTP request; public so that a
    /// benchmark or a test can drive the engine in process.
    public init(requestID: String, logger: Logger, loop: EventLoop, arrived: MonotonicInstant = .now, trace: CallTrace? = nil) {
        self.init(requestID: requestID, logs: CallLogs(logger), loop: loop, arrived: arrived, trace: trace ?? .unrecordedRoot())
    }

    /// A context whose logger is `logs`', made once for every call of a
    /// front (the gateway's way).
    init(requestID: String, logs: CallLogs, loop: EventLoop, arrived: MonotonicInstant, trace: CallTrace) {
        self.loop = loop
        self.trace = trace
        self.requestID = requestID
        self.arrived = arrived
        self.logs = logs
    }

    /// This context for one element of a batch: the same request, a span
    /// of its own (each JSON-RPC call has one).
    public func forBatchElement() -> RPCCallContext {
        RPCCallContext(requestID: requestID, logs: logs, loop: loop, arrived: arrived, trace: trace.sibling())
    }
}

/// The logger every call of a front starts from, held once: a context
/// then carries one reference to it, not a `Logger` (an existential
/// handler and a label), so making, copying and dropping a context per
/// call costs one reference count for it.
final class CallLogs: Sendable {
    let logger: Logger
    /// `logger`'s level, read on every call.
    let level: Logger.Level

    init(_ logger: Logger) {
        self.logger = logger
        self.level = logger.logLevel
    }
}
