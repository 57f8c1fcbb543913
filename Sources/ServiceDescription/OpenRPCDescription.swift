public import JSONRPC

/// Makes the service's OpenRPC 1.3 document (what `rpc.discover` answers)
/// from its OpenAPI 3.1 description, so the two can never say different
/// things: there is one source, `openapi/openapi.yaml`.
///
/// What comes from where in the OpenAPI description:
/// - `info`: its `info` (title, version, `summary` as the description,
///   license name); `servers`: its servers, with the path of the operation
///   whose `operationId` is `rpc`.
/// - One method per member of `components.schemas.RpcRequest.oneOf`: the
///   member's `method` enum is the name, its description the method's
///   description (the first paragraph is the summary), its `params` schema
///   (by name) gives one param per property, in order, with `required`.
/// - The result: the `result` of the success schema named like the request
///   schema with `Success` for `Request` (`ProductsFetchRequest` →
///   `ProductsFetchSuccess`).
/// - Errors: the members of `components.schemas.ErrorObject.oneOf`, less the
///   codes that answer a body or request rather than a method (`-32700`,
///   `-32600`, `-32601`); the specification's codes first. A member with one code gives the first line of
///   its description as the message and, as `data`, its data's required
///   members that have one fixed value (`reason`, `retryable`); each
///   optional fixed-value member adds one more entry (`-32602` with
///   `reason: regionUnresolved`). A member with several codes gives the
///   JSON-RPC 2.0 specification's messages.
/// - `components.schemas`: every schema the params and results refer to,
///   directly or not, copied as they are.
public enum OpenRPCDescription {
    /// The OpenRPC version the document follows.
    public static let openRPCVersion = "1.3.2"

    /// A method the service answers, as the builder is told about it.
    public struct Method: Sendable, Equatable {
        /// Which of the description's method-level errors a method answers.
        public enum Errors: Sendable, Equatable {
            /// Every one, variants included (`-32602` with
            /// `reason: regionUnresolved`).
            case all
            /// Only these codes, in their plain form: the variants a
            /// description marks with optional fixed data belong to the
            /// method whose params they are about.
            case plain(Set<Int>)
        }

        /// The method's name, e.g. `products.fetch`.
        public let name: String
        /// The errors it can answer.
        public let errors: Errors

        public init(name: String, errors: Errors = .all) {
            self.name = name
            self.errors = errors
        }
    }

    /// Codes that answer a body or a request object as a whole, never a
    /// particular method.
    static let envelopeCodes: Set<Int> = [-32700, -32600, -32601]

    /// The messages of the JSON-RPC 2.0 specification's own codes.
    static let standardMessages: [Int: String] = [
        -32700: "Parse error",
        -32600: "Invalid Request",
        -32601: "Method not found",
        -32602: "Invalid params",
        -32603: "Internal error",
    ]

    /// The OpenRPC document of `openAPI`.
    ///
    /// - Parameter methods: the methods the server registers. They must be
    ///   exactly those the description documents, so that neither can gain a
    ///   method the other does not know.
    /// - Throws: ``ServiceDescriptionError`` when the description lacks a
    ///   part named above, or documents other methods than `methods`.
    public static func document(fromOpenAPI openAPI: JSONValue, methods: [Method]) throws(ServiceDescriptionError) -> JSONValue {
        let source = try Source(openAPI)
        let documented = try source.requestSchemasByMethod()
        let documentedNames = documented.map { $0.method }
        guard documentedNames.sorted() == methods.map({ $0.name }).sorted() else {
            throw ServiceDescriptionError(
                "the OpenAPI description documents the methods \(documentedNames.sorted()), the server has \(methods.map({ $0.name }).sorted())"
            )
        }
        let errors = try source.methodLevelErrors()

        var methodObjects: [JSONValue] = []
        var referenced: Set<String> = []
        for method in methods {
            let requestSchema = documented.first { $0.method == method.name }!.schema
            let (object, refs) = try source.methodObject(name: method.name, requestSchema: requestSchema, errors: errors.filter { error in
                switch method.errors {
                case .all: true
                case .plain(let codes): codes.contains(error.code) && !error.isVariant
                }
            })
            methodObjects.append(object)
            referenced.formUnion(refs)
        }

        var document = JSONObject()
        document["openrpc"] = .string(openRPCVersion)
        document["info"] = try source.info()
        let servers = try source.servers()
        if !servers.isEmpty { document["servers"] = .array(servers) }
        document["methods"] = .array(methodObjects)
        document["components"] = .object(["schemas": .object(try source.schemaClosure(of: referenced))])
        return .object(document)
    }
}

