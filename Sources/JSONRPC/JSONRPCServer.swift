import Synchronization

/// Dispatches JSON-RPC 2.0 bodies to named methods.
///
/// `Context` is whatever the transport passes per HTTP request (request id,
/// logger, deadline, ...); every method of that body receives it.
///
/// The rules are those of the JSON-RPC 2.0 specification: a body that is not
/// JSON answers -32700 with id `null`; JSON that is not a request answers
/// -32600 with the request's id when it could be read, else `null`; a batch
/// judges each element on its own, runs them concurrently and answers in
/// batch order, leaving notifications out; a body of notifications only
/// answers ``JSONRPCReply/noContent``.
public struct JSONRPCServer<Context: Sendable>: Sendable {
    /// A method: the request (already validated) and the transport's
    /// context in, a result or an error object out. Methods are called for
    /// notifications too; what they return is then dropped.
    public typealias Method = @Sendable (JSONRPCRequest, Context) async -> Result<JSONValue, JSONRPCError>

    /// Told of every request answered or run, for metrics and logs: once per
    /// request object (notifications included), once for a body that is not
    /// JSON, and once for a batch refused as a whole.
    public typealias Observer = @Sendable (JSONRPCCallRecord, Context) -> Void

    /// A method run without a task: its answer now (for `products.fetch`:
    /// every product fresh in memory), or a promise to call back once
    /// (`later`), or `nil` when the method must run as its ``Method``.
    public typealias ImmediateMethod = @Sendable (JSONRPCRequest, Context) -> JSONRPCImmediateOutcome?

    /// A method's form for the usual call, read with no JSON tree: the text
    /// of its params object (already checked as JSON) and the transport's
    /// context in. It answers as an ``ImmediateMethod`` does, or gives `nil`
    /// before doing anything, and the call then goes the tree's way, which
    /// words every refusal. So it may only answer what the tree's way would
    /// answer for the same params.
    public typealias FastMethod = @Sendable (_ params: UnsafeBufferPointer<UInt8>, _ context: Context) -> JSONRPCImmediateOutcome?

    /// What ``start(body:context:)`` could do without suspending.
    public enum Start: Sendable {
        /// The reply is ready.
        case answered(JSONRPCReply)
        /// A single call whose method answers later, by callback; `begin`
        /// gives the reply.
        case deferred(DeferredCall)
        /// A method must run as a task; `finish` gives the reply.
        case pending(PendingBody)
    }

    /// A single call whose ``ImmediateMethod`` answers later: the request
    /// is parsed and decoded once, and no task runs unless the method
    /// starts one.
    public struct DeferredCall: Sendable {
        fileprivate let server: JSONRPCServer
        fileprivate let request: JSONRPCRequest
        fileprivate let context: Context
        fileprivate let started: ContinuousClock.Instant
        fileprivate let answerLater: JSONRPCImmediateOutcome.Later

        /// Lets the method go on; `reply` is called once, on whichever
        /// thread the method answers from (possibly before this returns).
        public func begin(_ reply: @escaping @Sendable (JSONRPCReply) -> Void) {
            let server = self.server
            let request = self.request
            let context = self.context
            let started = self.started
            answerLater { outcome in
                server.observe(method: request.method, outcome: outcome, duration: ContinuousClock.now - started, isNotification: request.isNotification, id: request.id, context: context)
                guard let id = request.id else {
                    reply(.noContent)
                    return
                }
                reply(server.reply(JSONRPCResponse(id: id, outcome: outcome)))
            }
        }
    }

    /// A body whose methods must run: a single call, parsed (the parse is
    /// not repeated), or a batch, kept as its bytes until ``finish()``: a
    /// batch may wait for its turn, and while it waits it holds no more than
    /// the request it came in (a parsed tree of the same bytes can be many
    /// times larger).
    public struct PendingBody: Sendable {
        fileprivate enum Body: Sendable {
            case parsed(JSONValue)
            /// A batch of `elements` elements (1 to `maxBatchSize`), its
            /// JSON checked by a scan, not yet parsed.
            case batch(bytes: [UInt8], elements: Int)
        }

        fileprivate let server: JSONRPCServer
        fileprivate let body: Body
        fileprivate let context: Context

        /// Whether the body is a batch (an array): its answer can be
        /// `maxBatchSize` results, where a single call's is one.
        public var isBatch: Bool {
            switch body {
            case .batch: true
            case .parsed(.array): true
            case .parsed: false
            }
        }

