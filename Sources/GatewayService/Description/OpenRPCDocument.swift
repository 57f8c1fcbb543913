import Logging
import JSONRPC
import ServiceDescription

/// `rpc.discover`: the service's OpenRPC 1.3 document, made from the
/// embedded OpenAPI description (``OpenAPIDocument``), so the two are one
/// source and cannot drift.
///
/// The document is made once, the first time it is asked for; the
/// description is fixed at build time and a test makes the same document,
/// so a failure here is a build that no test passed.
enum OpenRPCDocument {
    /// The methods the gateway registers, as the OpenRPC document describes
    /// them. The builder checks that the OpenAPI description documents
    /// exactly these.
    static let methods: [OpenRPCDescription.Method] = [
        .init(name: "products.fetch"),
        // No params, nothing upstream: only params it should not get, or a
        // fault of its own.
        .init(name: "rpc.discover", errors: .plain([-32602, -32603])),
    ]

    /// The document, or why it could not be made.
    static let document: Result<JSONValue, ServiceDescriptionError> = Result { () throws(ServiceDescriptionError) -> JSONValue in
        let openAPI = try YAMLDocument.jsonValue(ofYAML: String(decoding: OpenAPIDocument.bytes, as: UTF8.self))
        return try OpenRPCDescription.document(fromOpenAPI: openAPI, methods: methods)
    }

    /// The `rpc.discover` method for the JSON-RPC engine: answered at once
    /// (the document is made once, on the first call).
    ///
    /// It takes no params. Absent params, `[]` and `{}` all mean none
    /// (JSON-RPC has no other way for a client to say "no params" while
    /// still sending the member); anything else answers `-32602`, as any
    /// method answers params it does not take.
    static func discoverMethod() -> JSONRPCMethod<RPCCallContext> {
        .answering { request, context in
            switch request.params {
            case nil, .object([:])?, .array([])?:
                break
            case .object?, .array?:
                return .failure(.invalidParams(
                    "rpc.discover takes no params",
                    data: ["param": "params", "requestId": .string(context.requestID)]
                ))
            }
            switch document {
            case .success(let document):
                return .success(document)
            case .failure(let error):
                context.logger.error("the OpenRPC document could not be made", metadata: ["detail": "\(error.message)"])
                return .failure(.internalError("the service description is not available"))
            }
        }
    }
}
