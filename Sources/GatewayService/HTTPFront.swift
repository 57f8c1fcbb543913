import EventTransport
import Logging
import ServiceLifecycle

/// The HTTP side of the gateway as a `Service`: the listeners on every
/// loop, the HTTP rules in front of the engine, and `/readyz`.
///
/// It serves from ``start()`` on (the loops do the work); ``run()`` only
/// waits for the shutdown and drains: `/readyz` turns 503 at once, the
/// listeners close, later answers carry `Connection: close`, and the calls
/// in flight are answered before the connections close.
final class HTTPFront: Service {
    private let server: HTTPServer
    private let handler: GatewayHTTPHandler
    private let readiness: ReadinessState
    private let loops: [EventLoop]
    private let logger: Logger

    init(group: EventLoopGroup, configuration: HTTPServerConfiguration, handler: GatewayHTTPHandler, readiness: ReadinessState, logger: Logger) {
        self.server = HTTPServer(group: group, configuration: configuration) { request, responder in
            handler.handle(request, responder: responder)
        }
        self.handler = handler
        self.readiness = readiness
        self.loops = group.loops
        self.logger = logger
    }

    /// Binds and serves; returns the bound port. `/readyz` answers 200 from here on.
    func start() throws(TransportError) -> Int {
        let port = try server.start()
        readiness.set(.ready)
        return port
    }

    /// Returns once every call accepted before the shutdown has been
    /// answered and the connections are closed. On a graceful shutdown the
    /// calls get the rest of the grace; when the grace is over (this task is
    /// cancelled), the upstream pool ends their waits with `cancelled`, and
    /// those answers still go out.
    func run() async {
        let graceful = (try? await gracefulShutdown()) != nil
        readiness.set(.draining)
        server.beginDraining()
        let answered = graceful ? await handler.calls.waitUntilIdle() : false
        if !answered {
            let inFlight = handler.calls.count
            if inFlight > 0 {
                logger.warning("shutdown grace over; cancelling calls in flight", metadata: ["inFlight": "\(inFlight)"])
            }
            await handler.calls.waitUntilIdle(cancellable: false)
        }
        await writeOutAnswers()
        // Blocks this thread for one turn of each loop; nothing a loop runs
        // waits for the cooperative pool, so it cannot deadlock.
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
