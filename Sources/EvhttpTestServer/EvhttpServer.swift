public import EventTransport
import CGatewayShims
import CLibevent
public import HTTPFraming
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import Dispatch
import Synchronization

/// Handles one request. Called on the loop thread that accepted it; it must
/// not block, and it answers exactly once through the responder, from any
/// thread.
/// The `Content-Type` of an answer that sets none. libevent keeps the
/// pointer, not a copy, so it must outlive every server: a Swift string
/// passed in place would be a temporary, freed when the call returns (seen
/// under AddressSanitizer, with an answer that had no Content-Type).
/// Written once, never freed, only read.
nonisolated(unsafe) private let defaultContentType: UnsafeMutablePointer<CChar> = strdup("application/json")!

public typealias EvhttpRequestHandler = @Sendable (HTTPServerRequest, EvhttpResponder) -> Void

/// An evhttp server over TLS, spread over every loop of a group: each loop
/// has its own `evhttp` and its own `SO_REUSEPORT` listener on the same port.
///
/// It serves the TLS test upstream (``MockUpstream``), whose faults
/// (trickled chunks, resets, hangs) evhttp makes easy. Its framing is
/// evhttp's, which is lax; the gateway's own front is ``HTTPServer``.
public final class EvhttpServer: Sendable {
    private let group: EventLoopGroup
    private let configuration: EvhttpServerConfiguration
    private let handler: EvhttpRequestHandler
    private let instances = Mutex<[LoopBound<LoopEvhttpServer>]>([])
    private let draining = Atomic<Bool>(false)

    public init(group: EventLoopGroup, configuration: EvhttpServerConfiguration, handler: @escaping EvhttpRequestHandler) {
        self.group = group
        self.configuration = configuration
        self.handler = handler
    }

    /// Binds and starts serving on every loop; returns the bound port (the
    /// real one when the configuration asked for port 0). Call from a thread
    /// that is not one of the group's loops.
    public func start() throws(TransportError) -> Int {
        let (port, fds) = try ListeningSockets.open(host: configuration.host, port: configuration.port, count: group.loops.count)
        var started: [LoopBound<LoopEvhttpServer>] = []
        var failure: TransportError?
        for (loop, fd) in zip(group.loops, fds) {
            let instance = LoopBound(sending: LoopEvhttpServer(loop: loop, configuration: configuration, handler: handler, draining: self), loop: loop)
            let result: Result<Void, TransportError> = loop.submitAndWait {
                Result { () throws(TransportError) in try instance.value.start(listening: fd) }
            }
            if case .failure(let error) = result { failure = error; close(fd) } else { started.append(instance) }
        }
        instances.withLock { $0 = started }
        if let failure {
            stop()
            throw failure
        }
        return port
    }

    /// True once ``beginDraining()`` was called.
    public var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// Stops taking new connections (the listeners close) and marks every
    /// later response `Connection: close`, so keep-alive clients move on.
    /// Requests in flight still get their answers.
    public func beginDraining() {
        draining.store(true, ordering: .relaxed)
        for instance in instances.withLock({ $0 }) {
            instance.loop.submitAndWait { instance.value.closeListener() }
        }
    }

    /// Frees every evhttp (closing all connections). Call after draining,
    /// from a thread that is not one of the loops.
    public func stop() {
        let all = instances.withLock { current -> [LoopBound<LoopEvhttpServer>] in
            let taken = current
            current = []
            return taken
        }
        for instance in all {
            instance.loop.submitAndWait { instance.value.free() }
        }
    }
}

extension EvhttpServer: DrainingFlag {}

protocol DrainingFlag: AnyObject, Sendable {
    var isDraining: Bool { get }
}

/// The part of an ``EvhttpServer`` that lives on one loop. Loop-bound: every
/// method runs on `loop`; it crosses threads only as a ``LoopBound``.
final class LoopEvhttpServer {
    let loop: EventLoop
    private let configuration: EvhttpServerConfiguration
    private let handler: EvhttpRequestHandler
    private unowned let drainingFlag: any DrainingFlag
    private var http: OpaquePointer?
    private var boundSocket: OpaquePointer?

