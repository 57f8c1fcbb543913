import MonotonicTime
import Synchronization

/// Dispatches JSON-RPC 2.0 bodies to named methods.
///
/// `Context` is whatever the transport passes per HTTP request (request id,
/// logger, deadline, ...); every method of that body receives it.
///
/// The rules are those of the JSON-RPC 2.0 specification: a body that is not
/// JSON answers -32700 with id `null`; JSON that is not a request answers
/// -32600 with the request's id when it could be read, else `null`; a batch
/// judges each element on its own, starts them all at once and answers in
/// batch order, leaving notifications out; a body of notifications only
/// answers ``JSONRPCReply/noContent``.
///
/// Every method has one shape (``JSONRPCMethod``): it answers now, or later
/// by callback. So the engine runs no task and never suspends: a body is
/// answered at once, or by the callback of its one deferred call, or (a
/// batch) by the callback of its last element.
public struct JSONRPCServer<Context: Sendable>: Sendable {
    /// Told of every request answered or run, for metrics and logs: once per
    /// request object (notifications included), once for a body that is not
    /// JSON, and once for a batch refused as a whole.
    public typealias Observer = @Sendable (JSONRPCCallRecord, Context) -> Void

    /// What ``start(body:context:)`` made of a body.
    public enum Start: Sendable {
        /// The reply is ready.
        case answered(JSONRPCReply)
        /// A single call whose method answers later, by callback; `begin`
        /// gives the reply.
        case deferred(DeferredCall)
        /// A batch, checked and counted but not yet run (it may wait for
        /// its turn first); `answer` runs it and gives the reply.
        case batch(PendingBatch)
    }

    /// A single call whose method answers later: the request is parsed and
    /// decoded once, and the method goes on when ``begin(_:)`` is called.
    public struct DeferredCall: Sendable {
        fileprivate let server: JSONRPCServer
        fileprivate let request: JSONRPCRequest
        fileprivate let context: Context
        fileprivate let started: MonotonicInstant
        fileprivate let answerLater: JSONRPCMethodOutcome.Later

        /// Lets the method go on; `reply` is called once, on whichever
        /// thread the method answers from (possibly before this returns).
        public func begin(_ reply: @escaping @Sendable (JSONRPCReply) -> Void) {
            let server = self.server
            let request = self.request
            let context = self.context
            let started = self.started
            answerLater { outcome in
                server.observe(method: request.method, outcome: outcome, duration: MonotonicInstant.now - started, isNotification: request.isNotification, id: request.id, context: context)
                guard let id = request.id else {
                    reply(.noContent)
                    return
                }
                reply(server.reply(JSONRPCResponse(id: id, outcome: outcome)))
            }
        }
    }

    /// A batch of 1 to ``maxBatchSize`` elements, kept as its bytes until
    /// ``answer(_:)``: a batch may wait for its turn, and while it waits it
    /// holds no more than the request it came in (a parsed tree of the same
    /// bytes can be many times larger).
    public struct PendingBatch: Sendable {
        fileprivate enum Body: Sendable {
            /// Parsed already (a body the scan did not count).
            case parsed([JSONValue])
            /// A batch of `elements` elements, its JSON checked by a scan,
            /// not yet parsed.
            case bytes([UInt8], elements: Int)
        }

        fileprivate let server: JSONRPCServer
        fileprivate let body: Body
        fileprivate let context: Context

        /// The batch's element count.
        public var elementCount: Int {
            switch body {
            case .parsed(let elements): elements.count
            case .bytes(_, let elements): elements
            }
        }

        /// Parses the batch and starts every element; `reply` is called
        /// once, when the last element has answered: at once when every
        /// method answered now, else on the thread of the last callback.
        public func answer(_ reply: @escaping @Sendable (JSONRPCReply) -> Void) {
            switch body {
            case .parsed(let elements):
                server.answer(batch: elements, context: context, reply)
            case .bytes(let bytes, _):
                let document: JSONValue
                do {
                    document = try JSONParser.parse(bytes, limits: server.limits)
                } catch {
                    reply(server.refuse(.parseError(error.message), context: context))
                    return
                }
                guard case .array(let elements) = document else {
                    // Not reached: the scan read an array.
                    reply(server.refuse(.invalidRequest("expected a request object or a batch array"), context: context))
                    return
                }
                server.answer(batch: elements, context: context, reply)
            }
        }
    }

