public import JSONRPC
import CLibYAML

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
///
/// The parser is libyaml's; the tags of plain scalars are resolved here by
/// the YAML 1.1 rules (the same patterns Yams and PyYAML use).

public enum YAMLDocument {
    /// The document's value.
    /// - Throws: ``ServiceDescriptionError`` for text that is not YAML, or
    ///   YAML outside the JSON-compatible part.
    public static func jsonValue(ofYAML text: String) throws(ServiceDescriptionError) -> JSONValue {
        guard let root = try YAMLComposer.compose(text) else {
            throw ServiceDescriptionError("the YAML document is empty")
        }
        return try value(of: root, at: "")
    }

    private static func value(of node: YAMLNode, at path: String) throws(ServiceDescriptionError) -> JSONValue {
        switch node {
        case .scalar(let text, let tag):
            return try value(ofScalar: text, tag: tag, at: path)
        case .sequence(let sequence):
            var elements: [JSONValue] = []
            for (index, element) in sequence.enumerated() {
                elements.append(try value(of: element, at: "\(path)/\(index)"))
            }
            return .array(elements)
        case .mapping(let mapping):
            var members: [(String, JSONValue)] = []
            for (key, element) in mapping {
                guard case .scalar(let keyText, let keyTag) = key, keyTag != YAMLTag.merge else {
                    throw ServiceDescriptionError("a mapping key at \(path.isEmpty ? "/" : path) is not a plain scalar")
                }
                members.append((keyText, try value(of: element, at: "\(path)/\(keyText)")))
            }
            return .object(JSONObject(members))
        }
    }

    private static func value(ofScalar text: String, tag: String, at path: String) throws(ServiceDescriptionError) -> JSONValue {
        switch tag {
        case YAMLTag.str, YAMLTag.timestamp:
            return .string(text)
        case YAMLTag.null:
            return .null
        case YAMLTag.bool:
            switch text.lowercased() {
            case "true", "yes", "on": return .bool(true)
            default: return .bool(false)
            }
        case YAMLTag.int, YAMLTag.float:
            guard let number = JSONValue(numberText: text) else {
                throw ServiceDescriptionError("the number \(text) at \(path) has no JSON form")
            }
            return number
        default:
            throw ServiceDescriptionError("the scalar at \(path) has an unsupported tag")
        }
    }
}

/// A composed YAML node: aliases already replaced by what they stand for,
/// every scalar's tag resolved.
private indirect enum YAMLNode {
    case scalar(String, tag: String)
    case sequence([YAMLNode])
    case mapping([(YAMLNode, YAMLNode)])

    /// Two keys are the same when their text and tag are (duplicates are
    /// refused, as Yams and PyYAML's loaders refuse them).
    var keyIdentity: String? {
        guard case .scalar(let text, let tag) = self else { return nil }
        return tag + "\u{0}" + text
    }
}

/// The YAML 1.1 tags, and the patterns that resolve a plain scalar's tag
/// (the default resolver of Yams and of PyYAML, tried in this order; no
/// match is a string).
private enum YAMLTag {
    static let str = "tag:yaml.org,2002:str"
    static let int = "tag:yaml.org,2002:int"
    static let float = "tag:yaml.org,2002:float"
    static let bool = "tag:yaml.org,2002:bool"
    static let null = "tag:yaml.org,2002:null"
    static let merge = "tag:yaml.org,2002:merge"
    static let timestamp = "tag:yaml.org,2002:timestamp"
    static let value = "tag:yaml.org,2002:value"