/// The parts of an OpenAPI document the builder reads, with errors that
/// name what is missing.
private struct Source {
    let root: JSONObject
    let schemas: JSONObject

    static let schemaPrefix = "#/components/schemas/"

    init(_ openAPI: JSONValue) throws(ServiceDescriptionError) {
        guard let root = openAPI.objectValue else { throw ServiceDescriptionError("the OpenAPI description is not an object") }
        self.root = root
        self.schemas = try Self.object(root["components"]?.objectValue?["schemas"], "components.schemas")
    }

    static func object(_ value: JSONValue?, _ path: String) throws(ServiceDescriptionError) -> JSONObject {
        guard let object = value?.objectValue else { throw ServiceDescriptionError("\(path) is missing or not an object") }
        return object
    }

    static func string(_ value: JSONValue?, _ path: String) throws(ServiceDescriptionError) -> String {
        guard let string = value?.stringValue else { throw ServiceDescriptionError("\(path) is missing or not a string") }
        return string
    }

    func schema(_ name: String) throws(ServiceDescriptionError) -> JSONObject {
        try Self.object(schemas[name], "components.schemas.\(name)")
    }

    /// The component name a `{"$ref": "#/components/schemas/X"}` points at.
    static func referencedName(_ value: JSONValue?) -> String? {
        guard let ref = value?.objectValue?["$ref"]?.stringValue, ref.hasPrefix(schemaPrefix) else { return nil }
        return String(ref.dropFirst(schemaPrefix.count))
    }

    /// The member names of `oneOf` of the schema `name`, all references.
    func oneOfMembers(of name: String) throws(ServiceDescriptionError) -> [String] {
        guard let members = try schema(name)["oneOf"]?.arrayValue else {
            throw ServiceDescriptionError("components.schemas.\(name) has no oneOf")
        }
        var names: [String] = []
        for member in members {
            guard let name = Self.referencedName(member) else {
                throw ServiceDescriptionError("components.schemas.\(name).oneOf holds a member that is not a reference")
            }
            names.append(name)
        }
        return names
    }

    /// The single value of a fixed-value property (`enum` of one, or `const`).
    static func fixedValue(of property: JSONValue?) -> JSONValue? {
        guard let property = property?.objectValue else { return nil }
        if let constant = property["const"] { return constant }
        if let values = property["enum"]?.arrayValue, values.count == 1 { return values[0] }
        return nil
    }

    func requestSchemasByMethod() throws(ServiceDescriptionError) -> [(method: String, schema: String)] {
        var result: [(String, String)] = []
        for name in try oneOfMembers(of: "RpcRequest") {
            guard case .string(let method)? = Self.fixedValue(of: try schema(name)["properties"]?.objectValue?["method"]) else {
                throw ServiceDescriptionError("components.schemas.\(name).properties.method has no single enum value")
            }
            result.append((method, name))
        }
        return result
    }

    struct MethodError {
        let code: Int
        let object: JSONValue
        /// Whether this entry is the error with one of its optional fixed
        /// data members, rather than the error itself.
        var isVariant = false
    }

