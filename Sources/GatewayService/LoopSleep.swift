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

    /// Calls `body` after `duration`: on a timer of the calling thread's
    /// loop, or off the loops in a task.
    static func after(_ duration: Duration, _ body: @escaping @Sendable () -> Void) {
        if let loop = EventLoop.current {
            _ = loop.scheduleTimer(after: duration, body)
        } else {
            Task {
                try? await Task.sleep(for: duration)
                body()
            }
        }
    }
}

/// `gateway_upstream_inflight`, fed by the client as exchanges go out and end.
struct UpstreamInflightGauge: HTTPSClientObserver {
    let metrics: GatewayMetrics

    func exchangeStarted() { metrics.upstreamStarted() }
    func exchangeEnded() { metrics.upstreamEnded() }
}