    /// The most elements a batch may hold.
    public let maxBatchSize: Int
    /// The most bytes one reply may have. A larger reply is not sent: one
    /// `-32600` error object whose message gives the limit takes its place
    /// (with the call's id, or `null` for a batch), as a batch over
    /// ``maxBatchSize`` is refused. An answer is held in memory until a
    /// client has read it, so this bounds what one request can make the
    /// process hold for a client that reads slowly or not at all.
    public let maxAnswerBytes: Int
    /// The parser's limits for a body.
    public let limits: JSONParser.Limits
    private let methods: [String: JSONRPCMethod<Context>]
    /// Whether any method has a pre-parse form.
    private let hasFastMethods: Bool
    private let observer: Observer?
    /// The context of each batch element, made from the request's.
    private let elementContext: (@Sendable (Context) -> Context)?

    /// A server answering `methods` by name.
    ///
    /// - Precondition: `maxBatchSize` is at least 1 (configuration checks
    ///   its value before a server is built).
    /// - Parameter maxAnswerBytes: the most bytes one reply may have (see
    ///   ``maxAnswerBytes``).
    /// - Parameter elementContext: the context each element of a batch
    ///   runs with, made from the request's (the gateway gives each its
    ///   own span); nil: the request's.
    public init(maxBatchSize: Int, methods: [String: JSONRPCMethod<Context>], limits: JSONParser.Limits = .init(), maxAnswerBytes: Int = .max, observer: Observer? = nil, elementContext: (@Sendable (Context) -> Context)? = nil) {
        precondition(maxBatchSize >= 1, "maxBatchSize must be at least 1")
        self.elementContext = elementContext
        self.maxBatchSize = maxBatchSize
        self.maxAnswerBytes = maxAnswerBytes
        self.methods = methods
        self.hasFastMethods = methods.values.contains { $0.fast != nil }
        self.limits = limits
        self.observer = observer
    }

    /// Answers one HTTP body: `reply` is called once, before this returns
    /// when no method answers later, else from the last callback.
    public func handle(body: [UInt8], context: Context, _ reply: @escaping @Sendable (JSONRPCReply) -> Void) {
        switch start(body: body, context: context) {
        case .answered(let answer): reply(answer)
        case .deferred(let call): call.begin(reply)
        case .batch(let batch): batch.answer(reply)
        }
    }

    /// Reads a body and answers what it can without waiting: a body that
    /// is not JSON or not a request, an unknown method, or a single call
    /// whose method answers now. A single call whose method answers later
    /// is returned as a ``DeferredCall``; a batch, counted (one over
    /// ``maxBatchSize`` is refused here) but not run, as a
    /// ``PendingBatch``, so that the transport can make it wait for a turn.
    public func start(body: [UInt8], context: Context) -> Start {
        if hasFastMethods, let fast = startFast(body: body, context: context) { return fast }
        // A batch is counted with a scan, not parsed: too many elements are
        // refused now, before any wait; the rest waits as its bytes.
        if let elements = Self.batchElementCount(body, limits: limits), elements > 0 {
            guard elements <= maxBatchSize else {
                return .answered(refuse(.invalidRequest("batch of \(elements) requests exceeds the limit of \(maxBatchSize)"), context: context))
            }
            return .batch(PendingBatch(server: self, body: .bytes(body, elements: elements), context: context))
        }
        let document: JSONValue
        do {
            document = try JSONParser.parse(body, limits: limits)
        } catch {
            return .answered(refuse(.parseError(error.message), context: context))
        }
        switch document {
        case .object:
            break
        case .array(let elements):
            if let refusal = refusal(ofBatchOf: elements.count) { return .answered(refuse(refusal, context: context)) }
            return .batch(PendingBatch(server: self, body: .parsed(elements), context: context))
        case .null, .bool, .number, .string, .encoded:
            return .answered(refuse(.invalidRequest("expected a request object or a batch array"), context: context))
        }
        let request: JSONRPCRequest
        switch Self.decode(document) {
        case .failure(let failed):
            observe(method: nil, outcome: .failure(failed.error), duration: .zero, isNotification: false, id: failed.id, context: context)
            return .answered(reply(JSONRPCResponse(id: failed.id ?? .null, outcome: .failure(failed.error))))
        case .success(let decoded):
            request = decoded
        }
        let started = MonotonicInstant.now
        switch run(request, context: context) {
        case .answer(let outcome):
            observe(method: request.method, outcome: outcome, duration: MonotonicInstant.now - started, isNotification: request.isNotification, id: request.id, context: context)
            guard let id = request.id else { return .answered(.noContent) }
            return .answered(reply(JSONRPCResponse(id: id, outcome: outcome)))
        case .later(let answerLater):
            return .deferred(DeferredCall(server: self, request: request, context: context, started: started, answerLater: answerLater))
        }
    }