    private static let patterns: [(tag: String, pattern: String)] = [
        (bool, #"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"#),
        (int, #"^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"#),
        (float, #"^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"#),
        (merge, #"^(?:<<)$"#),
        (null, #"^(?:~|null|Null|NULL|)$"#),
        (timestamp, #"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"#),
        (value, #"^(?:=)$"#),
    ]

    /// The patterns compiled, for one document's reading (a `Regex` is
    /// not `Sendable`, so each reader has its own).
    static func rules() -> [(tag: String, regex: Regex<AnyRegexOutput>)] {
        // The patterns are constants; a typo fails every test that reads YAML.
        // swiftlint:disable:next force_try
        patterns.map { (tag: $0.tag, regex: try! Regex($0.pattern)) }
    }
}

/// Turns libyaml's events into one document's ``YAMLNode`` tree.
private struct YAMLComposer: ~Copyable {
    /// One event, copied out of libyaml's buffers.
    private struct Event {
        var type: yaml_event_type_t
        var anchor: String?
        var tag: String?
        var text = ""
        var quotedImplicit = false
        var line = 0
    }

    private var parser: UnsafeMutablePointer<yaml_parser_t>
    private var anchors: [String: YAMLNode] = [:]
    private let rules = YAMLTag.rules()

    private init(parser: UnsafeMutablePointer<yaml_parser_t>) {
        self.parser = parser
    }

    /// The single document of `text`, or nil for a stream with none.
    static func compose(_ text: String) throws(ServiceDescriptionError) -> YAMLNode? {
        let bytes = Array(text.utf8)
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) == 1 else {
            throw ServiceDescriptionError("the YAML parser could not start")
        }
        defer { yaml_parser_delete(parser) }
        return try bytes.withUnsafeBufferPointer { (buffer) throws(ServiceDescriptionError) -> YAMLNode? in
            yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(parser, buffer.baseAddress, buffer.count)
            var composer = YAMLComposer(parser: parser)
            return try composer.stream()
        }
    }

    private mutating func stream() throws(ServiceDescriptionError) -> YAMLNode? {
        _ = try expect(YAML_STREAM_START_EVENT)
        let first = try next()
        if first.type == YAML_STREAM_END_EVENT { return nil }
        guard first.type == YAML_DOCUMENT_START_EVENT else { throw unexpected(first) }
        let root = try node(try next())
        _ = try expect(YAML_DOCUMENT_END_EVENT)
        let end = try next()
        guard end.type == YAML_STREAM_END_EVENT else {
            throw ServiceDescriptionError("the YAML does not parse: expected a single document in the stream, but found another document (line \(end.line))")
        }
        return root
    }

    private mutating func node(_ event: Event) throws(ServiceDescriptionError) -> YAMLNode {
        let node: YAMLNode
        switch event.type {
        case YAML_ALIAS_EVENT:
            guard let anchor = event.anchor, let target = anchors[anchor] else {
                throw ServiceDescriptionError("the YAML does not parse: found undefined alias \(event.anchor ?? "") (line \(event.line))")
            }
            return target
        case YAML_SCALAR_EVENT:
            // As Yams: a quoted scalar without a tag is a string; a plain one
            // without a tag is resolved from its text; `!` is a string.
            let tag: String
            if event.quotedImplicit {
                tag = YAMLTag.str
            } else if let explicit = event.tag {
                tag = explicit == "!" ? YAMLTag.str : explicit
            } else {
                tag = resolve(event.text)
            }
            node = .scalar(event.text, tag: tag)
        case YAML_SEQUENCE_START_EVENT:
            var elements: [YAMLNode] = []
            while true {
                let element = try next()
                if element.type == YAML_SEQUENCE_END_EVENT { break }
                elements.append(try self.node(element))
            }
            node = .sequence(elements)
        case YAML_MAPPING_START_EVENT:
            var pairs: [(YAMLNode, YAMLNode)] = []
            var keys: Set<String> = []
            while true {
                let keyEvent = try next()
                if keyEvent.type == YAML_MAPPING_END_EVENT { break }
                let key = try self.node(keyEvent)
                if let identity = key.keyIdentity, !keys.insert(identity).inserted, case .scalar(let text, _) = key {
                    throw ServiceDescriptionError("the YAML does not parse: duplicated key \(text) in a mapping (line \(keyEvent.line))")
                }
                pairs.append((key, try self.node(try next())))
            }
            node = .mapping(pairs)
        default:
            throw unexpected(event)
        }
        if let anchor = event.anchor { anchors[anchor] = node }
        return node
    }

    /// The tag of a plain scalar without an explicit one: the first rule
    /// whose pattern matches, else a string.
    private func resolve(_ text: String) -> String {
        for rule in rules where text.contains(rule.regex) {
            return rule.tag
        }
        return YAMLTag.str
    }

    private mutating func expect(_ type: yaml_event_type_t) throws(ServiceDescriptionError) -> Event {
        let event = try next()
        guard event.type == type else { throw unexpected(event) }
        return event
    }

    private func unexpected(_ event: Event) -> ServiceDescriptionError {
        ServiceDescriptionError("the YAML does not parse: unexpected event \(event.type.rawValue) (line \(event.line))")
    }

    private mutating func next() throws(ServiceDescriptionError) -> Event {
        var raw = yaml_event_t()
        guard yaml_parser_parse(parser, &raw) == 1 else {
            let problem = parser.pointee.problem.map { String(cString: $0) } ?? "unknown error"
            let mark = parser.pointee.problem_mark
            throw ServiceDescriptionError("the YAML does not parse: \(problem) (line \(mark.line + 1), column \(mark.column + 1))")
        }
        defer { yaml_event_delete(&raw) }
        var event = Event(type: raw.type, line: raw.start_mark.line + 1)
        switch raw.type {
        case YAML_ALIAS_EVENT:
            event.anchor = Self.string(raw.data.alias.anchor)
        case YAML_SCALAR_EVENT:
            event.anchor = Self.string(raw.data.scalar.anchor)
            event.tag = Self.string(raw.data.scalar.tag)
            event.text = String(decoding: UnsafeBufferPointer(start: raw.data.scalar.value, count: raw.data.scalar.length), as: UTF8.self)
            event.quotedImplicit = raw.data.scalar.quoted_implicit == 1
        case YAML_SEQUENCE_START_EVENT:
            event.anchor = Self.string(raw.data.sequence_start.anchor)
        case YAML_MAPPING_START_EVENT:
            event.anchor = Self.string(raw.data.mapping_start.anchor)
        default:
            break
        }
        return event
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
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
