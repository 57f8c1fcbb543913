import CGatewayShims
import CLibevent
import COpenSSL
import Glibc
import HTTPFraming

/// One keep-alive HTTPS/1.1 connection: an OpenSSL bufferevent with its own
/// `SSL`, the request written by hand and the answer read by
/// ``HTTPResponseParser``. One exchange at a time, no pipelining.
///
/// Loop-bound: created, driven and freed on its pool's loop. It is never
/// reconnected (a spent `SSL` cannot be reused): a closed connection is
/// retired by its pool and replaced.
///
/// One deadline bounds a whole exchange, connecting and the handshake
/// included, on a timer event made once per connection; libevent's
/// per-wait timeouts stay off, so an idle connection can keep listening for
/// the peer's close.
final class HTTPSConnection: @unchecked Sendable {
    // @unchecked: loop-bound like its pool; it crosses into a closure only to
    // be freed by a later turn of the same loop.
    typealias Completion = (Result<HTTPClientResponse, HTTPClientError>) -> Void

    private unowned let pool: HTTPSConnectionPool
    /// The pool state machine's name for it.
    let id: Int
    private var bufferevent: OpaquePointer?
    /// The connection's `SSL`, owned by `bufferevent` (freed with it); nil
    /// for a plain `http://` connection (a trace collector's).
    private let ssl: OpaquePointer?
    private var timerEvent: OpaquePointer?
    private var parser: HTTPResponseParser
    /// The caller of the exchange in progress; `nil` when idle.
    private var completion: Completion?
    private(set) var isClosed = false
    private(set) var completedExchanges = 0
    /// The TLS handshake is done.
    private var isConnected = false