        /// The batch's element count, counted without parsing it.
        public var batchSize: Int? {
            if case .batch(_, let elements) = body { return elements }
            return nil
        }

        public func finish() async -> JSONRPCReply {
            switch body {
            case .parsed(let document):
                return await server.handle(document: document, context: context)
            case .batch(let bytes, _):
                do {
                    return await server.handle(document: try JSONParser.parse(bytes, limits: server.limits), context: context)
                } catch {
                    return server.refuse(.parseError(error.message), context: context)
                }
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
    private let methods: [String: Method]
    private let immediateMethods: [String: ImmediateMethod]
    private let fastMethods: [String: FastMethod]
    private let observer: Observer?
    /// The context of each batch element, made from the request's.
    private let elementContext: (@Sendable (Context) -> Context)?

    /// A server answering `methods` by name.
    ///
    /// - Precondition: `maxBatchSize` is at least 1 (configuration checks
    ///   its value before a server is built).
    /// - Parameter immediateMethods: for some of `methods`, a way to answer
    ///   without suspending when it can (see ``start(body:context:)``).
    /// - Parameter fastMethods: for some of `methods`, a way to answer the
    ///   usual single call without building its JSON tree (see
    ///   ``FastMethod``).
    /// - Parameter maxAnswerBytes: the most bytes one reply may have (see
    ///   ``maxAnswerBytes``).
    /// - Parameter elementContext: the context each element of a batch
    ///   runs with, made from the request's (the gateway gives each its
    ///   own span); nil: the request's.
    public init(maxBatchSize: Int, methods: [String: Method], immediateMethods: [String: ImmediateMethod] = [:], fastMethods: [String: FastMethod] = [:], limits: JSONParser.Limits = .init(), maxAnswerBytes: Int = .max, observer: Observer? = nil, elementContext: (@Sendable (Context) -> Context)? = nil) {
        self.elementContext = elementContext
        precondition(maxBatchSize >= 1, "maxBatchSize must be at least 1")
        self.maxBatchSize = maxBatchSize
        self.maxAnswerBytes = maxAnswerBytes
        self.methods = methods
        self.immediateMethods = immediateMethods
        self.fastMethods = fastMethods
        self.limits = limits
        self.observer = observer
    }

    /// The reply to one HTTP body.
    public func handle(body: [UInt8], context: Context) async -> JSONRPCReply {
        switch start(body: body, context: context) {
        case .answered(let reply): reply
        case .deferred(let call): await withCheckedContinuation { continuation in call.begin { continuation.resume(returning: $0) } }
        case .pending(let pending): await pending.finish()
        }
    }

    /// Parses a body and answers it at once when no method needs to
    /// suspend: a body that is not JSON or not a request, an unknown method,
    /// or a single call whose ``ImmediateMethod`` answers. A single call
    /// whose immediate method answers later is returned as a
    /// ``DeferredCall``. Anything else (batches, calls of methods without an
    /// immediate form) is returned to be finished in a task, with its parse
    /// kept. The answer is the same every way; the immediate and deferred
    /// ones cost no task and no trip through the executor unless the method
    /// itself needs one.
    public func start(body: [UInt8], context: Context) -> Start {
        if !fastMethods.isEmpty, let fast = startFast(body: body, context: context) { return fast }
        // A batch is counted with a scan, not parsed: too many elements are
        // refused now, before any wait; the rest waits as its bytes.
        if let elements = Self.batchElementCount(body, limits: limits), elements > 0 {
            guard elements <= maxBatchSize else {
                return .answered(refuse(.invalidRequest("batch of \(elements) requests exceeds the limit of \(maxBatchSize)"), context: context))
            }
            return .pending(PendingBody(server: self, body: .batch(bytes: body, elements: elements), context: context))
        }
        let document: JSONValue
        do {
            document = try JSONParser.parse(body, limits: limits)
        } catch {
            return .answered(refuse(.parseError(error.message), context: context))
        }
        guard case .object = document else {
            if case .array = document { return .pending(PendingBody(server: self, body: .parsed(document), context: context)) }
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
        let outcome: Result<JSONValue, JSONRPCError>
        let started = ContinuousClock.now
        if !hasMethod(request.method) {
            outcome = .failure(.methodNotFound(request.method))
        } else if let immediate = immediateMethods[request.method], let answer = immediate(request, context) {
            switch answer {
            case .answer(let now):
                outcome = now
            case .later(let answerLater):
                return .deferred(DeferredCall(server: self, request: request, context: context, started: started, answerLater: answerLater))
            }
        } else {
            return .pending(PendingBody(server: self, body: .parsed(document), context: context))
        }
        observe(method: request.method, outcome: outcome, duration: ContinuousClock.now - started, isNotification: request.isNotification, id: request.id, context: context)
        guard let id = request.id else { return .answered(.noContent) }
        return .answered(reply(JSONRPCResponse(id: id, outcome: outcome)))
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

    /// The usual single call of a method with a ``FastMethod``, read from
    /// the body's bytes with no tree (``JSONRPCEnvelope``); `nil` when the
    /// body is anything else or the method gives up. The answer, the reply
    /// and the observer's record are those of the tree's way.
    private func startFast(body: [UInt8], context: Context) -> Start? {
        body.withUnsafeBufferPointer { input -> Start? in
            guard let envelope = JSONRPCEnvelope.scan(input, limits: limits),
                  let fast = fastMethods[envelope.method], hasMethod(envelope.method) else { return nil }
            let started = ContinuousClock.now
            guard let answer = fast(UnsafeBufferPointer(rebasing: input[envelope.params]), context) else { return nil }
            let request = JSONRPCRequest(id: envelope.id, method: envelope.method)
            switch answer {
            case .answer(let outcome):
                observe(method: request.method, outcome: outcome, duration: ContinuousClock.now - started, isNotification: false, id: request.id, context: context)
                return .answered(reply(JSONRPCResponse(id: envelope.id, outcome: outcome)))
            case .later(let answerLater):
                return .deferred(DeferredCall(server: self, request: request, context: context, started: started, answerLater: answerLater))
            }
        }
    }

    /// The reply to a parsed body.
    private func handle(document: JSONValue, context: Context) async -> JSONRPCReply {
        switch document {
        case .object:
            guard let response = await respond(to: document, context: context) else {
                return .noContent
            }
            return reply(response)
        case .array(let elements):
            guard !elements.isEmpty else {
                return refuse(.invalidRequest("the batch is empty"), context: context)
            }
            guard elements.count <= maxBatchSize else {
                let error = JSONRPCError.invalidRequest(
                    "batch of \(elements.count) requests exceeds the limit of \(maxBatchSize)"
                )
                return refuse(error, context: context)
            }
            let responses = await respond(toBatch: elements, context: context)
            guard !responses.isEmpty else {
                return .noContent
            }
            return bounded(Self.serialized(batch: responses), id: .null)
        case .null, .bool, .number, .string, .encoded:
            return refuse(.invalidRequest("expected a request object or a batch array"), context: context)
        }
    }

    /// The response to one request object (a body or one batch element), or
    /// `nil` for a notification.
    ///
    /// Exposed so that a transport or a test can drive single elements; the
    /// method runs in the calling task.
    public func respond(to element: JSONValue, context: Context) async -> JSONRPCResponse? {
        switch Self.decode(element) {
        case .failure(let failed):
            observe(method: nil, outcome: .failure(failed.error), duration: .zero, isNotification: false, id: failed.id, context: context)
            return JSONRPCResponse(id: failed.id ?? .null, outcome: .failure(failed.error))
        case .success(let request):
            return await call(request, context: context)
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

    /// Whether `name` is a method of this server, in either form.
    private func hasMethod(_ name: String) -> Bool {
        methods[name] != nil || immediateMethods[name] != nil
    }

    /// Runs a valid request; `nil` for a notification. A method with an
    /// immediate form runs as that (its `later` answer awaited here, the
    /// one continuation between callbacks and a task); others as their
    /// ``Method``.
    private func call(_ request: JSONRPCRequest, context: Context) async -> JSONRPCResponse? {
        let started = ContinuousClock.now
        let outcome: Result<JSONValue, JSONRPCError>
        switch immediateMethods[request.method]?(request, context) {
        case .answer(let now)?:
            outcome = now
        case .later(let answerLater)?:
            outcome = await withCheckedContinuation { continuation in answerLater { continuation.resume(returning: $0) } }
        case nil:
            if let method = methods[request.method] {
                outcome = await method(request, context)
            } else {
                outcome = .failure(.methodNotFound(request.method))
            }
        }
        return finished(request, outcome, started: started, context: context)
    }

    /// Observes a call's outcome and makes its response (nil for a
    /// notification).
    private func finished(_ request: JSONRPCRequest, _ outcome: Result<JSONValue, JSONRPCError>, started: ContinuousClock.Instant, context: Context) -> JSONRPCResponse? {
        observe(method: request.method, outcome: outcome, duration: ContinuousClock.now - started, isNotification: request.isNotification, id: request.id, context: context)
        guard let id = request.id else { return nil }
        return JSONRPCResponse(id: id, outcome: outcome)
    }

    /// Answers a batch: invalid elements at once, valid ones concurrently,
    /// everything back in batch order without the notifications.
    ///
    /// Elements whose method has an immediate form run by callback, all
    /// started at once, with no task each; the batch waits for their
    /// answers in one continuation. Other methods run in a task group.
    private func respond(toBatch elements: [JSONValue], context: Context) async -> [JSONRPCResponse] {
        let answers = BatchAnswers(count: elements.count)
        var tasked: [(Int, JSONRPCRequest, Context)] = []
        for (index, element) in elements.enumerated() {
            // Each element is a call of its own (its own span, in the
            // gateway's context).
            let context = elementContext?(context) ?? context
            switch Self.decode(element) {
            case .failure(let failed):
                observe(method: nil, outcome: .failure(failed.error), duration: .zero, isNotification: false, id: failed.id, context: context)
                answers.set(index, JSONRPCResponse(id: failed.id ?? .null, outcome: .failure(failed.error)))
            case .success(let request):
                let started = ContinuousClock.now
                switch immediateMethods[request.method]?(request, context) {
                case .answer(let now)?:
                    answers.set(index, finished(request, now, started: started, context: context))
                case .later(let answerLater)?:
                    answers.expect()
                    answerLater { [self] outcome in
                        answers.arrived(index, finished(request, outcome, started: started, context: context))
                    }
                case nil:
                    tasked.append((index, request, context))
                }
            }
        }
        if !tasked.isEmpty {
            await withTaskGroup(of: (Int, JSONRPCResponse?).self) { group in
                for (index, request, context) in tasked {
                    group.addTask { (index, await call(request, context: context)) }
                }
                for await (index, response) in group { answers.set(index, response) }
            }
        }
        return await answers.all()
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

/// What an immediate method (``JSONRPCServer/ImmediateMethod``) did.
public enum JSONRPCImmediateOutcome: Sendable {
    /// Begins the rest of the method; calls `answer` exactly once, from any
    /// thread, possibly before returning.
    public typealias Later = @Sendable (_ answer: @escaping @Sendable (Result<JSONValue, JSONRPCError>) -> Void) -> Void

    /// The outcome, without waiting.
    case answer(Result<JSONValue, JSONRPCError>)
    /// The outcome comes later, by callback: for a call that waits on I/O
    /// its own loop can finish (a Redis lookup) without a task.
    case later(Later)
}

/// A batch's answers as they arrive, from callbacks on any thread, and the
/// one wait for the last of them.
private final class BatchAnswers: Sendable {
    private struct State {
        var slots: [JSONRPCResponse?]
        /// Callbacks still to come.
        var outstanding = 0
        var waiter: CheckedContinuation<[JSONRPCResponse], Never>?
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(slots: [JSONRPCResponse?](repeating: nil, count: count)))
    }

    /// An answer known before the wait.
    func set(_ index: Int, _ response: JSONRPCResponse?) {
        state.withLock { $0.slots[index] = response }
    }

    /// One more answer will come by callback (``arrived(_:_:)``).
    func expect() {
        state.withLock { $0.outstanding += 1 }
    }

    /// An answer by callback; the last one ends the wait.
    func arrived(_ index: Int, _ response: JSONRPCResponse?) {
        let done: (CheckedContinuation<[JSONRPCResponse], Never>, [JSONRPCResponse])? = state.withLock { state in
            state.slots[index] = response
            state.outstanding -= 1
            guard state.outstanding == 0, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return (waiter, state.slots.compactMap(\.self))
        }
        if let (waiter, responses) = done { waiter.resume(returning: responses) }
    }

    /// Every answer in batch order, notifications left out, once all came.
    func all() async -> [JSONRPCResponse] {
        await withCheckedContinuation { continuation in
            let ready: [JSONRPCResponse]? = state.withLock { state in
                guard state.outstanding > 0 else { return state.slots.compactMap(\.self) }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