    func methodLevelErrors() throws(ServiceDescriptionError) -> [MethodError] {
        var errors: [MethodError] = []
        for name in try oneOfMembers(of: "ErrorObject") {
            let schema = try schema(name)
            let properties = try Self.object(schema["properties"], "components.schemas.\(name).properties")
            guard let codes = properties["code"]?.objectValue?["enum"]?.arrayValue?.compactMap(\.intValue), !codes.isEmpty else {
                throw ServiceDescriptionError("components.schemas.\(name).properties.code has no integer enum")
            }
            for code in codes where !OpenRPCDescription.envelopeCodes.contains(code) {
                let message: String
                if codes.count == 1 {
                    message = try Self.firstLine(of: Self.string(schema["description"], "components.schemas.\(name).description"))
                } else {
                    guard let standard = OpenRPCDescription.standardMessages[code] else {
                        throw ServiceDescriptionError("components.schemas.\(name) lists \(code) beside other codes, and it is not a JSON-RPC 2.0 standard code")
                    }
                    message = standard
                }
                let (fixed, optionalFixed) = try fixedData(of: properties["data"], in: name)
                errors.append(MethodError(code: code, object: Self.errorObject(code: code, message: message, data: fixed)))
                for (key, value) in optionalFixed {
                    var data = fixed
                    data[key] = value
                    errors.append(MethodError(code: code, object: Self.errorObject(code: code, message: message, data: data), isVariant: true))
                }
            }
        }
        // The specification's codes first, in its order (-32602 before
        // -32603), then the service's own in the description's order.
        let standard = errors.filter { OpenRPCDescription.standardMessages[$0.code] != nil }.sorted { $0.code > $1.code }
        return standard + errors.filter { OpenRPCDescription.standardMessages[$0.code] == nil }
    }

    static func errorObject(code: Int, message: String, data: JSONObject) -> JSONValue {
        var object: JSONObject = ["code": .integer(code), "message": .string(message)]
        if !data.isEmpty { object["data"] = .object(data) }
        return .object(object)
    }

