import JSONRPC

/// The method table of the examples in section 7 of the JSON-RPC 2.0
/// specification, plus `context` (echoes the transport's context) and
/// `fail` (always answers a -32602 with data), recording every call so tests
/// can see that notifications still run their method.
struct SpecMethods {
    /// Every method call, in the order the methods started.
    let recorder = CallRecorder()

    /// A server over the table; the context is a request id string.
    func server(maxBatchSize: Int = 50, limits: JSONParser.Limits = .init()) -> JSONRPCServer<String> {
        JSONRPCServer(maxBatchSize: maxBatchSize, methods: methods, limits: limits)
    }

    var methods: [String: JSONRPCMethod<String>] {
        let recorder = recorder
        return [
            "subtract": .answering { request, _ in
                recorder.record("subtract")
                switch request.params {
                case .array(let values)? where values.count == 2:
                    guard let minuend = values[0].intValue, let subtrahend = values[1].intValue else {
                        return .failure(.invalidParams("subtract takes two integers"))
                    }
                    return .success(.integer(minuend - subtrahend))
                case .object(let named)?:
                    guard let minuend = named["minuend"]?.intValue, let subtrahend = named["subtrahend"]?.intValue else {
                        return .failure(.invalidParams("subtract takes integers \"minuend\" and \"subtrahend\""))
                    }
                    return .success(.integer(minuend - subtrahend))
                default:
                    return .failure(.invalidParams("subtract takes two integers"))
                }
            },
            "sum": .answering { request, _ in
                recorder.record("sum")
                return Self.sum(request.params)
            },
            "notify_hello": .answering { _, _ in
                recorder.record("notify_hello")
                return .success("hello")
            },
            "notify_sum": .answering { request, _ in
                recorder.record("notify_sum")
                return Self.sum(request.params)
            },
            "get_data": .answering { _, _ in
                recorder.record("get_data")
                return .success(["hello", 5])
            },
            "context": .answering { _, context in
                recorder.record("context")
                return .success(.string(context))
            },
            "fail": .answering { _, _ in
                recorder.record("fail")
                return .failure(.invalidParams("always", data: ["reason": "testing", "retryable": false]))
            },
        ]
    }

    private static func sum(_ params: JSONRPCParams?) -> Result<JSONValue, JSONRPCError> {
        guard case .array(let values)? = params else {
            return .failure(.invalidParams("sum takes an array of integers"))
        }
        var total = 0
        for value in values {
            guard let term = value.intValue else {
                return .failure(.invalidParams("sum takes an array of integers"))
            }
            total += term
        }
        return .success(.integer(total))
    }
}
