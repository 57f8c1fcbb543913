import EventTransport
import ManualTime
@testable import SharedTier
import Synchronization
import Testing

/// A loop's lease renewal sweep on manual time: every
/// ``SharedTier/renewal`` while a fetch holds leases, no timer once the
/// last holder is gone. A 1 s lease renewed every 300 ms never lapses.
@Suite("Lease renewals on manual time", .timeLimit(.minutes(1)))
final class SharedLeaseRenewalsTests {
    let loop: EventLoop

    init() throws {
        loop = try EventLoop(name: "renewals")
        loop.start()
    }

    deinit {
        loop.stop()
        loop.waitUntilStopped()
    }

    /// Counts its renewals.
    final class Holder: SharedLeaseHolder, Sendable {
        let renewals = Atomic<Int>(0)
        func renewLeases() { renewals.add(1, ordering: .relaxed) }
        var count: Int { renewals.load(ordering: .relaxed) }
    }

    func onLoop(_ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                work()
                done.resume()
            }
        }
    }

    @Test func heldLeasesAreRenewedEveryPeriodUntilTheLastHolderLeaves() async {
        let clock = ManualClock()
        // Loop-confined: made here, touched only on the loop.
        let renewals = LoopBound(sending: SharedLeaseRenewals(loop: loop, period: SharedTier.renewal, clock: clock.gatewayClock), loop: loop)
        let first = Holder()
        let second = Holder()
        await onLoop { renewals.value.add(first) }
        #expect(clock.armedCount == 1)
        await clock.advance(by: .milliseconds(299))
        #expect(first.count == 0)
        await clock.advance(by: .milliseconds(1))
        #expect(first.count == 1)

        // One added between sweeps is renewed at the next one, with the others.
        await clock.advance(by: .milliseconds(100))
        await onLoop { renewals.value.add(second) }
        #expect(clock.armedCount == 1)
        await clock.advance(by: .milliseconds(200))
        #expect((first.count, second.count) == (2, 1))
        await clock.advance(by: .milliseconds(900))
        #expect((first.count, second.count) == (5, 4))

        await onLoop { renewals.value.remove(first) }
        await clock.advance(by: .milliseconds(300))
        #expect((first.count, second.count) == (5, 5))
        // No timer outlives the last holder.
        await onLoop { renewals.value.remove(second) }
        #expect(clock.armedCount == 0)
        await clock.advance(by: .seconds(10))
        #expect((first.count, second.count) == (5, 5))
    }
}