    /// The data members with one fixed value: those that are always there,
    /// and those that may be.
    func fixedData(of data: JSONValue?, in name: String) throws(ServiceDescriptionError) -> (required: JSONObject, optional: JSONObject) {
        guard let data else { return ([:], [:]) }
        var dataSchema = try Self.object(data, "components.schemas.\(name).properties.data")
        if let referenced = Self.referencedName(data) { dataSchema = try schema(referenced) }
        let required = Set(dataSchema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        var always = JSONObject()
        var maybe = JSONObject()
        for (key, property) in dataSchema["properties"]?.objectValue ?? [:] {
            guard let value = Self.fixedValue(of: property) else { continue }
            if required.contains(key) { always[key] = value } else { maybe[key] = value }
        }
        return (always, maybe)
    }

    /// The first line of a description, without a closing period: a
    /// description's first line is its short form.
    static func firstLine(of text: String) -> String {
        let line = text.split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? ""
        return line.hasSuffix(".") ? String(line.dropLast()) : line
    }

    /// The first paragraph of a description, on one line.
    static func firstParagraph(of text: String) -> String {
        let paragraph = text.firstRange(of: "\n\n").map { text[..<$0.lowerBound] } ?? text[...]
        return paragraph.split(separator: "\n").joined(separator: " ")
    }

    /// A method object and the component schemas it refers to directly.
    func methodObject(name: String, requestSchema: String, errors: [MethodError]) throws(ServiceDescriptionError) -> (JSONValue, Set<String>) {
        let request = try schema(requestSchema)
        let description = try Self.string(request["description"], "components.schemas.\(requestSchema).description")
        var referenced: Set<String> = []

        var method = JSONObject()
        method["name"] = .string(name)
        method["summary"] = .string(Self.firstParagraph(of: description))
        method["description"] = .string(description.hasSuffix("\n") ? String(description.dropLast()) : description)

        var params: [JSONValue] = []
        if let paramsRef = request["properties"]?.objectValue?["params"] {
            guard let paramsName = Self.referencedName(paramsRef) else {
                throw ServiceDescriptionError("components.schemas.\(requestSchema).properties.params is not a reference")
            }
            let paramsSchema = try schema(paramsName)
            guard paramsSchema["type"] == "object" else {
                throw ServiceDescriptionError("components.schemas.\(paramsName) is not an object: only params by name are described")
            }
            method["paramStructure"] = .string("by-name")
            let required = Set(paramsSchema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            for (paramName, property) in try Self.object(paramsSchema["properties"], "components.schemas.\(paramsName).properties") {
                var schema = try Self.object(property, "components.schemas.\(paramsName).properties.\(paramName)")
                var descriptor = JSONObject()
                descriptor["name"] = .string(paramName)
                let referencedSchema = Self.referencedName(property)
                if let text = schema["description"]?.stringValue ?? referencedSchema.flatMap({ try? self.schema($0)["description"]?.stringValue }) {
                    descriptor["description"] = .string(text.hasSuffix("\n") ? String(text.dropLast()) : text)
                }
                descriptor["required"] = .bool(required.contains(paramName))
                // The description moved to the descriptor; the schema keeps the rules.
                schema["description"] = nil
                descriptor["schema"] = .object(schema)
                referenced.formUnion(Self.references(in: .object(schema)))
                params.append(.object(descriptor))
            }
        }
        method["params"] = .array(params)

        let successName = requestSchema.hasSuffix("Request") ? String(requestSchema.dropLast("Request".count)) + "Success" : requestSchema + "Success"
        guard try oneOfMembers(of: "RpcResponse").contains(successName) else {
            throw ServiceDescriptionError("components.schemas.RpcResponse has no member \(successName) for \(requestSchema)")
        }
        let resultValue = try schema(successName)["properties"]?.objectValue?["result"]
        guard let resultName = Self.referencedName(resultValue) else {
            throw ServiceDescriptionError("components.schemas.\(successName).properties.result is not a reference")
        }
        var result = JSONObject()
        result["name"] = .string(resultName)
        if let text = try schema(resultName)["description"]?.stringValue {
            result["description"] = .string(text.hasSuffix("\n") ? String(text.dropLast()) : text)
        }
        result["schema"] = ["$ref": .string(Self.schemaPrefix + resultName)]
        referenced.insert(resultName)
        method["result"] = .object(result)

        if !errors.isEmpty { method["errors"] = .array(errors.map { $0.object }) }
        return (.object(method), referenced)
    }

    /// The names of the component schemas `value` refers to, directly.
    static func references(in value: JSONValue) -> Set<String> {
        switch value {
        case .object(let object):
            var names: Set<String> = []
            for (key, member) in object {
                if key == "$ref", let ref = member.stringValue, ref.hasPrefix(schemaPrefix) {
                    names.insert(String(ref.dropFirst(schemaPrefix.count)))
                } else {
                    names.formUnion(references(in: member))
                }
            }
            return names
        case .array(let elements):
            return elements.reduce(into: Set<String>()) { $0.formUnion(references(in: $1)) }
        case .null, .bool, .number, .string, .encoded:
            // Documents read from YAML hold no pre-encoded values.
            return []
        }
    }

    /// `names` and every schema they refer to, directly or not, in the
    /// order of `components.schemas`.
    func schemaClosure(of names: Set<String>) throws(ServiceDescriptionError) -> JSONObject {
        var found: Set<String> = []
        var pending = Array(names)
        while let name = pending.popLast() {
            guard found.insert(name).inserted else { continue }
            pending.append(contentsOf: Self.references(in: .object(try schema(name))))
        }
        return JSONObject(schemas.filter { found.contains($0.key) }.map { ($0.key, $0.value) })
    }

    func info() throws(ServiceDescriptionError) -> JSONValue {
        let info = try Self.object(root["info"], "info")
        var object = JSONObject()
        object["title"] = .string(try Self.string(info["title"], "info.title"))
        if let summary = info["summary"]?.stringValue { object["description"] = .string(summary) }
        object["version"] = .string(try Self.string(info["version"], "info.version"))
        if let license = info["license"]?.objectValue?["name"]?.stringValue { object["license"] = ["name": .string(license)] }
        return .object(object)
    }

    /// The OpenAPI servers with the path of the `rpc` operation.
    func servers() throws(ServiceDescriptionError) -> [JSONValue] {
        let paths = try Self.object(root["paths"], "paths")
        guard let rpcPath = paths.first(where: { $0.value.objectValue?["post"]?.objectValue?["operationId"] == "rpc" })?.key else {
            throw ServiceDescriptionError("paths has no post operation with operationId rpc")
        }
        return (root["servers"]?.arrayValue ?? []).compactMap { server -> JSONValue? in
            guard let url = server.objectValue?["url"]?.stringValue else { return nil }
            var object: JSONObject = ["url": .string((url.hasSuffix("/") ? String(url.dropLast()) : url) + rpcPath)]
            if let description = server.objectValue?["description"]?.stringValue { object["description"] = .string(description) }
            return .object(object)
        }
    }
}
