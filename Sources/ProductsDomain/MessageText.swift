import JSONRPC

/// Wording for error messages that echo what a caller, the upstream or a catalog file sent.
enum MessageText {
    /// Longest caller text echoed back, in characters; longer text is cut and marked with `…`.
    static let maxEchoed = 64

    /// `text` cut to `maxEchoed` characters, so a huge value cannot bloat an error or a log line.
    static func truncated(_ text: String) -> String {
        guard text.count > maxEchoed else { return text }
        return String(text.prefix(maxEchoed)) + "…"
    }

    /// `text` truncated and in double quotes, with `"` and `\` escaped so the value's end is unambiguous.
    static func quoted(_ text: String) -> String {
        var escaped = ""
        for character in truncated(text) {
            switch character {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            default: escaped.append(character)
            }
        }
        return "\"" + escaped + "\""
    }

    /// The JSON type of `value` with its article ("a number", "null"), for "…, not <kind>" phrases.
    static func kind(of value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        case .encoded: "a value"
        }
    }
}