    init(pool: HTTPSConnectionPool, id: Int, dnsBase: OpaquePointer) throws(TransportError) {
        self.pool = pool
        self.id = id
        let configuration = pool.configuration
        self.parser = HTTPResponseParser(limits: .init(maxBodyBytes: configuration.maxResponseBytes))
        let bev: OpaquePointer
        if let tls = configuration.tls {
            let ssl = try tls.makeSSL(host: configuration.host)
            // Read-ahead takes a TLS record's header and body (and any records
            // after them) in one read, where OpenSSL otherwise reads the 5-byte
            // header alone first: one system call less per answer. `readable()`
            // then drains what it leaves buffered (libevent 2.1 does not).
            SSL_set_read_ahead(ssl, 1)
            self.ssl = ssl
            guard let made = bufferevent_openssl_socket_new(
                pool.loop.base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)
            ) else {
                SSL_free(ssl)
                throw TransportError(call: "bufferevent_openssl_socket_new", message: "returned NULL")
            }
            bev = made
            // OpenSSL 3 calls a peer that closes without close_notify a protocol
            // error; libevent 2.1.12 predates that. The response's framing
            // (Content-Length, chunked) still catches a truncated body.
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        } else {
            self.ssl = nil
            guard let made = bufferevent_socket_new(pool.loop.base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
                throw TransportError(call: "bufferevent_socket_new", message: "returned NULL")
            }
            bev = made
        }
        bufferevent = bev
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, httpsConnectionReadable, nil, httpsConnectionEvent, context)
        guard let timer = event_new(pool.loop.base, -1, 0, httpsConnectionTimedOut, context) else {
            free()
            throw TransportError(call: "event_new", message: "returned NULL")
        }
        timerEvent = timer
        // Connecting resolves the name on the loop's resolver; the request
        // written meanwhile waits in the output buffer for the handshake.
        guard bufferevent_socket_connect_hostname(bev, dnsBase, AF_UNSPEC, configuration.host, Int32(configuration.port)) == 0 else {
            isClosed = true
            return
        }
        bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
    }

    deinit { assert(bufferevent == nil, "HTTPSConnection dropped without free()") }

    /// Closes the socket and frees the C objects; no callback comes after.
    func free() {
        if let timerEvent {
            event_free(timerEvent)
            self.timerEvent = nil
        }
        if let bev = bufferevent {
            bufferevent_setcb(bev, nil, nil, nil, nil)
            bufferevent_free(bev)
            bufferevent = nil
        }
        isClosed = true
    }

    /// Ends the connection now, before ``free()`` (its bufferevent may be
    /// on the stack of the callback that reported its end): no callback
    /// comes after, and the socket is shut down at once, so the upstream
    /// sees it closed before the lease it held lets another connection
    /// open: never more than `UPSTREAM_CONCURRENCY` are open to it.
    func markClosed() {
        isClosed = true
        if let timerEvent { event_del(timerEvent) }
        guard let bev = bufferevent else { return }
        bufferevent_setcb(bev, nil, nil, nil, nil)
        bufferevent_disable(bev, Int16(EV_READ | EV_WRITE))
        let fd = bufferevent_getfd(bev)
        if fd >= 0 { _ = shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Writes `method path` with `headers` (and Host, and `Content-Length`
    /// with a body) and calls `completion` once: with the response, or why
    /// there is none.
    func send(method: String = "GET", path: String, headers: HTTPHeaders, body: [UInt8]? = nil, completion: @escaping Completion) {
        guard let bev = bufferevent, let timerEvent, !isClosed, self.completion == nil else {
            completion(.failure(HTTPClientError(kind: .connection, message: "connection already closed")))
            return
        }
        var request = RequestWriter.head(method: method, path: path, host: pool.hostField, headers: headers, bodyLength: body?.count)
        if let body { request.append(contentsOf: body) }
        let written = request.withUnsafeBytes { bufferevent_write(bev, $0.baseAddress, $0.count) }
        guard written == 0 else {
            isClosed = true
            completion(.failure(HTTPClientError(kind: .connection, message: "cannot write the request")))
            return
        }
        self.completion = completion
        var timeout = pool.exchangeTimeout
        event_add(timerEvent, &timeout)
        // Once the handshake is done, write in this loop turn rather than
        // after the next epoll_wait (and with no epoll_ctl either way).
        if isConnected { gw_bufferevent_write_soon(bev) }
    }

    // MARK: - Events

    fileprivate func readable() {
        guard let bev = bufferevent, let input = bufferevent_get_input(bev) else { return }
        guard completion != nil else {
            // Bytes nobody asked for: the connection is out of step.
            evbuffer_drain(input, evbuffer_get_length(input))
            isClosed = true
            pool.idleConnectionEnded(self)
            return
        }
        var segments = (iovec(), iovec(), iovec(), iovec())
        while evbuffer_get_length(input) > 0 {
            let count = withUnsafeMutableBytes(of: &segments) { raw in
                let vectors = raw.bindMemory(to: iovec.self)
                return Int(evbuffer_peek(input, -1, nil, vectors.baseAddress, Int32(vectors.count)))
            }
            var consumed = 0
            var event = HTTPResponseParser.Event.needMore
            withUnsafeBytes(of: &segments) { raw in
                let vectors = raw.bindMemory(to: iovec.self)
                for index in 0..<min(count, vectors.count) {
                    let vector = vectors[index]
                    let bytes = UnsafeRawBufferPointer(start: vector.iov_base, count: vector.iov_len)
                    let (used, outcome) = parser.parse(bytes)
                    consumed += used
                    event = outcome
                    if case .needMore = outcome { continue }
                    break
                }
            }
            evbuffer_drain(input, consumed)
            switch event {
            case .needMore where consumed == 0:
                readBufferedRecords(bev)
                return
            case .needMore:
                continue
            case .response(let response):
                // Bytes after the answer, read or still in OpenSSL's buffer,
                // put the connection out of step.
                let reusable = response.keepAlive && evbuffer_get_length(input) == 0 && !hasPendingRecords
                if !reusable { isClosed = true }
                completedExchanges += 1
                finish(.success(HTTPClientResponse(status: response.status, headers: response.headers, body: response.body)))
                return
            case .failed(let failure):
                isClosed = true
                finish(.failure(clientError(failure)))
                return
            }
        }
        readBufferedRecords(bev)
    }

    /// With the answer still incomplete, has libevent read the TLS records
    /// that read-ahead left in OpenSSL's buffer: the socket will not report
    /// them, as they already left it.
    private func readBufferedRecords(_ bev: OpaquePointer) {
        if hasPendingRecords { gw_bufferevent_read_soon(bev) }
    }

    /// Whether OpenSSL holds records already read from the socket.
    private var hasPendingRecords: Bool {
        guard let ssl else { return false }
        return SSL_has_pending(ssl) != 0
    }

    fileprivate func event(_ what: Int16) {
        let socketError = errno
        if what & Int16(BEV_EVENT_CONNECTED) != 0 {
            if let bev = bufferevent {
                let fd = bufferevent_getfd(bev)
                _ = gw_socket_set_nodelay(fd)
                // A kept-alive connection whose upstream went away in
                // silence is found within about a minute, not at its next use.
                _ = gw_socket_set_keepalive(fd, 30, 10, 3)
            }
            isConnected = true
            return
        }
        // End of stream, or an error: the connection is over either way.
        isClosed = true
        if let bev = bufferevent { bufferevent_disable(bev, Int16(EV_READ | EV_WRITE)) }
        guard completion != nil else {
            // Idle: the upstream closed it (or it failed) between exchanges.
            // Closed on our side too, now, rather than left in CLOSE_WAIT.
            pool.idleConnectionEnded(self)
            return
        }
        if what & Int16(BEV_EVENT_EOF) != 0 {
            // A body that runs until the close ends here.
            switch parser.finish() {
            case .response(let response):
                completedExchanges += 1
                finish(.success(HTTPClientResponse(status: response.status, headers: response.headers, body: response.body)))
                return
            case .failed(let failure):
                // Cut short by the close: the peer went away mid-answer,
                // which is the connection's failure, not the framing's.
                var error = clientError(failure)
                if case .malformed = failure { error = HTTPClientError(kind: .connection, message: error.message) }
                finish(.failure(error))
                return
            case .needMore:
                break
            }
        }
        finish(.failure(closedError(socketError: what & Int16(BEV_EVENT_ERROR) != 0 ? socketError : 0)))
    }

    /// The exchange ran out of time: the connection cannot be reused (the
    /// answer may still come), so it closes.
    fileprivate func timedOut() {
        guard completion != nil else { return }
        isClosed = true
        if let bev = bufferevent { bufferevent_disable(bev, Int16(EV_READ | EV_WRITE)) }
        finish(.failure(HTTPClientError(
            kind: .timeout,
            message: "no complete answer within \(pool.configuration.timeoutMilliseconds) ms (\(pool.configuration.naming.timeoutSetting))"
        )))
    }

    /// Ends the exchange in progress, if any, with `error`, and closes.
    func abort(_ error: HTTPClientError) {
        guard completion != nil else { return }
        isClosed = true
        if let bev = bufferevent { bufferevent_disable(bev, Int16(EV_READ | EV_WRITE)) }
        finish(.failure(error))
    }

    private func finish(_ result: Result<HTTPClientResponse, HTTPClientError>) {
        if let timerEvent { event_del(timerEvent) }
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }

    // MARK: - Errors

    private func clientError(_ failure: HTTPResponseParser.Failure) -> HTTPClientError {
        switch failure {
        case .tooLarge:
            HTTPClientError(kind: .responseTooLarge, message: "the \(pool.configuration.naming.server)'s answer is larger than \(pool.configuration.maxResponseBytes) bytes (\(pool.configuration.naming.maxBodySetting))")
        case .headerTooLarge(let limit):
            HTTPClientError(kind: .malformedResponse, message: "malformed HTTP response: its header section is over \(limit)")
        case .malformed(let reason):
            HTTPClientError(kind: .malformedResponse, message: "malformed HTTP response: \(reason)")
        }
    }

    /// Why the connection ended with no answer, in words a person can act
    /// on: a failed name lookup (DNS), a certificate or TLS handshake
    /// failure, a refused or reset connection, or the peer's close.
    private func closedError(socketError: Int32) -> HTTPClientError {
        let configuration = pool.configuration
        let peer = "\(configuration.host):\(configuration.port)"
        if let bev = bufferevent {
            let dnsError = bufferevent_socket_get_dns_error(bev)
            if dnsError != 0 {
                return HTTPClientError(kind: .connection, message: "cannot resolve \(configuration.host) (DNS): \(String(cString: evutil_gai_strerror(dnsError)))")
            }
            if let tls = tlsFailure(bev, peer: peer) { return HTTPClientError(kind: .tls, message: tls) }
        }
        var code = socketError
        if code == 0, let bev = bufferevent {
            // libevent has read the socket's error itself by now; a socket
            // that never got a peer was refused (or could not reach it).
            let fd = bufferevent_getfd(bev)
            var pending: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            if fd >= 0, getsockopt(fd, SOL_SOCKET, SO_ERROR, &pending, &length) == 0 { code = pending }
            if code == 0, fd >= 0, !Self.hasPeer(fd) {
                return HTTPClientError(kind: .connection, message: "cannot connect to \(peer): connection refused, or the host is unreachable")
            }
        }
        return HTTPClientError(kind: .connection, message: Self.socketFailure(code, peer: peer, server: configuration.naming.server))
    }

    /// Whether the socket is connected to a peer (`getpeername`).
    private static func hasPeer(_ fd: Int32) -> Bool {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        } == 0
    }

    /// A socket error (an `errno`, 0 for a close) in words.
    static func socketFailure(_ code: Int32, peer: String, server: String = "upstream") -> String {
        switch code {
        case 0: "the \(server) \(peer) closed the connection before a complete answer"
        case ECONNREFUSED: "connection refused by \(peer): nothing accepts connections on that port"
        case ECONNRESET: "connection reset by \(peer)"
        case EPIPE: "connection to \(peer) broken: the \(server) closed it while the request was sent"
        case ETIMEDOUT: "connecting to \(peer) timed out"
        case EHOSTUNREACH, ENETUNREACH: "\(peer) is unreachable: \(String(cString: strerror(code)))"
        default: "connection to \(peer) failed: \(String(cString: strerror(code)))"
        }
    }

    /// Why the connection failed, from OpenSSL's point of view: a failed
    /// certificate check, or the handshake's error queue; nil when OpenSSL
    /// saw only the socket fail (libevent then queues `SSL_get_error`'s
    /// small code, such as 5 for `SSL_ERROR_SYSCALL`, which is no OpenSSL
    /// error and says nothing a person can read: the socket's error does).
    private func tlsFailure(_ bev: OpaquePointer, peer: String) -> String? {
        if let ssl = bufferevent_openssl_get_ssl(bev) {
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                return "certificate verification failed for \(peer): \(String(cString: X509_verify_cert_error_string(verify))) (trusted CAs: the system store, or \(pool.configuration.naming.caSetting))"
            }
        }
        var messages: [String] = []
        while case let code = bufferevent_get_openssl_error(bev), code != 0 {
            // Real OpenSSL errors carry a library number above these bits.
            guard code >= 0x100 else { continue }
            let reason = OpenSSLErrors.reason(code)
            // OpenSSL 3's words for the peer's close mid-handshake.
            messages.append(reason == "unexpected eof while reading" ? "the \(pool.configuration.naming.server) closed the connection during the handshake (\(reason))" : reason)
        }
        return messages.isEmpty ? nil : "TLS handshake with \(peer) failed: " + messages.joined(separator: "; ")
    }
}

