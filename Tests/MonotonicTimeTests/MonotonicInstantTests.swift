import MonotonicTime
import Testing

@Suite("MonotonicInstant")
struct MonotonicInstantTests {
    @Test func arithmeticIsInWholeNanoseconds() {
        let start = MonotonicInstant(nanoseconds: 1_000)
        #expect((start + .milliseconds(250)).nanoseconds == 250_001_000)
        #expect((start - .microseconds(1)).nanoseconds == 0)
        #expect((start + .milliseconds(250)) - start == .milliseconds(250))
        #expect(start.duration(to: MonotonicInstant(nanoseconds: 400)) == .nanoseconds(-600))
        var moved = start
        moved += .seconds(2)
        moved -= .seconds(1)
        #expect(moved.nanoseconds == 1_000_001_000)
        // Below a nanosecond is dropped, as the clock cannot tell it.
        #expect((start + .nanoseconds(1) / 2).nanoseconds == 1_000)
    }

    @Test func orderFollowsTheNanoseconds() {
        let early = MonotonicInstant(nanoseconds: -5)
        let late = MonotonicInstant(nanoseconds: 7)
        #expect(early < late)
        #expect(!(late < early))
        #expect(max(early, late) == late)
        #expect(Set([early, late, MonotonicInstant(nanoseconds: 7)]).count == 2)
    }

    @Test func aCenturyAheadSaturatesInsteadOfTrapping() {
        let start = MonotonicInstant(nanoseconds: 1_000)
        #expect((start + .seconds(Int64.max)).nanoseconds == .max)
        #expect((MonotonicInstant(nanoseconds: -1_000) - .seconds(Int64.max)).nanoseconds == .min)
        #expect(MonotonicInstant(nanoseconds: .max).advanced(by: .nanoseconds(1)).nanoseconds == .max)
        #expect(MonotonicInstant(nanoseconds: .min).duration(to: MonotonicInstant(nanoseconds: .max)) == .nanoseconds(Int64.max))
        #expect(MonotonicInstant.nanoseconds(of: .seconds(300 * 365 * 86_400)) == .max)
        #expect(MonotonicInstant.nanoseconds(of: .seconds(-300 * 365 * 86_400)) == .min)
    }

    @Test func nowMovesForwardOnTheSameClockAsItsClock() {
        let first = MonotonicInstant.now
        let second = MonotonicClock().now
        let third = MonotonicInstant.now
        #expect(first <= second)
        #expect(second <= third)
        #expect(first.nanoseconds > 0)
    }
}
