import EventTransport
import GatewayMetrics
import JSONRPC
import Logging
import MemoryTier
import MonotonicTime

/// The HTTP rules of contract section 1 in front of the JSON-RPC engine:
/// routing, methods, content type, API keys, `X-Request-Id`.
final class GatewayHTTPHandler: Sendable {
    private let rpc: JSONRPCServer<RPCCallContext>
    private let authenticator: APIKeyAuthenticator
    private let readiness: ReadinessState
    private let metrics: GatewayMetrics
    private let openAPIDocument: [UInt8]
    private let logger: Logger
    /// `logger`, for the calls' contexts.
    private let callLogs: CallLogs
    /// Whether access lines are written (`info` or lower): only then does a
    /// request to `/rpc` get an access note of its own, for its trace.
    private let writesAccessLines: Bool
    /// `/rpc` requests from the moment they are accepted until their answer
    /// is handed to the loop; graceful shutdown waits for none to be left.
    let calls = InFlightCounter()
    private let batchTurns: BatchTurns
    /// `GATEWAY_REQUEST_TIMEOUT_MS`: a batch waits for its turn at most
    /// until its calls' deadline.
    private let requestTimeout: Duration
    /// Continues the caller's trace (`traceparent`, `tracestate`) or
    /// starts one, per call.
    private let tracer: Tracer

    init(rpc: JSONRPCServer<RPCCallContext>, authenticator: APIKeyAuthenticator, readiness: ReadinessState, metrics: GatewayMetrics, openAPIDocument: [UInt8], batchTurns: BatchTurns, requestTimeout: Duration = .seconds(5), tracer: Tracer = Tracer(), logger: Logger) {
        self.rpc = rpc
        self.tracer = tracer
        self.batchTurns = batchTurns
        self.requestTimeout = requestTimeout
        self.authenticator = authenticator
        self.readiness = readiness
        self.metrics = metrics
        self.openAPIDocument = openAPIDocument
        self.logger = logger
        self.callLogs = CallLogs(logger)
        self.writesAccessLines = logger.logLevel <= .info
    }