    init(loop: EventLoop, configuration: EvhttpServerConfiguration, handler: @escaping EvhttpRequestHandler, draining: any DrainingFlag) {
        self.loop = loop
        self.configuration = configuration
        self.handler = handler
        self.drainingFlag = draining
    }

    func start(listening fd: Int32) throws(TransportError) {
        loop.preconditionInEventLoop()
        let http = try CCheck.pointer(evhttp_new(loop.base), "evhttp_new")
        self.http = http
        // evhttp's defaults are unlimited sizes, no timeouts and every
        // method refused but five; set them all.
        evhttp_set_max_body_size(http, Int(configuration.maxBodyBytes))
        evhttp_set_max_headers_size(http, Int(configuration.maxHeaderBytes))
        var timeout = timeval(tv_sec: configuration.timeoutSeconds, tv_usec: 0)
        evhttp_set_timeout_tv(http, &timeout)
        evhttp_set_default_content_type(http, defaultContentType)
        let everyMethod = EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_POST.rawValue | EVHTTP_REQ_HEAD.rawValue
            | EVHTTP_REQ_PUT.rawValue | EVHTTP_REQ_DELETE.rawValue | EVHTTP_REQ_OPTIONS.rawValue
            | EVHTTP_REQ_TRACE.rawValue | EVHTTP_REQ_CONNECT.rawValue | EVHTTP_REQ_PATCH.rawValue
        evhttp_set_allowed_methods(http, UInt16(everyMethod))
        let context = Unmanaged.passUnretained(self).toOpaque()
        evhttp_set_gencb(http, httpServerRequestCallback, context)
        if let tls = configuration.tls {
            evhttp_set_bevcb(http, httpServerTLSBuffereventCallback, Unmanaged.passUnretained(tls).toOpaque())
        }
        boundSocket = try CCheck.pointer(evhttp_accept_socket_with_handle(http, fd), "evhttp_accept_socket_with_handle")
    }

    func closeListener() {
        loop.preconditionInEventLoop()
        if let http, let boundSocket { evhttp_del_accept_socket(http, boundSocket) }
        boundSocket = nil
    }

    func free() {
        loop.preconditionInEventLoop()
        closeListener()
        if let http { evhttp_free(http) }
        http = nil
    }

    fileprivate func handle(_ request: OpaquePointer) {
        if configuration.tls != nil, let connection = evhttp_request_get_connection(request),
           let bev = evhttp_connection_get_bufferevent(connection) {
            // Set per request (the fd is not known when the TLS bufferevent
            // is made); cheap, and in place before the answer is written.
            _ = try? CCheck.libevent(gw_socket_set_nodelay(bufferevent_getfd(bev)), "setsockopt(TCP_NODELAY)") // only latency is at stake
        }
        let command = evhttp_request_get_command(request)
        let uri = evhttp_request_get_uri(request).map { String(cString: $0) } ?? "/"
        let message = HTTPServerRequest(
            method: LibeventConversions.methodName(command),
            uri: uri,
            headers: LibeventConversions.headers(evhttp_request_get_input_headers(request)),
            body: LibeventConversions.bytes(of: evhttp_request_get_input_buffer(request)),
            loop: loop
        )
        let responder = EvhttpResponder(request: request, server: LoopBound(self, loop: loop))
        handler(message, responder)
    }

