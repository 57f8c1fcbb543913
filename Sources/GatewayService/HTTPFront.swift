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

    /// Waits one turn of every loop. evhttp writes an answer the next time
    /// its socket is writable: in that turn, before the zero-delay timer
    /// (libevent runs the I/O it polled before the timers it expired), so
    /// the last answers are in the kernel before `stop()` closes the
    /// connections. An answer larger than the socket's send buffer could
    /// still be cut; the gateway's answers are far smaller.
    private func writeOutAnswers() async {
        for loop in loops {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let queued = loop.execute {
                    _ = loop.scheduleTimer(after: .zero) { continuation.resume() }
                }
                // A stopped loop has nothing left to write.
                if !queued { continuation.resume() }
            }
        }
    }
}