    /// Called on a loop thread; never blocks it. An `/rpc` call that
    /// cannot be answered at once is answered from a callback on the same
    /// loop, which the responder carries back.
    func handle(_ request: HTTPServerRequest, responder: consuming HTTPResponder) {
        let requestID = RequestID.accept(request.headers["X-Request-Id"]) ?? RequestID.generate()
        // Room for what an answer adds (Content-Type, or Allow), so adding
        // it does not grow the list.
        var headers = HTTPHeaders(reservingCapacity: 3)
        headers.add("X-Request-Id", requestID)

        guard let route = GatewayRoutes.all.first(where: { $0.path == request.path }) else {
            responder.send(Self.problem(404, "no route for \(request.path.prefix(100)); the API is POST /rpc", headers: headers))
            return
        }
        let isAllowed = request.method == route.method || (route.method == "GET" && request.method == "HEAD")
        guard isAllowed else {
            let allowed = route.method == "GET" ? ["GET", "HEAD"] : [route.method]
            headers.add("Allow", allowed.joined(separator: ", "))
            responder.send(Self.problem(405, "\(request.method) is not allowed on \(route.path); use \(allowed.joined(separator: " or "))", headers: headers))
            return
        }
        switch route.path {
        case "/rpc":
            handleRPC(request, requestID: requestID, headers: consume headers, responder: responder)
        case "/healthz":
            headers.add("Content-Type", "application/json")
            responder.send(HTTPResponse(status: 200, headers: headers, body: Array(#"{"status":"ok"}"#.utf8)))
        case "/readyz":
            headers.add("Content-Type", "application/json")
            let phase = readiness.phase
            let body = phase == .ready ? #"{"status":"ready"}"# : (phase == .starting ? #"{"status":"starting"}"# : #"{"status":"draining"}"#)
            responder.send(HTTPResponse(status: phase == .ready ? 200 : 503, headers: headers, body: Array(body.utf8)))
        case "/metrics":
            headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            responder.send(HTTPResponse(status: 200, headers: headers, body: metrics.exposition()))
        default:
            headers.add("Content-Type", "application/yaml")
            responder.send(HTTPResponse(status: 200, headers: headers, body: openAPIDocument))
        }
    }

    /// The admin listener (`GATEWAY_ADMIN_LISTEN`): `/healthz`, `/readyz`
    /// and `/metrics` as on the main one; every other path answers `404`.
    func handleAdmin(_ request: HTTPServerRequest, responder: consuming HTTPResponder) {
        guard GatewayRoutes.admin.contains(request.path) else {
            let requestID = RequestID.accept(request.headers["X-Request-Id"]) ?? RequestID.generate()
            responder.send(Self.problem(404, "no route for \(request.path.prefix(100)) on this address; it serves only GET /healthz, /readyz and /metrics (the API is POST /rpc on GATEWAY_LISTEN)", headers: ["X-Request-Id": requestID]))
            return
        }
        handle(request, responder: responder)
    }

    private func handleRPC(_ request: HTTPServerRequest, requestID: String, headers: consuming HTTPHeaders, responder: consuming HTTPResponder) {
        var headers = headers
        // The field is looked up only when keys are configured: a lookup
        // compares every field's name, on every call.
        let caller = authenticator.isEnabled ? authenticator.identify(request.headers["Authorization"]) : .open
        // Every request to /rpc is part of a trace, refused ones too (their
        // access line names it).
        let fields = Self.traceFields(of: request.headers)
        let trace = tracer.begin(traceparent: fields.traceparent, tracestate: fields.tracestate)
        // For the access line: which key asked (nil without keys), and the
        // trace, while access lines are written.
        let note = writesAccessLines ? AccessNote(apiKey: caller.note?.apiKey, trace: trace.span) : caller.note
        guard caller.isAuthorized else {
            headers.add("WWW-Authenticate", #"Bearer realm="products-gateway""#)
            responder.send(Self.problem(401, "missing or unknown API key; send Authorization: Bearer <key>", headers: headers, note: note))
            return
        }
        if let contentType = request.headers["Content-Type"], !Self.isJSON(contentType) {
            responder.send(Self.problem(415, "Content-Type must be application/json, got \(contentType.prefix(100))", headers: headers, note: note))
            return
        }
        let context = RPCCallContext(requestID: requestID, logs: callLogs, loop: request.loop, arrived: request.received, trace: trace)
        // A call served from memory (or refused) is answered right here, on
        // the loop; one that misses memory is answered from the callback
        // that completes it (a Redis reply, a fetch's end, its deadline), on
        // the same loop. A batch first waits for its turn, by callback too.
        // No task runs; the responder carries each answer back.
        switch rpc.start(body: request.body, context: context) {
        case .answered(let reply):
            // Handed over, not copied: adding Content-Type then needs no
            // copy of the list.
            responder.send(Self.response(reply, headers: consume headers, note: note))
        case .deferred(let call):
            calls.enter()
            let answer = responder.deferred()
            call.begin { [calls, headers] reply in
                answer.send(Self.response(reply, headers: headers, note: note))
                calls.leave()
            }
        case .batch(let batch):
            calls.enter()
            answerInTurn(batch, loop: request.loop, deadline: context.arrived + requestTimeout, answer: responder.deferred(), headers: headers, note: note)
        }
    }

    /// A batch is answered in its turn, and keeps it until its answer is
    /// made (GATEWAY_BATCH_CONCURRENCY, ``BatchTurns``). It waits as its
    /// bytes (parsed when the turn comes), in a queue of at most
    /// 4 x GATEWAY_BATCH_CONCURRENCY, until its calls' deadline at most (a
    /// timer of its loop): then it is answered without a turn, each call
    /// from memory or `cancelled`. One whose client hangs up leaves the
    /// queue at once (its connection calls back).
    private func answerInTurn(_ batch: JSONRPCServer<RPCCallContext>.PendingBatch, loop: EventLoop, deadline: MonotonicInstant, answer: HTTPDeferredResponder, headers: HTTPHeaders, note: AccessNote?) {
        let waiter = batchTurns.begin(on: loop, until: deadline) { [calls, batchTurns] wait in
            let turn: BatchTurns.Turn?
            let refusal: String
            switch wait {
            case .turn(let granted):
                turn = granted
                refusal = ""
            case .deadlinePassed:
                turn = nil
                refusal = ""
            case .queueFull:
                turn = nil
                refusal = "\(batchTurns.maxWaiting) batches are already waiting for their turn (4 x GATEWAY_BATCH_CONCURRENCY); retry in a second"
            case .left:
                // The client stopped sending while the batch waited (it
                // hung up, or shut its side): the batch left the queue
                // unanswered. A client still reading is told so, as a full
                // queue tells it.
                turn = nil
                refusal = "the connection was closed while the batch waited for its turn; it left the queue unanswered"
            }
            guard refusal.isEmpty else {
                var busy = headers
                busy.add("Retry-After", "1")
                answer.send(Self.problem(503, refusal, headers: busy, note: note))
                calls.leave()
                return
            }
            let answerBatch: @Sendable () -> Void = {
                batch.answer { reply in
                    answer.send(Self.response(reply, headers: headers, note: note))
                    // The turn ends as the answer is handed to the
                    // connection: what waits for a slow reader is bounded by
                    // the front's total of unwritten answers, not by turns.
                    turn?.end()
                    calls.leave()
                }
            }
            // From the loop's queue, not from the callback that read the
            // request: a batch's work (up to GATEWAY_MAX_BATCH calls and
            // their answer) takes turns with the sockets under the loop's
            // drain budget, so a flood of batches delays the single calls
            // read beside it by a drain, not by every batch.
            if !loop.execute(answerBatch) { answerBatch() }
        }
        guard let waiter else { return }
        answer.whenClientStops { waiter.leave() }
    }

    /// `traceparent` and `tracestate`, in one pass over the fields (every
    /// call to `/rpc` reads them), each joined when sent more than once:
    /// two `tracestate`s are one list, and two `traceparent`s make one
    /// invalid value, so the call starts a new trace, as W3C Trace Context
    /// asks.
    static func traceFields(of headers: HTTPHeaders) -> (traceparent: String?, tracestate: String?) {
        let (traceparent, tracestate) = headers.listValues("traceparent", "tracestate")
        return (traceparent, tracestate)
    }

    private static func response(_ reply: JSONRPCReply, headers: consuming HTTPHeaders, note: AccessNote?) -> HTTPResponse {
        var response: HTTPResponse
        switch reply {
        case .noContent:
            response = HTTPResponse(status: 204, headers: headers)
        case .json(let body):
            var headers = headers
            headers.add("Content-Type", "application/json")
            response = HTTPResponse(status: 200, headers: headers, body: body)
        }
        if let note { response.note = note }
        return response
    }

    /// The answer to a request the HTTP front refused while reading it:
    /// the contract's error body, naming the setting behind the limit, and
    /// the caller's `X-Request-Id` when its fields were read and it is sane,
    /// else a fresh one.
    @Sendable static func framingProblem(_ error: HTTPFramingError) -> HTTPResponse {
        let setting = switch error.status {
        case 408: " (GATEWAY_READ_TIMEOUT_MS)"
        case 413: " (GATEWAY_MAX_BODY_BYTES)"
        default: ""
        }
        let requestID = RequestID.accept(error.requestHeaders?["X-Request-Id"]) ?? RequestID.generate()
        return problem(error.status, error.message + setting, headers: ["X-Request-Id": requestID])
    }

    /// `application/json`, with or without parameters such as `charset`:
    /// the media type before any `;`, spaces and tabs around it ignored,
    /// compared without regard to ASCII case (RFC 9110 section 8.3.1).
    ///
    /// Read on every call, so it compares bytes in place rather than
    /// splitting, trimming and lowercasing new strings.
    static func isJSON(_ contentType: String) -> Bool {
        var contentType = contentType
        return contentType.withUTF8 { bytes in
            var start = bytes.startIndex
            var end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex
            while start < end, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
            while end > start, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\t") { end -= 1 }
            let expected: StaticString = "application/json"
            guard end - start == expected.utf8CodeUnitCount else { return false }
            for offset in 0..<expected.utf8CodeUnitCount {
                let sent = bytes[start + offset]
                let wanted = expected.utf8Start[offset]
                // An ASCII letter differs from its upper case by 0x20 alone.
                guard wanted == UInt8(ascii: "/") ? sent == wanted : sent | 0x20 == wanted else { return false }
            }
            return true
        }
    }

    /// A small JSON error body for HTTP-level refusals.
    static func problem(_ status: Int, _ message: String, headers: HTTPHeaders, note: AccessNote? = nil) -> HTTPResponse {
        var headers = headers
        headers.add("Content-Type", "application/json")
        let body: JSONValue = .object(["error": .object(["status": .integer(status), "message": .string(message)])])
        var response = HTTPResponse(status: status, headers: headers, body: body.serialized())
        if let note { response.note = note }
        return response
    }
}
