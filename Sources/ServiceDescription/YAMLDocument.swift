public import JSONRPC
import Yams

/// Reads a YAML document into the gateway's ``JSONValue``, so the one
/// OpenAPI description (`openapi/openapi.yaml`) can feed other documents.
///
/// Only the JSON-compatible part of YAML is accepted: mappings with scalar
/// keys, sequences, and scalars that resolve (YAML 1.1, as PyYAML and the
/// OpenAPI tooling read them) to null, a Boolean, a number or a string.
/// Numbers keep their text, so `0.00` stays `0.00`. Aliases read as the
/// value they stand for. Anything else (merge keys, other tags, number forms
/// JSON has no text for such as `0x1F` or `.inf`) is refused rather than
/// guessed at.
public enum YAMLDocument {
    /// The document's value.
    /// - Throws: ``ServiceDescriptionError`` for text that is not YAML, or
    ///   YAML outside the JSON-compatible part.
    public static func jsonValue(ofYAML text: String) throws(ServiceDescriptionError) -> JSONValue {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw ServiceDescriptionError("the YAML does not parse: \(error)")
        }
        guard let root else { throw ServiceDescriptionError("the YAML document is empty") }
        return try value(of: root, at: "")
    }

    private static func value(of node: Node, at path: String) throws(ServiceDescriptionError) -> JSONValue {
        switch node {
        case .scalar(let scalar):
            return try value(of: scalar, at: path)
        case .sequence(let sequence):
            var elements: [JSONValue] = []
            for (index, element) in sequence.enumerated() {
                elements.append(try value(of: element, at: "\(path)/\(index)"))
            }
            return .array(elements)
        case .mapping(let mapping):
            var members: [(String, JSONValue)] = []
            for (key, element) in mapping {
                guard case .scalar(let keyScalar) = key, key.tag.rawValue != Tag.Name.merge.rawValue else {
                    throw ServiceDescriptionError("a mapping key at \(path.isEmpty ? "/" : path) is not a plain scalar")
                }
                members.append((keyScalar.string, try value(of: element, at: "\(path)/\(keyScalar.string)")))
            }
            return .object(JSONObject(members))
        case .alias:
            // Yams resolves aliases while composing; one left over is a
            // shape this reader does not know.
            throw ServiceDescriptionError("an unresolved YAML alias at \(path)")
        }
    }

    private static func value(of scalar: Node.Scalar, at path: String) throws(ServiceDescriptionError) -> JSONValue {
        switch Tag.Name(rawValue: Node.scalar(scalar).tag.rawValue) {
        case .str, .timestamp:
            return .string(scalar.string)
        case .null:
            return .null
        case .bool:
            switch scalar.string.lowercased() {
            case "true", "yes", "on": return .bool(true)
            default: return .bool(false)
            }
        case .int, .float:
            guard let number = JSONValue(numberText: scalar.string) else {
                throw ServiceDescriptionError("the number \(scalar.string) at \(path) has no JSON form")
            }
            return number
        default:
            throw ServiceDescriptionError("the scalar at \(path) has an unsupported tag")
        }
    }
}

/// Why a service description could not be made.
public struct ServiceDescriptionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, for a person.
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
