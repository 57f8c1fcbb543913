import EventTransport

/// Pauses that stay on the caller's event loop.
enum LoopSleep {
    /// Sleeps on a timer of the loop the task runs on, so the task wakes on
    /// the same thread; off the loops (tests driving the service directly),
    /// on the task clock.
    static func sleep(for duration: Duration) async {
        if let loop = EventLoop.current {
            await loop.sleep(for: duration)
        } else {
            try? await Task.sleep(for: duration)
        }
    }
}

/// `gateway_upstream_inflight`, fed by the client as exchanges go out and end.
struct UpstreamInflightGauge: HTTPSClientObserver {
    let metrics: GatewayMetrics

    func exchangeStarted() { metrics.upstreamStarted() }
    func exchangeEnded() { metrics.upstreamEnded() }
}
