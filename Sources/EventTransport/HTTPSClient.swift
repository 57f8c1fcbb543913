import CGatewayShims
import CLibevent
import COpenSSL
import Foundation

/// Where and how an ``HTTPSClient`` connects.
public struct HTTPSClientConfiguration: Sendable {
    /// Host name (verified against the certificate, and sent as SNI) or address.
    public var host: String
    public var port: Int
    public var tls: TLSClientContext
    /// Timeout of connecting, and of each wait for the peer to read or write.
    public var timeoutMilliseconds: Int
    /// Idle keep-alive connections kept per event loop.
    public var maxIdleConnectionsPerLoop: Int
    /// Largest response body accepted.
    public var maxResponseBytes: Int

    public init(
        host: String,
        port: Int,
        tls: TLSClientContext,
        timeoutMilliseconds: Int,
        maxIdleConnectionsPerLoop: Int = 16,
        maxResponseBytes: Int = 8 << 20
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.timeoutMilliseconds = timeoutMilliseconds
        self.maxIdleConnectionsPerLoop = maxIdleConnectionsPerLoop
        self.maxResponseBytes = maxResponseBytes
    }
}

/// An HTTPS/1.1 client on libevent's evhttp over OpenSSL bufferevents.
///
/// Each event loop keeps its own pool of keep-alive connections (evhttp
/// sends one request at a time per connection). A request is started on the
/// next loop, round robin, and its answer resumes the caller's continuation
/// from that loop's thread.
public final class HTTPSClient: Sendable {
    private let group: EventLoopGroup
    private let pools: [ObjectIdentifier: HTTPSConnectionPool]

    public init(group: EventLoopGroup, configuration: HTTPSClientConfiguration) {
        self.group = group
        var pools: [ObjectIdentifier: HTTPSConnectionPool] = [:]
        for loop in group.loops {
            pools[ObjectIdentifier(loop)] = HTTPSConnectionPool(loop: loop, configuration: configuration)
        }
        self.pools = pools
    }

    /// Sends `GET path` with `headers` (Host is added) and returns the whole
    /// response, or why there is none.
    public func get(path: String, headers: HTTPHeaders) async -> Result<HTTPClientResponse, HTTPClientError> {
        let loop = group.next()
        let pool = pools[ObjectIdentifier(loop)]!
        return await withCheckedContinuation { continuation in
            loop.execute {
                pool.perform(path: path, headers: headers, retryStale: true) { continuation.resume(returning: $0) }
            }
        }
    }

    /// Closes every pooled connection. Call when no request is in flight,
    /// from a thread that is not one of the loops.
    public func shutdown() {
        for pool in pools.values {
            pool.loop.submitAndWait { pool.closeAll() }
        }
    }
}

/// The connections of one loop. Loop-bound: every method runs on `loop`.
final class HTTPSConnectionPool: @unchecked Sendable {
    // @unchecked: all mutable state is touched only on `loop`.
    let loop: EventLoop
    let configuration: HTTPSClientConfiguration
    private var idle: [HTTPSConnection] = []
    private var dnsBase: OpaquePointer?

    init(loop: EventLoop, configuration: HTTPSClientConfiguration) {
        self.loop = loop
        self.configuration = configuration
    }

    deinit {
        if let dnsBase { evdns_base_free(dnsBase, 0) }
    }

    func perform(
        path: String,
        headers: HTTPHeaders,
        retryStale: Bool,
        completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void
    ) {
        loop.preconditionInEventLoop()
        let connection: HTTPSConnection
        do {
            connection = try acquire()
        } catch {
            completion(.failure(HTTPClientError(kind: .tls, message: error.description)))
            return
        }
        let wasReused = connection.completedExchanges > 0
        connection.send(path: path, headers: headers) { [self] result in
            if connection.isClosed {
                retire(connection)
            } else {
                release(connection)
            }
            // A kept-alive connection the server closed while it sat idle
            // fails before any answer: try once more on a fresh one.
            if case .failure(let error) = result, wasReused, retryStale, error.kind == .connection {
                perform(path: path, headers: headers, retryStale: false, completion: completion)
                return
            }
            completion(result)
        }
    }

    func closeAll() {
        loop.preconditionInEventLoop()
        for connection in idle { connection.free() }
        idle.removeAll()
    }

