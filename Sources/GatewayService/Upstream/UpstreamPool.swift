import EventTransport

/// The upstream side of the gateway: the shared fetches (owned by the
/// coalescer of ``ProductsFetchService``) and the HTTPS client's
/// connections they use; no client with the embedded catalog.
/// ``GatewayApplication`` drives its shutdown.
final class UpstreamPool: Sendable {
    private let service: ProductsFetchService
    private let client: HTTPSClient?

    init(service: ProductsFetchService, client: HTTPSClient?) {
        self.service = service
        self.client = client
    }

    /// Waits until no shared fetch is running, or the calling task is
    /// cancelled. - Returns: `true` when none is running.
    func waitForFetches() async -> Bool {
        await service.waitForFetches()
    }

    /// Ends every wait on a fetch with `cancelled`, now and from now on.
    /// Fetches in flight go on, with nobody waiting for them.
    func cancelWaiting() {
        service.cancelWaiting()
    }

    /// Fails the requests waiting for a lease and closes the idle
    /// connections; an exchange still in flight is abandoned with the loops.
    func close() {
        // Blocks this thread for one turn of each loop, like HTTPFront's.
        client?.shutdown()
    }
}
