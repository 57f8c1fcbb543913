public import EventTransport
import EvhttpTestServer
import Foundation
import JSONRPC
public import ProductsDomain
import Synchronization

/// A TLS server speaking the Onside upstream API (contract section 2) from a
/// catalog, with fault switches and per-identifier request counts, so tests
/// can assert retries and coalescing exactly. Built on the same libevent and
/// OpenSSL layer as the gateway.
public final class MockUpstream: Sendable {
    /// One request as the upstream saw it.
    public struct ReceivedRequest: Sendable {
        public let path: String
        public let identifiers: [String]
        public let country: String?
        public let headers: HTTPHeaders
    }

    private struct State {
        var faults: [MockUpstreamFault] = []
        var standingFault: MockUpstreamFault?
        var cacheControl: String?
        var rejected: Set<String> = []
        var requests: [ReceivedRequest] = []
        var countsByIdentifier: [String: Int] = [:]
        /// Answers of ``MockUpstreamFault/held`` requests, not sent yet.
        var held: [(EvhttpResponder, HTTPResponse)] = []
    }

    private let catalog: Catalog
    private let knownApps: Set<String>
    private let state = Mutex(State())
    private let group: EventLoopGroup
    private let server: EvhttpServer

    /// - Parameters:
    ///   - tls: the server certificate and key.
    ///   - knownApps: app ids that exist; others get `404`.
    public init(host: String = "127.0.0.1", port: Int = 0, tls: TLSServerContext, catalog: Catalog = .sample, knownApps: Set<String> = ["demo"]) throws {
        self.catalog = catalog
        self.knownApps = knownApps
        let group = try EventLoopGroup(count: 1, namePrefix: "mock-upstream")
        self.group = group
        let box = HandlerBox()
        self.server = EvhttpServer(
            group: group,
            configuration: EvhttpServerConfiguration(host: host, port: port, maxBodyBytes: 1 << 20, tls: tls),
            handler: { request, responder in box.handler?.handle(request, responder: responder) }
        )
        box.set(self)
    }

    /// Starts serving; returns the bound port.
    public func start() throws -> Int { try server.start() }

    /// Stops serving and its loop thread.
    public func stop() {
        server.beginDraining()
        server.stop()
        group.shutdown()
    }

    // MARK: Switches

    /// The next requests misbehave in this order, one fault each.
    public func enqueue(_ faults: MockUpstreamFault...) {
        state.withLock { $0.faults.append(contentsOf: faults) }
    }

    /// Every request misbehaves like this until cleared with `nil`.
    public func setStandingFault(_ fault: MockUpstreamFault?) {
        state.withLock { $0.standingFault = fault }
    }

    /// Every request that asks for any of these identifiers is answered
    /// `422`, as the upstream rejects a call naming an identifier it
    /// refuses, whatever else the call asks for (a queued or standing
    /// fault still comes first).
    public func setRejectedIdentifiers(_ identifiers: Set<String>) {
        state.withLock { $0.rejected = identifiers }
    }

    /// `Cache-Control` sent with every `200` (nil: none).
    public func setCacheControl(_ value: String?) {
        state.withLock { $0.cacheControl = value }
    }

    /// Sends the answers of every request held so far
    /// (``MockUpstreamFault/held``); returns how many.
    @discardableResult
    public func answerHeld() -> Int {
        let held = state.withLock { state in
            defer { state.held.removeAll() }
            return state.held
        }
        for (responder, answer) in held { responder.send(answer) }
        return held.count
    }

    /// How many requests are held (``MockUpstreamFault/held``) now.
    public var heldCount: Int { state.withLock { $0.held.count } }

    // MARK: Observations

    /// Every request received, in order.
    public var requests: [ReceivedRequest] { state.withLock { $0.requests } }

    /// How many requests asked for `identifier`.
    public func requestCount(for identifier: String) -> Int {
        state.withLock { $0.countsByIdentifier[identifier] ?? 0 }
    }

    // MARK: Serving