    /// Writes the response; on the loop thread only.
    func send(_ response: HTTPResponse, to request: OpaquePointer) {
        loop.preconditionInEventLoop()
        // After free() evhttp has released its connections and their
        // requests; an answer that comes later has nobody to go to.
        guard http != nil else { return }
        var headers = response.headers
        if drainingFlag.isDraining { headers.replace("Connection", "close") }
        guard (try? LibeventConversions.add(headers, to: evhttp_request_get_output_headers(request))) != nil,
              let body = evbuffer_new() else {
            evhttp_send_error(request, 500, nil)
            return
        }
        defer { evbuffer_free(body) }
        // libevent 2.1 would send a HEAD answer's body; HEAD gets headers only.
        if evhttp_request_get_command(request) != EVHTTP_REQ_HEAD {
            guard (try? CCheck.libevent(response.body.withUnsafeBytes { evbuffer_add(body, $0.baseAddress, $0.count) }, "evbuffer_add")) != nil else {
                evhttp_send_error(request, 500, nil)
                return
            }
        }
        // A request whose client has gone is detached from its connection;
        // evhttp_send_reply then only frees it.
        evhttp_send_reply(request, Int32(response.status), Self.reason(response.status), body)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 413: "Payload Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status"
        }
    }

    func startChunked(status: Int, headers: HTTPHeaders, request: OpaquePointer) {
        loop.preconditionInEventLoop()
        guard http != nil else { return }
        guard (try? LibeventConversions.add(headers, to: evhttp_request_get_output_headers(request))) != nil else {
            evhttp_send_error(request, 500, nil)
            return
        }
        evhttp_send_reply_start(request, Int32(status), Self.reason(status))
    }

    func sendChunk(_ bytes: [UInt8], request: OpaquePointer) {
        loop.preconditionInEventLoop()
        guard http != nil, let buffer = evbuffer_new() else { return }
        defer { evbuffer_free(buffer) }
        guard (try? CCheck.libevent(bytes.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }, "evbuffer_add")) != nil else { return }
        evhttp_send_reply_chunk(request, buffer)
    }

    /// Writes the last chunk, and ends the answer once the socket has
    /// taken everything before it (see ``EvhttpResponder/endChunked(lastChunk:)``).
    func endChunked(lastChunk bytes: [UInt8], request: OpaquePointer) {
        loop.preconditionInEventLoop()
        guard http != nil else { return }
        guard let connection = evhttp_request_get_connection(request),
              evhttp_request_get_command(request) != EVHTTP_REQ_HEAD, !bytes.isEmpty,
              let buffer = evbuffer_new() else {
            // Detached (the client has gone; ending it only frees it), or no
            // body to carry the end.
            evhttp_send_reply_end(request)
            return
        }
        defer { evbuffer_free(buffer) }
        guard (try? CCheck.libevent(bytes.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }, "evbuffer_add")) != nil else {
            evhttp_send_reply_end(request)
            return
        }
        // Should the client go before the end is sent, libevent detaches the
        // request (its end not called yet) and frees only the connection:
        // its close callback then ends, so frees, the request.
        evhttp_connection_set_closecb(connection, evhttpEndDetachedAnswer, UnsafeMutableRawPointer(request))
        evhttp_send_reply_chunk_with_cb(request, buffer, evhttpEndChunkedAnswer, UnsafeMutableRawPointer(request))
    }

    /// Writes bytes on the request's connection past evhttp.
    func writeRaw(_ bytes: [UInt8], request: OpaquePointer) {
        loop.preconditionInEventLoop()
        guard http != nil, let connection = evhttp_request_get_connection(request),
              let bev = evhttp_connection_get_bufferevent(connection) else { return }
        _ = bytes.withUnsafeBytes { bufferevent_write(bev, $0.baseAddress, $0.count) }
        // evhttp leaves writing off while it reads a request.
        bufferevent_enable(bev, Int16(EV_WRITE))
    }

    /// Sets SO_LINGER 0 on the request's socket and drops the connection, so
    /// the peer sees a reset (the test upstream's fault switch).
    func reset(_ request: OpaquePointer) {
        loop.preconditionInEventLoop()
        guard http != nil else { return }
        guard let connection = evhttp_request_get_connection(request) else { return }
        if let bev = evhttp_connection_get_bufferevent(connection) {
            _ = gw_socket_set_linger_zero(bufferevent_getfd(bev))
        }
        evhttp_connection_free(connection)
    }
}

/// Answers one request, once, from any thread: the answer hops to the loop
/// that owns the request.
public struct EvhttpResponder: Sendable {
    // The evhttp_request belongs to `server.loop`; it is dereferenced only there.
    private let requestAddress: UInt
    private let server: LoopBound<LoopEvhttpServer>

