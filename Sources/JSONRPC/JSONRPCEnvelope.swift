/// The envelope of one ordinary request read straight from a body's bytes:
/// an object with exactly `jsonrpc` (`"2.0"`), an `id` that is a string or
/// a number, a string `method` and object `params`, each once, in any
/// order, and nothing after it.
///
/// Anything else (a batch, a notification, a `null` id, a repeated or
/// unknown member, params that are not an object, malformed JSON) is not
/// read here: ``scan(_:limits:)`` returns `nil`, and the engine parses the
/// body as a tree, which decides and words every refusal. So whatever this
/// reads, the tree would have read the same.
struct JSONRPCEnvelope {
    let id: JSONRPCID
    let method: String
    /// Where the params object's text lies in the body.
    let params: Range<Int>

    private static let names: [StaticString] = ["jsonrpc", "id", "method", "params"]

    static func scan(_ input: UnsafeBufferPointer<UInt8>, limits: JSONParser.Limits) -> JSONRPCEnvelope? {
        var scanner = JSONScanner(input, limits: limits)
        do {
            try scanner.beginObject()
            var hasVersion = false
            var id: JSONRPCID?
            var method: String?
            var params: Range<Int>?
            while let name = try scanner.nextMember() {
                switch scanner.index(of: name, in: names) {
                case 0:
                    guard !hasVersion, try scanner.peek() == .string else { return nil }
                    guard scanner.text(of: try scanner.string()) == "2.0" else { return nil }
                    hasVersion = true
                case 1:
                    guard id == nil else { return nil }
                    switch try scanner.peek() {
                    case .string:
                        id = .string(scanner.text(of: try scanner.string()))
                    case .number:
                        // As the parser keeps a number: its exact text.
                        let start = scanner.valueStart()
                        try scanner.skipValue()
                        id = .number(String(decoding: UnsafeBufferPointer(rebasing: input[start ..< scanner.offset]), as: UTF8.self))
                    default:
                        return nil
                    }
                case 2:
                    guard method == nil, try scanner.peek() == .string else { return nil }
                    method = scanner.text(of: try scanner.string())
                case 3:
                    guard params == nil, try scanner.peek() == .object else { return nil }
                    let start = scanner.valueStart()
                    try scanner.skipValue()
                    params = start ..< scanner.offset
                default:
                    return nil
                }
            }
            try scanner.end()
            guard hasVersion, let id, let method, let params else { return nil }
            return JSONRPCEnvelope(id: id, method: method, params: params)
        } catch {
            return nil
        }
    }
}
