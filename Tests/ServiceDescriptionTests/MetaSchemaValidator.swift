import Foundation
import JSONRPC

/// Validates a document against a JSON Schema such as the OpenRPC
/// meta-schema, for the keywords that meta-schema uses on the document
/// itself: `$ref` (to `#/definitions/...`), `type`, `required`,
/// `properties`, `patternProperties`, `additionalProperties`, `items`,
/// `oneOf`, `enum`, `pattern`, `minLength`.
///
/// A `$ref` to another document (the meta-schema refers to draft-07's for
/// the schemas a document embeds) only checks that the value is an object
/// or a Boolean, as every JSON Schema is. CI validates those parts too, with
/// a full draft-07 validator.
struct MetaSchemaValidator {
    let root: JSONValue

    /// Every violation, as `path: what`.
    func violations(of value: JSONValue) -> [String] {
        var found: [String] = []
        check(value, against: root, at: "", into: &found)
        return found
    }

    private func resolve(_ schema: JSONValue) -> JSONValue? {
        guard let ref = schema.objectValue?["$ref"]?.stringValue else { return schema }
        guard ref.hasPrefix("#/") else { return nil }
        var node: JSONValue? = root
        for part in ref.dropFirst(2).split(separator: "/") {
            node = node?.objectValue?[String(part)]
        }
        return node
    }

    private func check(_ value: JSONValue, against schema: JSONValue, at path: String, into found: inout [String]) {
        if schema.objectValue?["$ref"] != nil {
            guard let target = resolve(schema) else {
                // Another document's schema: a JSON Schema is an object or a Boolean.
                switch value {
                case .object, .bool: return
                default: found.append("\(path): not a JSON Schema"); return
                }
            }
            check(value, against: target, at: path, into: &found)
            return
        }
        guard let schema = schema.objectValue else { return }

        if let types = schema["type"] {
            let allowed = types.arrayValue?.compactMap(\.stringValue) ?? [types.stringValue].compactMap(\.self)
            if !allowed.contains(where: { Self.has(value, type: $0) }) {
                found.append("\(path): expected \(allowed.joined(separator: " or ")), got \(value.serializedString.prefix(60))")
                return
            }
        }
        if let values = schema["enum"]?.arrayValue, !values.contains(value) {
            found.append("\(path): \(value) is not one of \(JSONValue.array(values))")
        }
        if case .string(let text) = value {
            if let pattern = schema["pattern"]?.stringValue,
               let regex = try? NSRegularExpression(pattern: pattern),
               regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) == nil {
                found.append("\(path): \(text) does not match \(pattern)")
            }
            if let minimum = schema["minLength"]?.intValue, text.count < minimum {
                found.append("\(path): shorter than \(minimum)")
            }
        }
        if let members = schema["oneOf"]?.arrayValue {
            let matching = members.filter { member in
                var nested: [String] = []
                check(value, against: member, at: path, into: &nested)
                return nested.isEmpty
            }
            if matching.count != 1 {
                found.append("\(path): matches \(matching.count) of the oneOf members, not 1")
            }
        }
        if case .object(let object) = value {
            for name in schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where object[name] == nil {
                found.append("\(path): missing \(name)")
            }
            let properties = schema["properties"]?.objectValue ?? [:]
            let patterns = (schema["patternProperties"]?.objectValue ?? [:]).compactMap { entry in
                (try? NSRegularExpression(pattern: entry.key)).map { ($0, entry.value) }
            }
            for (key, member) in object {
                var matched = false
                if let property = properties[key] {
                    matched = true
                    check(member, against: property, at: "\(path)/\(key)", into: &found)
                }
                for (regex, property) in patterns where regex.firstMatch(in: key, range: NSRange(key.startIndex..., in: key)) != nil {
                    matched = true
                    check(member, against: property, at: "\(path)/\(key)", into: &found)
                }
                if !matched, schema["additionalProperties"] == .bool(false) {
                    found.append("\(path): \(key) is not allowed")
                }
            }
        }
        if case .array(let elements) = value, let items = schema["items"] {
            for (index, element) in elements.enumerated() {
                check(element, against: items, at: "\(path)/\(index)", into: &found)
            }
        }
    }

    private static func has(_ value: JSONValue, type: String) -> Bool {
        switch (type, value) {
        case ("object", .object), ("array", .array), ("string", .string), ("boolean", .bool), ("null", .null), ("number", .number):
            return true
        case ("integer", .number(let text)):
            return !text.contains(".") && !text.lowercased().contains("e")
        default:
            return false
        }
    }
}
