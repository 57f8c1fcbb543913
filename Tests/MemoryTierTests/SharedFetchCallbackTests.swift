import EventTransport
@testable import GatewayMetrics
import ManualTime
@testable import MemoryTier
import MonotonicTime
import ProductsDomain
import Synchronization
import Testing

/// The shared fetch's waiters by callback (`whenDone`), on real loops:
/// delivery on the waiter's own loop whoever finishes the fetch, each
/// waiter's own deadline (on manual time), and an outcome already there
/// delivered at once.
@Suite("CoalescedFetch by callback", .timeLimit(.minutes(1)))
final class SharedFetchCallbackTests {
    let group: EventLoopGroup
    static let scope = FetchScope(appID: "demo", country: CountryCode("DE")!, language: nil)
    static let page = SourcePage(encodedProducts: [:], maxAgeSeconds: 17)
    static let deadlineFailure = ProductsFetchFailure.cancelled(detail: "deadline")

    init() throws {
        group = try EventLoopGroup(count: 2, namePrefix: "shared-fetch")
    }

    deinit {
        group.shutdown()
    }

    /// What one waiter got, and whether it got it on its own loop.
    struct Delivery: Sendable {
        let maxAge: Int?
        let failure: ProductsFetchFailure?
        let onItsLoop: Bool
    }

    /// Registers a waiter on `loop` and returns its delivery, once made.
    static func wait(_ fetch: CoalescedFetch, on loop: EventLoop, until deadline: MonotonicInstant, registered: (@Sendable () -> Void)? = nil) async -> Delivery {
        await withCheckedContinuation { (continuation: CheckedContinuation<Delivery, Never>) in
            loop.execute {
                fetch.whenDone(on: loop, until: deadline, onDeadline: Self.deadlineFailure) { outcome in
                    switch outcome {
                    case .success(let page):
                        continuation.resume(returning: Delivery(maxAge: page.maxAgeSeconds, failure: nil, onItsLoop: loop.inEventLoop))
                    case .failure(let failure):
                        continuation.resume(returning: Delivery(maxAge: nil, failure: failure, onItsLoop: loop.inEventLoop))
                    }
                }
                registered?()
            }
        }
    }


    @Test func aFetchFinishedOnAnotherLoopIsDeliveredOnEachWaitersLoop() async throws {
        let fetch = CoalescedFetch(scope: Self.scope, identifiers: ["a"])
        let (first, second) = (group.loops[0], group.loops[1])
        let registered = Registrations()
        let far = MonotonicInstant.now + .seconds(60)
        async let onFirst = Self.wait(fetch, on: first, until: far) { registered.increment() }
        async let onSecond = Self.wait(fetch, on: second, until: far) { registered.increment() }
        await registered.reached(2)
        // Finished from the first loop, as the upstream's callback does.
        first.execute { fetch.finish(.success(Self.page)) }
        let (a, b) = await (onFirst, onSecond)
        #expect(a.maxAge == 17 && a.onItsLoop)
        #expect(b.maxAge == 17 && b.onItsLoop)
    }

    /// The short waiter leaves at its deadline, not a moment before (its
    /// timer is the one still armed until then); the other stays and gets
    /// the result, its own timer cancelled.
    @Test func aWaiterWhoseDeadlinePassesLeavesAndTheOtherStillGetsTheResult() async throws {
        let clock = ManualClock()
        let fetch = CoalescedFetch(scope: Self.scope, identifiers: ["a"], clock: clock.gatewayClock)
        let loop = group.loops[0]
        let registered = Registrations()
        async let short = Self.wait(fetch, on: loop, until: clock.now + .milliseconds(50)) { registered.increment() }
        async let long = Self.wait(fetch, on: loop, until: clock.now + .seconds(60)) { registered.increment() }
        await registered.reached(2)
        await clock.advance(by: .milliseconds(49))
        #expect(clock.armedCount == 2)
        await clock.advance(by: .milliseconds(1))
        #expect(clock.armedCount == 1)
        // Finished after the short deadline: the short waiter has left
        // with its failure (a waiter still there would get the page).
        fetch.finish(.success(Self.page))
        let left = await short
        #expect(left.failure == Self.deadlineFailure && left.onItsLoop)
        let stayed = await long
        #expect(stayed.maxAge == 17 && stayed.failure == nil && stayed.onItsLoop)
        #expect(clock.armedCount == 0)
    }

    @Test func anOutcomeAlreadyThereIsDeliveredBeforeWhenDoneReturns() async {
        let fetch = CoalescedFetch(scope: Self.scope, identifiers: ["a"])
        fetch.finish(.failure(.appNotRegistered(upstreamStatus: 404)))
        let loop = group.loops[1]
        // (the failure delivered, whether whenDone had returned by then)
        let seen = await withCheckedContinuation { (continuation: CheckedContinuation<(ProductsFetchFailure?, Bool), Never>) in
            loop.execute {
                let returned = Mutex(false)
                fetch.whenDone(on: loop, until: .now + .seconds(60), onDeadline: Self.deadlineFailure) { outcome in
                    guard case .failure(let failure) = outcome else { return continuation.resume(returning: (nil, true)) }
                    continuation.resume(returning: (failure, returned.withLock { $0 }))
                }
                returned.withLock { $0 = true }
            }
        }
        #expect(seen.0 == .appNotRegistered(upstreamStatus: 404))
        #expect(seen.1 == false)
    }

    @Test func releasedWaitersGetTheReleaseFailureOnTheirLoop() async throws {
        let fetch = CoalescedFetch(scope: Self.scope, identifiers: ["a"])
        let loop = group.loops[0]
        let registered = Registrations()
        async let waiting = Self.wait(fetch, on: loop, until: .now + .seconds(60)) { registered.increment() }
        await registered.reached(1)
        fetch.releaseWaiters(with: .cancelled(detail: "the gateway is shutting down"))
        let delivery = await waiting
        #expect(delivery.failure == .cancelled(detail: "the gateway is shutting down") && delivery.onItsLoop)
    }
}

/// Waiters registered, counted from any loop; a test awaits a count by
/// continuation, resumed by the registration that reaches it (no poll: the
/// suite's time limit fails a count that never comes).
final class Registrations: Sendable {
    private let state = Mutex<(count: Int, waiting: [(target: Int, continuation: CheckedContinuation<Void, Never>)])>((0, []))

    func increment() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count += 1
            let count = state.count
            let ready = state.waiting.filter { $0.target <= count }.map(\.continuation)
            state.waiting.removeAll { $0.target <= count }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once `target` waiters have registered.
    func reached(_ target: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.count >= target { return true }
                state.waiting.append((target, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }
}