    fileprivate init(request: OpaquePointer, server: LoopBound<LoopEvhttpServer>) {
        self.requestAddress = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(request)))
        self.server = server
    }

    private var request: OpaquePointer {
        OpaquePointer(bitPattern: requestAddress)!
    }

    /// Sends `response`. Call exactly once.
    public func send(_ response: HTTPResponse) {
        let server = self.server
        let address = requestAddress
        if server.loop.inEventLoop {
            server.value.send(response, to: request)
        } else {
            server.loop.execute { server.value.send(response, to: OpaquePointer(bitPattern: address)!) }
        }
    }

    /// Resets the connection instead of answering (test upstream only).
    public func resetConnection() {
        let server = self.server
        let address = requestAddress
        // Deferred: freeing the connection inside its own request callback
        // would pull it from under evhttp.
        server.loop.execute { server.value.reset(OpaquePointer(bitPattern: address)!) }
    }

    /// Writes `bytes` on the connection as they are, instead of an answer
    /// (the test upstream's malformed framing); the request is dropped when
    /// the connection closes.
    public func sendRaw(_ bytes: [UInt8]) {
        let server = self.server
        let address = requestAddress
        server.loop.execute { server.value.writeRaw(bytes, request: OpaquePointer(bitPattern: address)!) }
    }

    /// Never answers; the request is dropped when its connection closes
    /// (test upstream's hang fault).
    public func abandon() {}

    /// Starts a chunked answer (the test upstream's trickle fault): the
    /// status and headers go now, each `sendChunk` later,
    /// ``endChunked(lastChunk:)`` last.
    public func startChunked(status: Int, headers: HTTPHeaders) {
        let server = self.server
        let address = requestAddress
        server.loop.execute { server.value.startChunked(status: status, headers: headers, request: OpaquePointer(bitPattern: address)!) }
    }

    public func sendChunk(_ bytes: [UInt8]) {
        let server = self.server
        let address = requestAddress
        server.loop.execute { server.value.sendChunk(bytes, request: OpaquePointer(bitPattern: address)!) }
    }

    /// Sends the last chunk, `lastChunk` (not empty), and ends the answer.
    ///
    /// The end is not written at once: libevent 2.1's OpenSSL bufferevent
    /// runs its write callback deferred, a loop pass after the write that
    /// emptied its output, and evhttp's write callback then calls whatever
    /// completion is set by that time. Once `evhttp_send_reply_end` has
    /// set its own, a callback still pending from an earlier write (the
    /// head's or a chunk's, written while the loop polled between the
    /// pieces, as it does when a drain outlasts its budget) took the answer
    /// for sent with most of it still in the output buffer, and evhttp,
    /// turning to read the next request, stopped writing: the client
    /// waited for the rest until its deadline (the gateway's 200 000-byte
    /// answer test, about one run in ten under a sanitizer with the other
    /// core busy). So the end is written from the write callback of the
    /// last chunk, when none is pending.
    public func endChunked(lastChunk: [UInt8]) {
        let server = self.server
        let address = requestAddress
        server.loop.execute { server.value.endChunked(lastChunk: lastChunk, request: OpaquePointer(bitPattern: address)!) }
    }
}

/// evhttp's write callback after the last chunk of a chunked answer: ends
/// the answer (the terminating chunk, then `evhttp_send_done` once written).
/// Runs inside the bufferevent's write callback, so no earlier one is still
/// pending to take the answer for sent before its end is written.
private func evhttpEndChunkedAnswer(_ connection: OpaquePointer?, _ request: UnsafeMutableRawPointer?) {
    guard let connection, let request else { return }
    evhttp_connection_set_closecb(connection, nil, nil)
    evhttp_send_reply_end(OpaquePointer(request))
}

/// The connection of a chunked answer whose end is not written yet is
/// closing. A request the client left is detached from it and freed only by
/// its end, which is called here; one still attached is freed with the
/// connection.
private func evhttpEndDetachedAnswer(_ connection: OpaquePointer?, _ request: UnsafeMutableRawPointer?) {
    guard let request else { return }
    let answer = OpaquePointer(request)
    if evhttp_request_get_connection(answer) == nil { evhttp_send_reply_end(answer) }
}

private func httpServerRequestCallback(_ request: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("evhttp callback without its server") }
    guard let request else { return }
    Unmanaged<LoopEvhttpServer>.fromOpaque(context).takeUnretainedValue().handle(request)
}

private func httpServerTLSBuffereventCallback(_ base: OpaquePointer?, _ context: UnsafeMutableRawPointer?) -> OpaquePointer? {
    guard let context else { preconditionFailure("evhttp TLS callback without its context") }
    let tls = Unmanaged<TLSServerContext>.fromOpaque(context).takeUnretainedValue()
    guard let ssl = tls.makeSSL() else { return nil }
    return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
}


