import Foundation
import JSONRPC
import ServiceDescription

/// Files of the project and its test fixtures, found from this file's
/// place in the package.
enum Fixtures {
    /// The package root (where `Package.swift` is).
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `openapi/openapi.yaml`, the one source.
    static func openAPIText() throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent("openapi/openapi.yaml"), encoding: .utf8)
    }

    static func openAPI() throws -> JSONValue {
        try YAMLDocument.jsonValue(ofYAML: openAPIText())
    }

    /// The OpenRPC document as the gateway makes it.
    static func openRPC() throws -> JSONValue {
        try OpenRPCDescription.document(fromOpenAPI: openAPI(), methods: [
            .init(name: "products.fetch"),
            .init(name: "rpc.discover", errors: .plain([-32602, -32603])),
        ])
    }

    /// The OpenRPC meta-schema (`Tests/Fixtures/openrpc/meta-schema.json`, a
    /// copy kept in the repository with its licence), or the file named by
    /// `OPENRPC_META_SCHEMA`.
    static func metaSchema() throws -> JSONValue {
        let path = ProcessInfo.processInfo.environment["OPENRPC_META_SCHEMA"]
            ?? packageRoot.appendingPathComponent("Tests/Fixtures/openrpc/meta-schema.json").path
        return try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
    }
}

extension JSONValue {
    subscript(key: String) -> JSONValue? { objectValue?[key] }
    subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, index < array.count else { return nil }
        return array[index]
    }
}
