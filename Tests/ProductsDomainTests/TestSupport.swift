import JSONRPC
import Testing

/// Parses JSON text written in a test; a typo in the test itself fails the test.
func json(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
    try JSONParser.parse(Array(text.utf8))
}

/// By-name params from JSON object text.
func objectParams(_ text: String) throws -> JSONRPCParams {
    guard case .object(let object) = try json(text) else {
        throw TestFailure(message: "not an object: \(text)")
    }
    return .object(object)
}

struct TestFailure: Error {
    let message: String
}