    /// The number of elements of a body that is one JSON array and nothing
    /// else (whitespace aside), checked by a scan within `limits` (depth)
    /// that builds nothing; nil for any other body, or one the scan refuses
    /// (the parser then words the refusal).
    static func batchElementCount(_ body: [UInt8], limits: JSONParser.Limits) -> Int? {
        guard let first = body.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }), first == UInt8(ascii: "["),
              limits.maxDepth <= 64 else { return nil }
        return body.withUnsafeBufferPointer { input -> Int? in
            var scanner = JSONScanner(input, limits: limits)
            do {
                try scanner.beginArray()
                var count = 0
                while try scanner.nextElement() {
                    try scanner.skipValue()
                    count += 1
                }
                try scanner.end()
                return count
            } catch {
                return nil
            }
        }
    }

    /// The usual single call of a method with a pre-parse form, read from
    /// the body's bytes with no tree (``JSONRPCEnvelope``); `nil` when the
    /// body is anything else or the method gives up. The answer, the reply
    /// and the observer's record are those of the tree's way.
    private func startFast(body: [UInt8], context: Context) -> Start? {
        body.withUnsafeBufferPointer { input -> Start? in
            guard let envelope = JSONRPCEnvelope.scan(input, limits: limits),
                  let fast = methods[envelope.method]?.fast else { return nil }
            let started = MonotonicInstant.now
            guard let answer = fast(UnsafeBufferPointer(rebasing: input[envelope.params]), context) else { return nil }
            let request = JSONRPCRequest(id: envelope.id, method: envelope.method)
            switch answer {
            case .answer(let outcome):
                observe(method: request.method, outcome: outcome, duration: MonotonicInstant.now - started, isNotification: false, id: request.id, context: context)
                return .answered(reply(JSONRPCResponse(id: envelope.id, outcome: outcome)))
            case .later(let answerLater):
                return .deferred(DeferredCall(server: self, request: request, context: context, started: started, answerLater: answerLater))
            }
        }
    }

    /// Why a batch of `count` elements is refused as a whole, if it is.
    private func refusal(ofBatchOf count: Int) -> JSONRPCError? {
        if count == 0 { return .invalidRequest("the batch is empty") }
        if count > maxBatchSize { return .invalidRequest("batch of \(count) requests exceeds the limit of \(maxBatchSize)") }
        return nil
    }

    /// Answers a batch: invalid elements and methods that answer now at
    /// once, in batch order; then the methods that answer later are let go
    /// on, all of them, and the reply is made when the last has called
    /// back. Notifications are left out of it.
    fileprivate func answer(batch elements: [JSONValue], context: Context, _ reply: @escaping @Sendable (JSONRPCReply) -> Void) {
        if let refusal = refusal(ofBatchOf: elements.count) {
            reply(refuse(refusal, context: context))
            return
        }
        var slots = [JSONRPCResponse?](repeating: nil, count: elements.count)
        var later: [(index: Int, request: JSONRPCRequest, context: Context, started: MonotonicInstant, answer: JSONRPCMethodOutcome.Later)] = []
        for (index, element) in elements.enumerated() {
            // Each element is a call of its own (its own span, in the
            // gateway's context).
            let context = elementContext?(context) ?? context
            switch Self.decode(element) {
            case .failure(let failed):
                observe(method: nil, outcome: .failure(failed.error), duration: .zero, isNotification: false, id: failed.id, context: context)
                slots[index] = JSONRPCResponse(id: failed.id ?? .null, outcome: .failure(failed.error))
            case .success(let request):
                let started = MonotonicInstant.now
                switch run(request, context: context) {
                case .answer(let outcome):
                    slots[index] = finished(request, outcome, started: started, context: context)
                case .later(let answerLater):
                    later.append((index, request, context, started, answerLater))
                }
            }
        }
        let server = self
        let made: @Sendable ([JSONRPCResponse]) -> Void = { responses in
            guard !responses.isEmpty else {
                reply(.noContent)
                return
            }
            reply(server.bounded(Self.serialized(batch: responses), id: .null))
        }
        guard !later.isEmpty else {
            made(slots.compactMap(\.self))
            return
        }
        let answers = BatchAnswers(slots: slots, outstanding: later.count, whenAll: made)
        for element in later {
            element.answer { outcome in
                answers.arrived(element.index, server.finished(element.request, outcome, started: element.started, context: element.context))
            }
        }
    }

    /// The response to one request object (a body or one batch element),
    /// `nil` for a notification: `response` is called once, at once when
    /// the method answers now, else from its callback.
    ///
    /// Exposed so that a transport or a test can drive single elements.
    public func respond(to element: JSONValue, context: Context, _ response: @escaping @Sendable (JSONRPCResponse?) -> Void) {
        switch Self.decode(element) {
        case .failure(let failed):
            observe(method: nil, outcome: .failure(failed.error), duration: .zero, isNotification: false, id: failed.id, context: context)
            response(JSONRPCResponse(id: failed.id ?? .null, outcome: .failure(failed.error)))
        case .success(let request):
            let started = MonotonicInstant.now
            switch run(request, context: context) {
            case .answer(let outcome):
                response(finished(request, outcome, started: started, context: context))
            case .later(let answerLater):
                let server = self
                answerLater { outcome in response(server.finished(request, outcome, started: started, context: context)) }
            }
        }
    }

    /// Validates one request object (a body or one batch element).
    ///
    /// The id is read first so that every later complaint can be answered
    /// under it; an id of the wrong type is itself the complaint, answered
    /// under `null`. Members other than the four of the specification are
    /// ignored, as the specification does not forbid them.
    public static func decode(_ value: JSONValue) -> Result<JSONRPCRequest, JSONRPCFailedRequest> {
        guard case .object(let object) = value else {
            return .failure(JSONRPCFailedRequest(id: nil, error: .invalidRequest("expected a request object")))
        }

        var id: JSONRPCID?
        if let idValue = object["id"] {
            guard let readable = JSONRPCID(jsonValue: idValue) else {
                return .failure(JSONRPCFailedRequest(
                    id: nil,
                    error: .invalidRequest(#""id" must be a string, a number or null"#)
                ))
            }
            id = readable
        }

        guard object["jsonrpc"] == .string("2.0") else {
            return .failure(JSONRPCFailedRequest(id: id, error: .invalidRequest(#""jsonrpc" must be exactly "2.0""#)))
        }
        guard case .string(let method)? = object["method"] else {
            return .failure(JSONRPCFailedRequest(id: id, error: .invalidRequest(#""method" must be a string"#)))
        }
        let params: JSONRPCParams?
        switch object["params"] {
        case nil:
            params = nil
        case .object(let named)?:
            params = .object(named)
        case .array(let positional)?:
            params = .array(positional)
        case .null?, .bool?, .number?, .string?, .encoded?:
            return .failure(JSONRPCFailedRequest(
                id: id,
                error: .invalidRequest(#""params" must be an object or an array"#)
            ))
        }
        return .success(JSONRPCRequest(id: id, method: method, params: params))
    }

    // MARK: - Internals

    /// Calls the method `request` names; an unknown one answers -32601.
    private func run(_ request: JSONRPCRequest, context: Context) -> JSONRPCMethodOutcome {
        guard let method = methods[request.method] else { return .answer(.failure(.methodNotFound(request.method))) }
        return method.call(request, context)
    }

    /// Observes a call's outcome and makes its response (nil for a
    /// notification).
    private func finished(_ request: JSONRPCRequest, _ outcome: Result<JSONValue, JSONRPCError>, started: MonotonicInstant, context: Context) -> JSONRPCResponse? {
        observe(method: request.method, outcome: outcome, duration: MonotonicInstant.now - started, isNotification: request.isNotification, id: request.id, context: context)
        guard let id = request.id else { return nil }
        return JSONRPCResponse(id: id, outcome: outcome)
    }

    /// One error object for the whole body, with id `null`.
    fileprivate func refuse(_ error: JSONRPCError, context: Context) -> JSONRPCReply {
        observe(method: nil, outcome: .failure(error), duration: .zero, isNotification: false, context: context)
        return reply(JSONRPCResponse(id: .null, outcome: .failure(error)))
    }

    private func observe(method: String?, outcome: Result<JSONValue, JSONRPCError>, duration: Duration, isNotification: Bool, id: JSONRPCID? = nil, context: Context) {
        observer?(JSONRPCCallRecord(method: method, outcome: outcome, duration: duration, isNotification: isNotification, id: id), context)
    }

    /// Responses are written straight into one buffer, not built as a tree
    /// first: a result that is already encoded is appended as its bytes.
    fileprivate func reply(_ response: JSONRPCResponse) -> JSONRPCReply {
        bounded(response.serialized(), id: response.id)
    }

    /// `bytes` as the reply, unless they are over ``maxAnswerBytes``: then
    /// one `-32600` error object with `id` that gives the limit, so the
    /// caller learns to ask for less in one request.
    private func bounded(_ bytes: [UInt8], id: JSONRPCID) -> JSONRPCReply {
        guard bytes.count > maxAnswerBytes else { return .json(bytes) }
        let error = JSONRPCError.invalidRequest(
            "the answer would be \(bytes.count) bytes, over the limit of \(maxAnswerBytes); ask for fewer identifiers, or send fewer requests in one batch"
        )
        return .json(JSONRPCResponse(id: id, outcome: .failure(error)).serialized())
    }

    /// `[response,...]` in one buffer reserved for all of them.
    private static func serialized(batch responses: [JSONRPCResponse]) -> [UInt8] {
        var capacity = 2
        for response in responses { capacity += response.estimatedByteCount + 1 }
        var writer = JSONWriter(reservingCapacity: capacity)
        writer.beginArray()
        for response in responses { response.write(to: &writer) }
        writer.endArray()
        return writer.takeBytes()
    }
}

/// The answers of a batch's elements that answer by callback, from any
/// thread, and the one call made when the last of them has come.
private final class BatchAnswers: Sendable {
    private struct State {
        var slots: [JSONRPCResponse?]
        /// Callbacks still to come.
        var outstanding: Int
        var whenAll: (@Sendable ([JSONRPCResponse]) -> Void)?
    }

    private let state: Mutex<State>

    /// `slots` holds the answers known already; `outstanding` more come
    /// by ``arrived(_:_:)``, and the last calls `whenAll` with every answer
    /// in batch order, notifications left out.
    init(slots: [JSONRPCResponse?], outstanding: Int, whenAll: @escaping @Sendable ([JSONRPCResponse]) -> Void) {
        state = Mutex(State(slots: slots, outstanding: outstanding, whenAll: whenAll))
    }

    /// An answer by callback; the last one makes the batch's reply.
    func arrived(_ index: Int, _ response: JSONRPCResponse?) {
        let done: (@Sendable ([JSONRPCResponse]) -> Void, [JSONRPCResponse])? = state.withLock { state in
            state.slots[index] = response
            state.outstanding -= 1
            guard state.outstanding == 0, let whenAll = state.whenAll else { return nil }
            state.whenAll = nil
            return (whenAll, state.slots.compactMap(\.self))
        }
        if let (whenAll, responses) = done { whenAll(responses) }
    }
}
