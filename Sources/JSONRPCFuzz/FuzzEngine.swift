import JSONRPC
import Synchronization

/// ``JSONRPCServer`` over a trivial method table, driven synchronously
/// from libFuzzer's thread, and checked against ``ExpectedAnswer``.
enum FuzzEngine {
    /// The methods the server knows; any other name is -32601.
    enum Method: String, CaseIterable {
        /// Answers the params (or `null`) as a tree.
        case echo
        /// Answers the params (or `null`) as encoded bytes.
        case echoEncoded = "echo.encoded"
        /// Answers ``FuzzEngine/failCode`` with the params as data.
        case fail
    }

    /// The code `fail` answers, in the server range.
    static let failCode = -32000

    /// Small, so that the fuzzer reaches the batch limit.
    static let maxBatchSize = 8

    /// Records seen by the observer during the current input.
    private static let observed = Atomic<Int>(0)

    private static let server = JSONRPCServer<Void>(
        maxBatchSize: maxBatchSize,
        methods: [
            Method.echo.rawValue: { request, _ in .success(request.params?.jsonValue ?? .null) },
            Method.echoEncoded.rawValue: { request, _ in .success(.encoded(EncodedJSON(request.params?.jsonValue ?? .null))) },
            Method.fail.rawValue: { request, _ in
                .failure(JSONRPCError(code: failCode, message: "failed", data: request.params?.jsonValue))
            },
        ],
        // `echo` also has a fast form, so the envelope read from bytes meets
        // every input too; it must answer what the tree's way answers.
        fastMethods: [
            Method.echo.rawValue: { params, _ in
                (try? JSONParser.parse(Array(params))).map { .answer(.success($0)) }
            },
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

    /// Runs the server on `body` on this thread and returns its reply.
    ///
    /// The server's task and its batch's child tasks prefer ``executor``,
    /// whose jobs run here: no thread hop per input (libFuzzer's speed)
    /// and the same order of jobs every time (its reproducibility).
    private static func answer(_ body: [UInt8]) -> JSONRPCReply {
        let slot = ReplySlot()
        Task(executorPreference: executor) {
            let reply = await server.handle(body: body, context: ())
            slot.reply.withLock { $0 = reply }
        }
        // The methods never wait for anything but their child tasks, so
        // the jobs run out exactly when the reply is there.
        executor.runUntilIdle()
        guard let reply = slot.reply.withLock({ $0 }) else { fail("the server's jobs ran out without a reply") }
        return reply
    }

    private static let executor = InlineExecutor()

    /// Where the server task leaves its reply.
    private final class ReplySlot: Sendable {
        let reply = Mutex<JSONRPCReply?>(nil)
    }
}
