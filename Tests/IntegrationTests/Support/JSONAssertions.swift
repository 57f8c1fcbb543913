import Foundation
import JSONRPC

/// Parses a response body with the gateway's own parser (which keeps number
/// text), for exact comparisons.
func parseJSON(_ bytes: [UInt8]) throws -> JSONValue {
    try JSONParser.parse(bytes)
}

extension JSONValue {
    /// `value["a"]["b"]`-style access for tests.
    subscript(key: String) -> JSONValue? { objectValue?[key] }
    subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, index < array.count else { return nil }
        return array[index]
    }
}
