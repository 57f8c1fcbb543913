import EventTransport
import ServiceLifecycle

/// The upstream side of the gateway as a `Service`: the shared fetches
/// (owned by the coalescer of ``ProductsFetchService``) and the HTTPS
/// client's connections they use; none with the embedded catalog.
///
/// The group stops it after the HTTP front, so by then every call has been
/// answered; what may still run are fetches whose callers left at their
/// deadline.
final class UpstreamPool: Service {
    private let service: ProductsFetchService
    private let client: HTTPSClient?

    init(service: ProductsFetchService, client: HTTPSClient?) {
        self.service = service
        self.client = client
    }

    /// On a graceful shutdown, waits for the fetches still running, within
    /// the grace. When the grace is over (this task is cancelled), every
    /// wait on a fetch ends with `cancelled` at once, and fetches still in
    /// flight are abandoned with the loops. Then the client fails the
    /// requests waiting for a lease and closes its idle connections.
    func run() async {
        let graceful = (try? await gracefulShutdown()) != nil
        let ended = graceful ? await service.waitForFetches() : false
        if !ended {
            service.cancelWaiting()
        }
        // Blocks this thread for one turn of each loop, like HTTPFront's stop.
        client?.shutdown()
    }
}
