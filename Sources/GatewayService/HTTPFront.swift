import EventTransport
import Logging

/// The HTTP side of the gateway: the listeners on every loop, the HTTP
/// rules in front of the engine, `/readyz`, and the count of calls in
/// flight. ``GatewayApplication`` drives its shutdown.
final class HTTPFront: Sendable {
    private let server: HTTPServer
    private let handler: GatewayHTTPHandler
    private let readiness: ReadinessState
    private let loops: [EventLoop]

    init(group: EventLoopGroup, configuration: HTTPServerConfiguration, logger: Logger, handler: GatewayHTTPHandler, readiness: ReadinessState) {
        self.server = HTTPServer(group: group, configuration: configuration, logger: logger, problemResponder: GatewayHTTPHandler.framingProblem) { request, responder in
            handler.handle(request, responder: responder)
        }
        self.handler = handler
        self.readiness = readiness
        self.loops = group.loops
    }

    /// Binds and serves; returns the bound port. `/readyz` answers 200 from here on.
    func start() throws(TransportError) -> Int {
        let port = try server.start()
        readiness.set(.ready)
        return port
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

    /// Writes out the last answers, then closes every connection.
    func close() async {
        await writeOutAnswers()
        server.stop()
    }

    /// Turns each loop enough times for the last answers to reach the
    /// kernel before `stop()` closes the connections. evhttp writes an
    /// answer when its socket is writable, at most 16 KiB a turn (libevent's
    /// single-write limit), and each zero-delay timer below comes after the
    /// I/O polled in its turn (libevent runs the events it polled before the
    /// timers it expired). So 256 turns write out answers up to 4 MiB a
    /// connection: a bound in work, not in time; idle turns cost
    /// microseconds. Connections answered while draining close themselves
    /// once written (`Connection: close`). Exact would be to wait until the
    /// server's connections have closed, which `HTTPServer` does not tell.
    private func writeOutAnswers(turns: Int = 256) async {
        await withTaskGroup(of: Void.self) { group in
            for loop in loops {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let queued = loop.execute {
                            Self.turn(loop, times: turns) { continuation.resume() }
                        }
                        // A stopped loop has nothing left to write.
                        if !queued { continuation.resume() }
                    }
                }
            }
        }
    }

    /// Calls `done` on `loop` after `times` turns of it.
    private static func turn(_ loop: EventLoop, times: Int, then done: @escaping () -> Void) {
        guard times > 0 else { return done() }
        _ = loop.scheduleTimer(after: .zero) { turn(loop, times: times - 1, then: done) }
    }
}
