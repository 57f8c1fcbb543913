import JSONRPC
import Synchronization

/// ``JSONRPCServer`` over a trivial method table, driven synchronously
/// from libFuzzer's thread, and checked against ``ExpectedAnswer``.
///
/// Methods answer in both of the engine's ways: at once, or later by
/// callback (`echo.later`, `fail.later`: their callbacks are held and called
/// once the engine has started the whole body, last first, so a batch's
/// answers arrive out of its order).
enum FuzzEngine {
    /// The methods the server knows; any other name is -32601.
    enum Method: String, CaseIterable {
        /// Answers the params (or `null`) as a tree, at once.
        case echo
        /// Answers the params (or `null`) as encoded bytes, at once.
        case echoEncoded = "echo.encoded"
        /// Answers ``FuzzEngine/failCode`` with the params as data, at once.
        case fail
        /// Answers as `echo`, later.
        case echoLater = "echo.later"
        /// Answers as `fail`, later.
        case failLater = "fail.later"
    }

    /// The code `fail` answers, in the server range.
    static let failCode = -32000

    /// Small, so that the fuzzer reaches the batch limit.
    static let maxBatchSize = 8

    /// Records seen by the observer during the current input.
    private static let observed = Atomic<Int>(0)

    /// The callbacks of the methods that answer later, for the current
    /// input, in the order the methods were called.
    private static let held = Mutex<[@Sendable () -> Void]>([])

    /// An answer given later: held until ``answer(_:)`` calls it back.
    private static func later(_ outcome: Result<JSONValue, JSONRPCError>) -> JSONRPCMethodOutcome {
        .later { answer in held.withLock { $0.append { answer(outcome) } } }
    }

    private static func failure(_ request: JSONRPCRequest) -> Result<JSONValue, JSONRPCError> {
        .failure(JSONRPCError(code: failCode, message: "failed", data: request.params?.jsonValue))
    }

    private static let server = JSONRPCServer<Void>(
        maxBatchSize: maxBatchSize,
        methods: [
            // `echo` and `echo.later` also have a pre-parse form, so the
            // envelope read from bytes meets every input too, answering now
            // and later; it must answer what the tree's way answers.
            Method.echo.rawValue: JSONRPCMethod(
                { request, _ in .answer(.success(request.params?.jsonValue ?? .null)) },
                fast: { params, _ in (try? JSONParser.parse(Array(params))).map { .answer(.success($0)) } }
            ),
            Method.echoEncoded.rawValue: .answering { request, _ in .success(.encoded(EncodedJSON(request.params?.jsonValue ?? .null))) },
            Method.fail.rawValue: .answering { request, _ in failure(request) },
            Method.echoLater.rawValue: JSONRPCMethod(
                { request, _ in later(.success(request.params?.jsonValue ?? .null)) },
                fast: { params, _ in (try? JSONParser.parse(Array(params))).map { later(.success($0)) } }
            ),
            Method.failLater.rawValue: JSONRPCMethod { request, _ in later(failure(request)) },
        ],
        observer: { _, _ in observed.add(1, ordering: .relaxed) }
    )

    /// Answers `body` and checks the answer against the specification;
    /// `document` is the parsed body, `nil` when it is not JSON.
    static func check(body: [UInt8], document: JSONValue?) {
        observed.store(0, ordering: .relaxed)
        let reply = answer(body)
        let expected = ExpectedAnswer(document: document, maxBatchSize: maxBatchSize)

        let answered: ExpectedAnswer
        switch reply {
        case .noContent:
            answered = .noContent
        case .json(let bytes):
            // A response nests two levels above what it echoes.
            let limits = JSONParser.Limits(maxDepth: JSONParser.Limits().maxDepth + 2)
            let value: JSONValue
            do {
                value = try JSONParser.parse(bytes, limits: limits)
            } catch {
                fail("the answer is not JSON (\(error)): \(FuzzCase.shown(bytes))")
            }
            switch value {
            case .array(let elements):
                let responses = elements.compactMap(ExpectedResponse.init(answered:))
                require(!responses.isEmpty && responses.count == elements.count, "a batch answer that is not all responses: \(FuzzCase.shown(bytes))")
                answered = .batch(responses)
            default:
                guard let response = ExpectedResponse(answered: value) else {
                    fail("an answer that is not a response: \(FuzzCase.shown(bytes))")
                }
                answered = .single(response)
            }
        }
        require(answered == expected, "answered \(answered), expected \(expected)")

        // The observer hears of every element of a batch it runs, else once.
        let records = observed.load(ordering: .relaxed)
        let expectedRecords: Int
        if case .array(let elements)? = document, !elements.isEmpty, elements.count <= maxBatchSize {
            expectedRecords = elements.count
        } else {
            expectedRecords = 1
        }
        require(records == expectedRecords, "the observer heard \(records) records, expected \(expectedRecords)")

        // A response written with the token calls is its tree, byte for byte.
        if case .object = document, case .success(let request) = JSONRPCServer<Void>.decode(document!) {
            for outcome: Result<JSONValue, JSONRPCError> in [
                .success(request.params?.jsonValue ?? .null),
                .failure(JSONRPCError(code: failCode, message: request.method, data: request.params?.jsonValue)),
            ] {
                let response = JSONRPCResponse(id: request.id ?? .null, outcome: outcome)
                require(response.serialized() == response.jsonValue.serialized(), "a response's writer and tree differ")
            }
        }
    }

    /// Runs the server on `body` on this thread and returns its reply:
    /// the engine starts the body, then the held callbacks of the methods
    /// that answer later are called, last first. The reply must come once,
    /// and only after the last of them.
    private static func answer(_ body: [UInt8]) -> JSONRPCReply {
        let slot = ReplySlot()
        held.withLock { $0.removeAll() }
        server.handle(body: body, context: ()) { reply in
            slot.replies.withLock { $0.append(reply) }
        }
        while let next = held.withLock({ $0.popLast() }) {
            require(slot.replies.withLock { $0.isEmpty }, "the reply came before every method had answered")
            next()
        }
        let replies = slot.replies.withLock { $0 }
        require(replies.count == 1, "\(replies.count) replies to one body")
        return replies[0]
    }

    /// Where the server's callback leaves its reply.
    private final class ReplySlot: Sendable {
        let replies = Mutex<[JSONRPCReply]>([])
    }
}