    private func acquire() throws(TransportError) -> HTTPSConnection {
        while let connection = idle.popLast() {
            if !connection.isClosed { return connection }
            retire(connection)
        }
        return try HTTPSConnection(pool: self, dnsBase: try dns())
    }

    private func release(_ connection: HTTPSConnection) {
        if idle.count < configuration.maxIdleConnectionsPerLoop {
            idle.append(connection)
        } else {
            retire(connection)
        }
    }

    /// Frees a connection on the next loop turn: evhttp may still be on
    /// the stack of the callback that reported its end.
    func retire(_ connection: HTTPSConnection) {
        idle.removeAll { $0 === connection }
        loop.execute { connection.free() }
    }

    private func dns() throws(TransportError) -> OpaquePointer {
        if let dnsBase { return dnsBase }
        // Asynchronous resolution; without a resolv.conf, fall back to
        // /etc/hosts only rather than failing.
        var base = evdns_base_new(loop.base, EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE)
        if base == nil {
            base = evdns_base_new(loop.base, 0)
            if let base { _ = evdns_base_load_hosts(base, nil) }
        }
        dnsBase = try Libevent.check(base, "evdns_base_new")
        return dnsBase!
    }
}

/// One keep-alive HTTPS connection: an evhttp_connection over an OpenSSL
/// bufferevent with its own `SSL`. It is never reconnected: evhttp would
/// reuse the spent `SSL`, so a closed connection is retired and replaced.
final class HTTPSConnection: @unchecked Sendable {
    // @unchecked: loop-bound like its pool; it crosses into a closure only to
    // be freed by a later turn of the same loop.
    private unowned let pool: HTTPSConnectionPool
    private var connection: OpaquePointer?
    private(set) var isClosed = false
    private(set) var completedExchanges = 0