    fileprivate func handle(_ request: HTTPServerRequest, responder: EvhttpResponder) {
        let query = Self.query(of: request.uri)
        let identifiers = query["ids"].map { $0.split(separator: ",").map(String.init) } ?? []
        let received = ReceivedRequest(path: request.path, identifiers: identifiers, country: query["country"], headers: request.headers)
        let (fault, cacheControl) = state.withLock { state -> (MockUpstreamFault?, String?) in
            state.requests.append(received)
            for identifier in identifiers { state.countsByIdentifier[identifier, default: 0] += 1 }
            let fault = state.faults.isEmpty ? state.standingFault : state.faults.removeFirst()
            if fault == nil, identifiers.contains(where: state.rejected.contains) {
                return (.status(422), state.cacheControl)
            }
            return (fault, state.cacheControl)
        }
        switch fault {
        case .reset:
            responder.resetConnection()
        case .hang:
            responder.abandon()
        case .held:
            let answer = self.answer(request, identifiers: identifiers, country: query["country"], cacheControl: cacheControl, fault: nil)
            state.withLock { $0.held.append((responder, answer)) }
        case .rawResponse(let bytes):
            responder.sendRaw(bytes)
        case .trickle(let chunks, let interval):
            let answer = self.answer(request, identifiers: identifiers, country: query["country"], cacheControl: cacheControl, fault: nil)
            Task {
                responder.startChunked(status: answer.status, headers: answer.headers)
                let size = max(1, (answer.body.count + chunks - 1) / max(1, chunks))
                var offset = 0
                while offset < answer.body.count {
                    try? await Task.sleep(for: .milliseconds(interval))
                    let end = min(offset + size, answer.body.count)
                    let chunk = Array(answer.body[offset..<end])
                    if end == answer.body.count { responder.endChunked(lastChunk: chunk) } else { responder.sendChunk(chunk) }
                    offset = end
                }
            }
        case .oversized(let bytes, let chunked):
            var answer = self.answer(request, identifiers: identifiers, country: query["country"], cacheControl: cacheControl, fault: nil)
            answer.body = Self.padded(answer.body, to: bytes)
            if chunked {
                let body = answer.body
                responder.startChunked(status: answer.status, headers: answer.headers)
                var offset = 0
                while offset < body.count {
                    let end = min(offset + 16384, body.count)
                    let chunk = Array(body[offset..<end])
                    if end == body.count { responder.endChunked(lastChunk: chunk) } else { responder.sendChunk(chunk) }
                    offset = end
                }
            } else {
                responder.send(answer)
            }
        case .delay(let milliseconds):
            let answer = self.answer(request, identifiers: identifiers, country: query["country"], cacheControl: cacheControl, fault: nil)
            Task {
                try? await Task.sleep(for: .milliseconds(milliseconds))
                responder.send(answer)
            }
        case .slowStatus(let status, let milliseconds):
            let answer = self.answer(request, identifiers: identifiers, country: query["country"], cacheControl: cacheControl, fault: .status(status))
            Task {
                try? await Task.sleep(for: .milliseconds(milliseconds))
                responder.send(answer)
            }
        default:
            responder.send(answer(request, identifiers: identifiers, country: query["country"], cacheControl: cacheControl, fault: fault))
        }
    }

    private func answer(_ request: HTTPServerRequest, identifiers: [String], country: String?, cacheControl: String?, fault: MockUpstreamFault?) -> HTTPResponse {
        var headers: HTTPHeaders = ["Content-Type": "application/json"]
        if case .status(let status, let retryAfter) = fault {
            if let retryAfter { headers.add("Retry-After", "\(retryAfter)") }
            return HTTPResponse(status: status, headers: headers, body: Array(#"{"error":"injected fault"}"#.utf8))
        }
        let segments = request.path.split(separator: "/").map(String.init)
        guard segments.count == 4, segments[0] == "v1", segments[1] == "apps", segments[3] == "products" else {
            return HTTPResponse(status: 404, headers: headers, body: Array(#"{"error":"no such route"}"#.utf8))
        }
        guard knownApps.contains(segments[2]) else {
            return HTTPResponse(status: 404, headers: headers, body: Array(#"{"error":"app not registered"}"#.utf8))
        }
        guard let countryText = country, let country = CountryCode(countryText), !identifiers.isEmpty else {
            return HTTPResponse(status: 422, headers: headers, body: Array(#"{"error":"ids and country are required"}"#.utf8))
        }
        if fault == .invalidJSON {
            return HTTPResponse(status: 200, headers: headers, body: Array("<html>not json</html>".utf8))
        }
        let language = request.headers["Accept-Language"].flatMap { LanguageTag($0) }
        let page = catalog.page(ids: identifiers, country: country, language: language)
        var body = page.upstreamBody(country: country)
        if fault == .missingField, case .object(var object) = body, case .array(var items)? = object["items"],
           case .object(var first)? = items.first {
            first["title"] = nil
            items[0] = .object(first)
            object["items"] = .array(items)
            body = .object(object)
        }
        if case .extraItem(let id, let title) = fault, case .object(var object) = body, case .array(var items)? = object["items"] {
            items.append(.object([
                "id": .string(id), "title": .string(title), "description": .string("not asked for"),
                "price": .object(["amount": .string("1.00"), "currency": .string("EUR")]),
            ]))
            object["items"] = .array(items)
            body = .object(object)
        }
        if let cacheControl { headers.add("Cache-Control", cacheControl) }
        return HTTPResponse(status: 200, headers: headers, body: body.serialized())
    }

    /// `body` (a JSON object) grown to `size` bytes by an unknown key of spaces.
    static func padded(_ body: [UInt8], to size: Int) -> [UInt8] {
        let prefix = Array(#"{"padding":""#.utf8)
        let suffix = Array(#"","#.utf8)
        let fill = max(0, size - body.count - prefix.count - suffix.count)
        return prefix + [UInt8](repeating: UInt8(ascii: " "), count: fill) + suffix + body.dropFirst()
    }

    static func query(of uri: String) -> [String: String] {
        guard let questionMark = uri.firstIndex(of: "?") else { return [:] }
        var result: [String: String] = [:]
        for pair in uri[uri.index(after: questionMark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            result[parts[0]] = parts[1].removingPercentEncoding ?? parts[1]
        }
        return result
    }
}

/// Lets the server's handler reach the mock, which is created after it.
/// Weak: the mock owns the server, which owns the handler. Set once, on the
/// thread that makes the mock, and read on the server's loop: the lock
/// orders the two.
private final class HandlerBox: Sendable {
    private struct Weak {
        weak var handler: MockUpstream?
    }

    private let weak = Mutex(Weak())

    var handler: MockUpstream? { weak.withLock { $0.handler } }

    func set(_ handler: MockUpstream) {
        weak.withLock { $0.handler = handler }
    }
}
