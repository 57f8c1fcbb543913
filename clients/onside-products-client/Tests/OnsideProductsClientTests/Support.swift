import Foundation
import HTTPTypes
import OnsideProductsClient
import OpenAPIRuntime
import OpenAPIURLSession
import Yams

/// The live gateways the round trip talks to, started by `.ci/clients` on
/// the embedded catalog: `GATEWAY_URL` open, `GATEWAY_KEYED_URL` with the
/// API key `GATEWAY_API_KEY` configured.
enum Live {
    struct Missing: Error, CustomStringConvertible {
        let variable: String
        var description: String { "\(variable) is not set: run `bash .ci/clients` from the repository root, which starts the gateways" }
    }

    static func setting(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { throw Missing(variable: name) }
        return value
    }

    static func gatewayURL() throws -> URL { URL(string: try setting("GATEWAY_URL"))! }
    static func keyedGatewayURL() throws -> URL { URL(string: try setting("GATEWAY_KEYED_URL"))! }

    /// A generated client of the open gateway; `rewrite` changes requests on
    /// their way out, for answers the generated types would never ask for.
    static func client(_ rewrite: RequestRewrite? = nil, url: URL? = nil) throws -> Client {
        Client(
            serverURL: try url ?? gatewayURL(),
            transport: URLSessionTransport(),
            middlewares: rewrite.map { [$0] } ?? []
        )
    }
}

/// Changes a request the generated client is about to send: its method, its
/// `Content-Type`, its body. How the tests reach the answers to requests
/// that break the HTTP or JSON-RPC rules, which the generated types cannot
/// express; the answers still go through the generated decoding.
struct RequestRewrite: ClientMiddleware {
    var method: HTTPRequest.Method?
    var contentType: String?
    var body: String?
    var headers: [(HTTPField.Name, String)] = []

    func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        var body = body
        if let method {
            request.method = method
            if method == .get {
                body = nil
                request.headerFields[.contentLength] = nil
            }
        }
        if let contentType { request.headerFields[.contentType] = contentType }
        if let replacement = self.body {
            body = HTTPBody(replacement)
            request.headerFields[.contentLength] = String(replacement.utf8.count)
        }
        for (name, value) in headers { request.headerFields[name] = value }
        return try await next(request, body, baseURL)
    }
}

/// The examples of `openapi/openapi.yaml`, as JSON.
enum Examples {
    // nonisolated(unsafe): written once (a lazy static), only read after.
    nonisolated(unsafe) static let document: [String: Any] = {
        let file = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/OnsideProductsClient/openapi.yaml")
        let text = try! String(contentsOf: file, encoding: .utf8)
        return try! Yams.load(yaml: text) as! [String: Any]
    }()

    static func operation(_ path: String, _ method: String) -> [String: Any] {
        let paths = document["paths"] as! [String: Any]
        return (paths[path] as! [String: Any])[method] as! [String: Any]
    }

    /// Named examples of `POST /rpc`'s request body.
    static var requests: [String: Any] {
        let body = operation("/rpc", "post")["requestBody"] as! [String: Any]
        return named(in: body)
    }

    /// Named examples of an answer of an operation.
    static func responses(_ path: String = "/rpc", _ method: String = "post", status: String) -> [String: Any] {
        let responses = operation(path, method)["responses"] as! [String: Any]
        return named(in: responses[status] as! [String: Any])
    }

    /// The single `example` of an answer.
    static func response(_ path: String = "/rpc", _ method: String = "post", status: String) -> Any {
        let responses = operation(path, method)["responses"] as! [String: Any]
        let content = (responses[status] as! [String: Any])["content"] as! [String: Any]
        return (content["application/json"] as! [String: Any])["example"]!
    }

    private static func named(in holder: [String: Any]) -> [String: Any] {
        let content = holder["content"] as! [String: Any]
        let examples = (content["application/json"] as! [String: Any])["examples"] as! [String: Any]
        return examples.mapValues { ($0 as! [String: Any])["value"]! }
    }

    static func json(_ value: Any) -> Data {
        try! JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys])
    }

    /// A documented example decoded into a generated type.
    static func decode<T: Decodable>(_ type: T.Type, _ value: Any) throws -> T {
        try JSONDecoder().decode(type, from: json(value))
    }

    /// `value` encoded, read back as plain JSON for comparison with an example.
    static func plainJSON<T: Encodable>(_ value: T) throws -> NSObject {
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(value), options: .fragmentsAllowed) as! NSObject
    }
}

/// The request id the documented error examples carry: sent as
/// `X-Request-Id`, it makes the live answers equal to the examples.
let exampleRequestID = "5f0e3c9a1b2d4e6f8a7b9c0d1e2f3a4b"