    init(pool: HTTPSConnectionPool, dnsBase: OpaquePointer) throws(TransportError) {
        self.pool = pool
        let configuration = pool.configuration
        let ssl = try configuration.tls.makeSSL(host: configuration.host)
        guard let bev = bufferevent_openssl_socket_new(
            pool.loop.base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
            Int32(BEV_OPT_CLOSE_ON_FREE.rawValue | BEV_OPT_DEFER_CALLBACKS.rawValue)
        ) else {
            SSL_free(ssl)
            throw TransportError(call: "bufferevent_openssl_socket_new", message: "returned NULL")
        }
        // OpenSSL 3 calls a peer that closes without close_notify a protocol
        // error; libevent 2.1.12 predates that. HTTP framing (Content-Length,
        // chunked) still catches a truncated body.
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        guard let connection = evhttp_connection_base_bufferevent_new(
            pool.loop.base, dnsBase, bev, configuration.host, UInt16(configuration.port)
        ) else {
            bufferevent_free(bev)
            throw TransportError(call: "evhttp_connection_base_bufferevent_new", message: "returned NULL")
        }
        self.connection = connection
        var timeout = timeval(
            tv_sec: configuration.timeoutMilliseconds / 1000,
            tv_usec: (configuration.timeoutMilliseconds % 1000) * 1000
        )
        evhttp_connection_set_timeout_tv(connection, &timeout)
        evhttp_connection_set_retries(connection, 0)
        evhttp_connection_set_max_body_size(connection, Int(configuration.maxResponseBytes))
        evhttp_connection_set_max_headers_size(connection, 64 << 10)
        evhttp_connection_set_closecb(connection, httpsConnectionClosed, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { assert(connection == nil, "HTTPSConnection dropped without free()") }

    func free() {
        if let connection {
            evhttp_connection_set_closecb(connection, nil, nil)
            evhttp_connection_free(connection)
        }
        connection = nil
        isClosed = true
    }

    fileprivate func markClosed() { isClosed = true }

    func send(path: String, headers: HTTPHeaders, completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void) {
        guard let connection, !isClosed else {
            completion(.failure(HTTPClientError(kind: .connection, message: "connection already closed")))
            return
        }
        let exchange = PendingExchange(connection: self, completion: completion)
        let context = Unmanaged.passRetained(exchange).toOpaque()
        guard let request = evhttp_request_new(httpsRequestDone, context) else {
            Unmanaged<PendingExchange>.fromOpaque(context).release()
            completion(.failure(HTTPClientError(kind: .connection, message: "evhttp_request_new failed")))
            return
        }
        evhttp_request_set_error_cb(request, httpsRequestError)
        let configuration = pool.configuration
        var all = headers
        all.replace("Host", configuration.port == 443 ? configuration.host : "\(configuration.host):\(configuration.port)")
        LibeventConversions.add(all, to: evhttp_request_get_output_headers(request))
        if evhttp_make_request(connection, request, EVHTTP_REQ_GET, path) != 0 {
            // evhttp has freed the request and will not call back.
            isClosed = true
            Unmanaged<PendingExchange>.fromOpaque(context).release()
            completion(.failure(HTTPClientError(kind: .connection, message: "cannot start the request")))
        }
    }

    /// Why the connection failed, from OpenSSL's point of view: a failed
    /// certificate check, or the handshake's error queue.
    fileprivate func tlsFailure() -> String? {
        guard let connection, let bev = evhttp_connection_get_bufferevent(connection) else { return nil }
        if let ssl = bufferevent_openssl_get_ssl(bev) {
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                return "certificate verification failed: " + String(cString: X509_verify_cert_error_string(verify))
            }
        }
        var messages: [String] = []
        while case let code = bufferevent_get_openssl_error(bev), code != 0 {
            messages.append(OpenSSLErrors.describe(code))
        }
        return messages.isEmpty ? nil : "TLS failure: " + messages.joined(separator: "; ")
    }

    fileprivate func finish(_ exchange: PendingExchange, request: OpaquePointer?) {
        if let request, evhttp_request_get_response_code(request) > 0 {
            completedExchanges += 1
            let response = HTTPClientResponse(
                status: Int(evhttp_request_get_response_code(request)),
                headers: LibeventConversions.headers(evhttp_request_get_input_headers(request)),
                body: LibeventConversions.bytes(of: evhttp_request_get_input_buffer(request))
            )
            exchange.completion(.success(response))
            return
        }
        isClosed = true
        let timeoutText = "no answer within \(pool.configuration.timeoutMilliseconds) ms"
        let error: HTTPClientError
        if let tls = tlsFailure() {
            error = HTTPClientError(kind: .tls, message: tls)
        } else {
            switch exchange.failure {
            case EVREQ_HTTP_TIMEOUT:
                error = HTTPClientError(kind: .timeout, message: timeoutText)
            case EVREQ_HTTP_DATA_TOO_LONG:
                error = HTTPClientError(kind: .connection, message: "response larger than \(pool.configuration.maxResponseBytes) bytes")
            case EVREQ_HTTP_INVALID_HEADER:
                error = HTTPClientError(kind: .connection, message: "malformed HTTP response")
            default:
                let cause = exchange.socketError == 0 ? "connection closed" : String(cString: strerror(exchange.socketError))
                error = HTTPClientError(kind: .connection, message: "\(cause) (\(pool.configuration.host):\(pool.configuration.port))")
            }
        }
        exchange.completion(.failure(error))
    }
}

/// The state of one request while evhttp holds it; retained by the C side
/// from `evhttp_request_new` until the done callback, which runs exactly once.
private final class PendingExchange {
    let connection: HTTPSConnection
    let completion: (Result<HTTPClientResponse, HTTPClientError>) -> Void
    var failure: evhttp_request_error?
    var socketError: Int32 = 0

    init(connection: HTTPSConnection, completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void) {
        self.connection = connection
        self.completion = completion
    }
}

private func httpsRequestError(_ error: evhttp_request_error, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("evhttp error callback without its exchange") }
    let exchange = Unmanaged<PendingExchange>.fromOpaque(context).takeUnretainedValue()
    exchange.failure = error
    exchange.socketError = errno
}

private func httpsRequestDone(_ request: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("evhttp request callback without its exchange") }
    let exchange = Unmanaged<PendingExchange>.fromOpaque(context).takeRetainedValue()
    exchange.connection.finish(exchange, request: request)
}

private func httpsConnectionClosed(_ connection: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("evhttp close callback without its connection") }
    Unmanaged<HTTPSConnection>.fromOpaque(context).takeUnretainedValue().markClosed()
}