/// The bytes of a `GET` request's head.
enum RequestWriter {
    /// `GET path HTTP/1.1`, `Host`, then `headers` in order. A `Host` among
    /// them is skipped (the connection's own is sent), and so is any field
    /// whose name or value holds CR, LF or NUL: it would split the request.
    /// With `bodyLength`, `Content-Length` follows them (a body's head).
    static func head(method: String = "GET", path: String, host: String, headers: HTTPHeaders, bodyLength: Int? = nil) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(96 + path.utf8.count + host.utf8.count + headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } + (bodyLength ?? 0))
        bytes.append(contentsOf: method.utf8)
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: path.utf8)
        bytes.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
        bytes.append(contentsOf: host.utf8)
        for field in headers.fields where isWritable(field.name, field.value) {
            bytes.append(contentsOf: "\r\n".utf8)
            bytes.append(contentsOf: field.name.utf8)
            bytes.append(contentsOf: ": ".utf8)
            bytes.append(contentsOf: field.value.utf8)
        }
        if let bodyLength {
            bytes.append(contentsOf: "\r\nContent-Length: ".utf8)
            bytes.append(contentsOf: String(bodyLength).utf8)
        }
        bytes.append(contentsOf: "\r\n\r\n".utf8)
        return bytes
    }

    private static func isWritable(_ name: String, _ value: String) -> Bool {
        let nameBytes = name.utf8
        guard !nameBytes.isEmpty, !(nameBytes.count == 4 && name.caseInsensitiveEqualsASCII("host")) else { return false }
        return !nameBytes.contains(where: isSplitting) && !value.utf8.contains(where: isSplitting)
    }

    private static func isSplitting(_ byte: UInt8) -> Bool { byte == 13 || byte == 10 || byte == 0 }
}

extension String {
    fileprivate func caseInsensitiveEqualsASCII(_ lowercase: StaticString) -> Bool {
        let other = UnsafeRawBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        guard utf8.count == other.count else { return false }
        return zip(utf8, other).allSatisfy { ($0 | 0x20) == $1 }
    }
}

private func httpsConnectionReadable(_ bev: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("read callback without its connection") }
    Unmanaged<HTTPSConnection>.fromOpaque(context).takeUnretainedValue().readable()
}

private func httpsConnectionEvent(_ bev: OpaquePointer?, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("event callback without its connection") }
    Unmanaged<HTTPSConnection>.fromOpaque(context).takeUnretainedValue().event(what)
}

private func httpsConnectionTimedOut(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("timer callback without its connection") }
    Unmanaged<HTTPSConnection>.fromOpaque(context).takeUnretainedValue().timedOut()
}
