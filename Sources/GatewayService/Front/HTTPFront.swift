import GatewayMetrics
import MemoryTier
import SharedTier
import EventTransport
import Logging

/// The HTTP side of the gateway: the listeners on every loop, the HTTP
/// rules in front of the engine, `/readyz`, and the count of calls in
/// flight. ``GatewayApplication`` drives its shutdown.
final class HTTPFront: Sendable {
    private let server: HTTPServer
    /// `GATEWAY_ADMIN_LISTEN`'s listener: probes and metrics only, with a
    /// cap of its own, so callers filling `GATEWAY_MAX_CONNECTIONS` never
    /// fail a probe; and when its own cap is full, a new connection takes
    /// the place of the one idle longest, so connections to it cannot fail
    /// a probe either. It serves until the end: `/readyz` answers `503`
    /// there while the front drains.
    private let admin: HTTPServer?

    /// The admin listener's connection cap.
    static let adminMaxConnections = 64

    /// The least bound on answers held for clients that have not read them.
    static let maxUnwrittenBytes = 64 << 20

    private let handler: GatewayHTTPHandler
    private let readiness: ReadinessState

    /// - Parameter accessLog: sees every answer of the main listener (not
    ///   the admin one's probes and scrapes).
    init(group: EventLoopGroup, configuration: HTTPServerConfiguration, admin adminAddress: GatewayConfiguration.ListenAddress?, logger: Logger, accessLog: AccessLog, handler: GatewayHTTPHandler, readiness: ReadinessState) {
        self.server = HTTPServer(
            group: group, configuration: configuration, logger: logger, problemResponder: GatewayHTTPHandler.framingProblem, answerObserver: accessLog
        ) { request, responder in
            handler.handle(request, responder: responder)
        }
        self.admin = adminAddress.map { address in
            var adminConfiguration = configuration
            adminConfiguration.host = address.host
            adminConfiguration.port = address.port
            adminConfiguration.maxConnections = Self.adminMaxConnections
            // A probe must get in whatever the other connections do: the
            // one idle longest makes room.
            adminConfiguration.whenFull = .closeIdlest
            return HTTPServer(group: group, configuration: adminConfiguration, logger: logger, problemResponder: GatewayHTTPHandler.framingProblem) { request, responder in
                handler.handleAdmin(request, responder: responder)
            }
        }
        self.handler = handler
        self.readiness = readiness
    }

    /// Binds and serves; returns the bound ports (the admin one nil without
    /// `GATEWAY_ADMIN_LISTEN`). `/readyz` answers 200 from here on.
    func start() throws(HTTPFrontBindError) -> (port: Int, adminPort: Int?) {
        let port: Int
        do {
            port = try server.start()
        } catch {
            throw HTTPFrontBindError(isAdmin: false, error: error)
        }
        var adminPort: Int?
        if let admin {
            do {
                adminPort = try admin.start()
            } catch {
                server.stop()
                throw HTTPFrontBindError(isAdmin: true, error: error)
            }
        }
        readiness.set(.ready)
        return (port, adminPort)
    }

    /// `/readyz` turns 503, the listeners close, and every later answer
    /// carries `Connection: close`; calls in flight go on.
    func beginDraining() {
        readiness.set(.draining)
        // Blocks this thread for one turn of each loop; nothing a loop runs
        // waits for the cooperative pool, so it cannot deadlock.
        server.beginDraining()
    }

    /// Client connections open now, and those refused over the cap so far.
    var connectionCounts: (open: Int, rejected: Int) {
        (server.openConnections, server.rejectedConnections)
    }

    /// `/rpc` requests accepted and not yet answered.
    var callsInFlight: Int { handler.calls.count }

    /// Waits until every call has been handed its answer.
    /// - Parameter cancellable: When true, the wait also ends when the
    ///   calling task is cancelled (the grace is over).
    /// - Returns: `true` when no call is in flight.
    @discardableResult
    func waitForCalls(cancellable: Bool) async -> Bool {
        await handler.calls.waitUntilIdle(cancellable: cancellable)
    }

    /// Writes out the last answers, then closes every connection. An
    /// answer still unread after the write deadline is given up.
    func close(writeDeadline: Duration) async {
        await server.closeAfterWritingAnswers(within: writeDeadline)
        server.stop()
        admin?.stop()
    }
}

/// A listener of the front that could not be bound.
struct HTTPFrontBindError: Error {
    /// The admin listener (`GATEWAY_ADMIN_LISTEN`), else the main one.
    let isAdmin: Bool
    let error: TransportError
}

extension HTTPServerConfiguration {
    /// The bound on answers held for clients that have not read them
    /// (``HTTPServerConfiguration/maxUnwrittenBytes``): 64 MiB, or two of
    /// the largest answers when `GATEWAY_MAX_ANSWER_BYTES` is raised past
    /// 32 MiB, so that one answer of the largest size can always wait for
    /// its reader. 64 MiB leaves the 256 MiB of the manifests room for the
    /// rest of the process (the caches, the loops, Redis and upstream
    /// buffers) whatever Redis holds and however slowly clients read.
    func withUnwrittenBytesBounded(byAnswersOf maxAnswerBytes: Int) -> HTTPServerConfiguration {
        var configuration = self
        configuration.maxUnwrittenBytes = max(HTTPFront.maxUnwrittenBytes, 2 * maxAnswerBytes)
        return configuration
    }
}
