import EventTransport
import JSONRPC
import Logging

/// The HTTP rules of contract section 1 in front of the JSON-RPC engine:
/// routing, methods, content type, API keys, `X-Request-Id`.
final class GatewayHTTPHandler: Sendable {
    private let rpc: JSONRPCServer<RPCCallContext>
    private let authenticator: APIKeyAuthenticator
    private let readiness: ReadinessState
    private let metrics: GatewayMetrics
    private let openAPIDocument: [UInt8]
    private let maxBodyBytes: Int
    private let logger: Logger
    /// `/rpc` requests from the moment they are accepted until their answer
    /// is handed to the loop; graceful shutdown waits for none to be left.
    let calls = InFlightCounter()

    init(rpc: JSONRPCServer<RPCCallContext>, authenticator: APIKeyAuthenticator, readiness: ReadinessState, metrics: GatewayMetrics, openAPIDocument: [UInt8], maxBodyBytes: Int, logger: Logger) {
        self.rpc = rpc
        self.authenticator = authenticator
        self.readiness = readiness
        self.metrics = metrics
        self.openAPIDocument = openAPIDocument
        self.maxBodyBytes = maxBodyBytes
        self.logger = logger
    }

    /// The body size the HTTP layer itself enforces for a gateway limit of
    /// `maxBodyBytes`. Bodies between the two are read and answered with the
    /// JSON `413` above; larger ones are cut off by libevent while reading
    /// (its own `413` page, then the connection closes), so memory stays
    /// bounded either way.
    static func transportBodyLimit(for maxBodyBytes: Int) -> Int {
        max(maxBodyBytes * 2, maxBodyBytes + 16384)
    }

    /// Called on a loop thread; never blocks it. `/rpc` work moves to a task,
    /// whose answer the responder carries back to the loop.
    func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        let requestID = RequestID.accept(request.headers["X-Request-Id"]) ?? RequestID.generate()
        var headers: HTTPHeaders = ["X-Request-Id": requestID]

        // The transport reads bodies up to twice this limit (see
        // `transportBodyLimit`) so that the refusal is this documented one.
        guard request.body.count <= maxBodyBytes else {
            headers.add("Connection", "close")
            responder.send(Self.problem(413, "the request body is larger than \(maxBodyBytes) bytes (GATEWAY_MAX_BODY_BYTES)", headers: headers))
            return
        }
        guard let route = GatewayRoutes.all.first(where: { $0.path == request.path }) else {
            responder.send(Self.problem(404, "no route for \(request.path.prefix(100)); the API is POST /rpc", headers: headers))
            return
        }
        let allowed = route.method == "GET" ? ["GET", "HEAD"] : [route.method]
        guard allowed.contains(request.method) else {
            headers.add("Allow", allowed.joined(separator: ", "))
            responder.send(Self.problem(405, "\(request.method) is not allowed on \(route.path); use \(allowed.joined(separator: " or "))", headers: headers))
            return
        }
        switch route.path {
        case "/rpc":
            handleRPC(request, requestID: requestID, headers: headers, responder: responder)
        case "/healthz":
            headers.add("Content-Type", "application/json")
            responder.send(HTTPResponse(status: 200, headers: headers, body: Array(#"{"status":"ok"}"#.utf8)))
        case "/readyz":
            headers.add("Content-Type", "application/json")
            let phase = readiness.phase
            let body = phase == .ready ? #"{"status":"ready"}"# : (phase == .starting ? #"{"status":"starting"}"# : #"{"status":"draining"}"#)
            responder.send(HTTPResponse(status: phase == .ready ? 200 : 503, headers: headers, body: Array(body.utf8)))
        case "/metrics":
            headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            responder.send(HTTPResponse(status: 200, headers: headers, body: metrics.exposition()))
        default:
            headers.add("Content-Type", "application/yaml")
            responder.send(HTTPResponse(status: 200, headers: headers, body: openAPIDocument))
        }
    }

    private func handleRPC(_ request: HTTPServerRequest, requestID: String, headers: HTTPHeaders, responder: HTTPResponder) {
        var headers = headers
        guard authenticator.isAuthorized(request.headers["Authorization"]) else {
            headers.add("WWW-Authenticate", #"Bearer realm="products-gateway""#)
            responder.send(Self.problem(401, "missing or unknown API key; send Authorization: Bearer <key>", headers: headers))
            return
        }
        if let contentType = request.headers["Content-Type"], !Self.isJSON(contentType) {
            responder.send(Self.problem(415, "Content-Type must be application/json, got \(contentType.prefix(100))", headers: headers))
            return
        }
        var callLogger = logger
        callLogger[metadataKey: "requestId"] = "\(requestID)"
        let context = RPCCallContext(requestID: requestID, logger: callLogger)
        calls.enter()
        // On the loop that accepted the request: parsing, the cache and the
        // answer of a call served from memory never leave this thread.
        Task(executorPreference: request.loop) { [self] in
            let reply = await rpc.handle(body: request.body, context: context)
            switch reply {
            case .noContent:
                responder.send(HTTPResponse(status: 204, headers: headers))
            case .json(let body):
                headers.add("Content-Type", "application/json")
                responder.send(HTTPResponse(status: 200, headers: headers, body: body))
            }
            calls.leave()
        }
    }

    /// `application/json`, with or without parameters such as `charset`.
    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return String(mediaType).trimmingSpaces.lowercased() == "application/json"
    }

    /// A small JSON error body for HTTP-level refusals.
    static func problem(_ status: Int, _ message: String, headers: HTTPHeaders) -> HTTPResponse {
        var headers = headers
        headers.add("Content-Type", "application/json")
        let body: JSONValue = .object(["error": .object(["status": .integer(status), "message": .string(message)])])
        return HTTPResponse(status: status, headers: headers, body: body.serialized())
    }
}
