package import EventTransport

/// What a loop's renewal sweep renews: a fetch holding leases.
package protocol SharedLeaseHolder: AnyObject {
    /// Renews the holder's leases (not waited for).
    func renewLeases()
}

/// One loop's fetches that hold leases, renewed together every
/// ``SharedTier/renewal`` by one loop timer, armed only while any is held: a
/// fetch costs an insert and a removal here, not a timer of its own (most
/// fetches end long before their first renewal). A fetch added just after
/// a sweep is renewed at the next, within one period, so a lease of 1 s
/// never lapses while its fetch runs. Confined to its loop: the tier holds
/// it in a ``LoopBound``.
package final class SharedLeaseRenewals {
    private let loop: EventLoop
    private let period: Duration
    /// What the sweeps' period is timed on.
    private let clock: GatewayClock
    private var holders: [ObjectIdentifier: any SharedLeaseHolder] = [:]
    private var timer: ClockTimer?

    package init(loop: EventLoop, period: Duration, clock: GatewayClock = .system) {
        self.loop = loop
        self.period = period
        self.clock = clock
    }

    /// Renews `holder`'s leases at every sweep until ``remove(_:)``.
    package func add(_ holder: any SharedLeaseHolder) {
        loop.preconditionInEventLoop()
        holders[ObjectIdentifier(holder)] = holder
        if timer == nil { arm() }
    }

    package func remove(_ holder: any SharedLeaseHolder) {
        loop.preconditionInEventLoop()
        holders[ObjectIdentifier(holder)] = nil
        // No timer outlives the last holder: an armed timer holds its loop,
        // and a loop stopped with one armed would never be freed.
        if holders.isEmpty {
            timer?.cancel()
            timer = nil
        }
    }

    /// How many holders the next sweep renews.
    package var count: Int {
        loop.preconditionInEventLoop()
        return holders.count
    }

    private func arm() {
        timer = clock.scheduleTimer(on: loop, after: period) { [self] in
            timer = nil
            guard !holders.isEmpty else { return }
            for holder in holders.values { holder.renewLeases() }
            arm()
        }
    }
}
