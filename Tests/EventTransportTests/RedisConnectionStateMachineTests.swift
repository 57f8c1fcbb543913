import EventTransport
import MonotonicTime
import Testing

/// The Redis connection's rules, event by event, on instants the test
/// makes up: no hiredis, no socket, no timer, no sleeping.
@Suite("RedisConnectionStateMachine")
struct RedisConnectionStateMachineTests {
    typealias Machine = RedisConnectionStateMachine<String, MonotonicClock>
    let t0 = MonotonicInstant.now

    func at(_ ms: Int) -> MonotonicInstant { t0 + .milliseconds(ms) }

    /// What a connection tells its machine; times in ms after `t0`.
    enum Event {
        case start
        case retryFired
        case resolved(Bool)
        case opened(at: Int)
        case openFailed
        /// Queues the handshake as the connection does, each step with the
        /// next sequence.
        case sendHandshake
        case connected(Bool)
        case subscribed
        /// Sends a command (its entry is its name) with the next sequence.
        case send(String, at: Int)
        case replied(sequence: UInt, Machine.Reply)
        case timer(at: Int)
        case disconnected
        case reset
        case close
    }

    /// An action, with instants as ms after `t0` and the failed entries as
    /// a list: what the tables expect.
    enum Did: Equatable {
        case none, resolve, open, subscribe, ready
        case handshake(timer: Int)
        case armTimer(Int)
        case deliver(String)
        case drop(Machine.DropReason, failing: [String], retryAfter: Int?, wasReady: Bool)
    }

    func machine(password: Bool = true, database: Bool = true, subscribes: Bool = false, retry: ClosedRange<Int> = 1000...1000, seed: UInt64 = 42) -> Machine {
        Machine(
            configuration: .init(
                hasPassword: password, selectsDatabase: database, subscribes: subscribes,
                connectTimeout: .milliseconds(1000), commandTimeout: .milliseconds(200),
                retryInterval: .milliseconds(retry.lowerBound) ... .milliseconds(retry.upperBound)
            ),
            seed: seed
        )
    }

    func did(_ action: Machine.Action) -> Did {
        switch action {
        case .none: .none
        case .resolve: .resolve
        case .open: .open
        case .subscribe: .subscribe
        case .ready: .ready
        case .handshake(let timer): .handshake(timer: ms(timer))
        case .armTimer(let instant): .armTimer(ms(instant))
        case .deliver(let entry): .deliver(entry)
        case .drop(let reason, let failing, let retryAfter, let wasReady):
            .drop(reason, failing: failing.map(\.entry), retryAfter: retryAfter.map(milliseconds), wasReady: wasReady)
        }
    }

    func ms(_ instant: MonotonicInstant) -> Int { milliseconds(instant - t0) }
    func milliseconds(_ duration: Duration) -> Int { Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000) }

    func step(_ m: inout Machine, _ event: Event) -> Did {
        switch event {
        case .start: return did(m.start())
        case .retryFired: return did(m.retryFired())
        case .resolved(let found): return did(m.resolved(found))
        case .opened(let ms): return did(m.opened(now: at(ms)))
        case .openFailed: return did(m.openFailed())
        case .sendHandshake:
            for step in m.handshake { m.handshakeSent(step, sequence: m.nextSequence()) }
            return .none
        case .connected(let ok): return did(m.connected(ok))
        case .subscribed: return did(m.subscribed())
        case .send(let name, let ms):
            let sequence = m.nextSequence()
            return did(m.sent(name, sequence: sequence, now: at(ms)))
        case .replied(let sequence, let reply): return did(m.replied(sequence: sequence, reply))
        case .timer(let ms): return did(m.timerFired(now: at(ms)))
        case .disconnected: return did(m.disconnected())
        case .reset: return did(m.reset())
        case .close: return did(m.close())
        }
    }

    func run(_ m: inout Machine, _ steps: [(Event, Did)], sourceLocation: SourceLocation = #_sourceLocation) {
        for (index, (event, expected)) in steps.enumerated() {
            let action = step(&m, event)
            #expect(action == expected, "step \(index): \(event)", sourceLocation: sourceLocation)
        }
    }

    /// Start, resolve, open at `ms`, queue the handshake (sequences 1-3
    /// with a password and a database), connect.
    func connect(_ m: inout Machine, at ms: Int = 0, sourceLocation: SourceLocation = #_sourceLocation) {
        run(&m, [
            (.start, .resolve),
            (.resolved(true), .open),
            (.opened(at: ms), .handshake(timer: ms + 1000)),
            (.sendHandshake, .none),
            (.connected(true), .none),
        ], sourceLocation: sourceLocation)
    }

    // MARK: - Handshake

    @Test func theHandshakeIsAuthSelectThenAPingRedisItselfMustAnswerBeforeACommandIsTaken() {
        var m = machine()
        #expect(m.handshake == [.auth, .select, .ping])
        connect(&m)
        #expect(m.state == .handshaking)
        run(&m, [
            (.replied(sequence: 1, .answered), .none),
            (.replied(sequence: 2, .answered), .none),
        ])
        #expect(!m.isReady)
        run(&m, [(.replied(sequence: 3, .answered), .ready)])
        #expect(m.isReady)
        #expect(machine(password: false, database: false).handshake == [.ping])
        #expect(machine(password: false, database: true).handshake == [.select, .ping])
    }

    @Test func aSubscriberSubscribesOnceTheHandshakeIsAnsweredThenIsReady() {
        var m = machine(password: false, database: false, subscribes: true)
        connect(&m)
        run(&m, [
            (.replied(sequence: 1, .answered), .subscribe),
            (.subscribed, .ready),
        ])
    }

    @Test func aSubscriberThatCannotSubscribeIsDroppedAtTheConnectDeadline() {
        var m = machine(password: false, database: false, subscribes: true)
        connect(&m)
        run(&m, [
            (.replied(sequence: 1, .answered), .subscribe),
            (.timer(at: 1000), .drop(.timedOut(connecting: true), failing: [], retryAfter: 1000, wasReady: false)),
        ])
    }

    @Test func aRefusedHandshakeStepDropsTheConnectionAndRetries() {
        for (sequence, step) in [(UInt(1), Machine.HandshakeStep.auth), (2, .select), (3, .ping)] {
            var m = machine()
            connect(&m)
            for earlier in 1..<sequence { run(&m, [(.replied(sequence: earlier, .answered), .none)]) }
            run(&m, [
                (.replied(sequence: sequence, .refused), .drop(.refused(step), failing: [], retryAfter: 1000, wasReady: false)),
                // What the dropped connection still answers is never read.
                (.replied(sequence: sequence + 1, .answered), .none),
                (.retryFired, .resolve),
            ])
        }
    }

    @Test func aHandshakeStepWithNoReplyNeverMakesTheConnectionReady() {
        var m = machine(password: false, database: false)
        connect(&m)
        run(&m, [
            (.replied(sequence: 1, .lost), .none),
            (.timer(at: 1000), .drop(.timedOut(connecting: true), failing: [], retryAfter: 1000, wasReady: false)),
        ])
        #expect(!m.isReady)
    }

    @Test func aHandshakeNotAnsweredWithinTheConnectTimeoutDropsTheAttempt() {
        var m = machine()
        connect(&m)
        run(&m, [
            (.replied(sequence: 1, .answered), .none),
            (.timer(at: 999), .armTimer(1000)),
            (.timer(at: 1000), .drop(.timedOut(connecting: true), failing: [], retryAfter: 1000, wasReady: false)),
        ])
        #expect(m.state == .idle)
    }

    @Test func aTCPConnectionThatFailsOrAHostThatDoesNotResolveRetries() {
        var m = machine()
        run(&m, [
            (.start, .resolve),
            (.resolved(false), .drop(.unresolved, failing: [], retryAfter: 1000, wasReady: false)),
            // Waiting for the retry: a start does not hurry it.
            (.start, .none),
            (.retryFired, .resolve),
            (.resolved(true), .open),
            (.openFailed, .drop(.openFailed, failing: [], retryAfter: 1000, wasReady: false)),
            (.retryFired, .resolve),
            (.resolved(true), .open),
            (.opened(at: 3000), .handshake(timer: 4000)),
            (.connected(false), .drop(.connectFailed, failing: [], retryAfter: 1000, wasReady: false)),
            // A lookup answered late (after a close, or twice) is ignored.
            (.resolved(true), .none),
        ])
    }

    // MARK: - Commands and deadlines

    @Test func repliesGoToTheirCommandsInOrderAndEachCommandHasItsDeadline() {
        var m = machine()
        connect(&m)
        run(&m, [
            (.replied(sequence: 1, .answered), .none),
            (.replied(sequence: 2, .answered), .none),
            (.replied(sequence: 3, .answered), .ready),
            // The timer is set for the connect deadline (1 s): the
            // command's (220 ms) is earlier, so it moves.
            (.send("a", at: 20), .armTimer(220)),
            (.send("b", at: 50), .none),
            (.replied(sequence: 4, .answered), .deliver("a")),
            // A reply out of turn answers nothing outstanding.
            (.replied(sequence: 4, .answered), .none),
            (.timer(at: 220), .armTimer(250)),
            (.replied(sequence: 5, .refused), .deliver("b")),
            (.timer(at: 250), .none),
            (.send("c", at: 300), .armTimer(500)),
        ])
        #expect(m.nextCommand == "c")
    }

    @Test func aCommandPastItsDeadlineDropsTheConnectionAndALateReplyIsNeverTakenForAnotherCommands() {
        var m = machine()
        connect(&m)
        run(&m, [
            (.replied(sequence: 1, .answered), .none),
            (.replied(sequence: 2, .answered), .none),
            (.replied(sequence: 3, .answered), .ready),
            (.send("a", at: 100), .armTimer(300)),
            (.send("b", at: 150), .none),
            (.timer(at: 300), .drop(.timedOut(connecting: false), failing: ["a", "b"], retryAfter: 1000, wasReady: true)),
            // The late replies of the dropped connection: nobody's.
            (.replied(sequence: 4, .answered), .none),
            (.retryFired, .resolve),
            (.resolved(true), .open),
            (.opened(at: 1300), .handshake(timer: 2300)),
            (.sendHandshake, .none), // sequences 6, 7, 8
            (.connected(true), .none),
            (.replied(sequence: 5, .answered), .none),
            (.replied(sequence: 6, .answered), .none),
            (.replied(sequence: 7, .answered), .none),
            (.replied(sequence: 8, .answered), .ready),
            (.send("c", at: 1400), .armTimer(1600)),
            // Even once the new connection has a command outstanding, a
            // reply with an old sequence is not its.
            (.replied(sequence: 4, .answered), .none),
            (.replied(sequence: 5, .answered), .none),
            (.replied(sequence: 9, .answered), .deliver("c")),
        ])
    }

    @Test func aReadyConnectionLostOrResetFailsItsCommandsAndRetries() {
        var lost = machine(password: false, database: false)
        connect(&lost)
        run(&lost, [
            (.replied(sequence: 1, .answered), .ready),
            (.send("a", at: 10), .armTimer(210)),
            (.disconnected, .drop(.lost, failing: ["a"], retryAfter: 1000, wasReady: true)),
            (.disconnected, .none),
            (.reset, .none),
            (.timer(at: 210), .none),
        ])
        var reset = machine(password: false, database: false)
        run(&reset, [(.reset, .none), (.start, .resolve), (.reset, .none), (.resolved(true), .open)])
        run(&reset, [
            (.opened(at: 0), .handshake(timer: 1000)),
            (.reset, .drop(.reset, failing: [], retryAfter: 1000, wasReady: false)),
        ])
    }

    @Test func closingFailsTheCommandsOutstandingAndNothingConnectsAgain() {
        var m = machine(password: false, database: false)
        connect(&m)
        run(&m, [
            (.replied(sequence: 1, .answered), .ready),
            (.send("a", at: 10), .armTimer(210)),
            (.close, .drop(.closed, failing: ["a"], retryAfter: nil, wasReady: true)),
            (.close, .none),
            (.start, .none),
            (.retryFired, .none),
            (.replied(sequence: 2, .answered), .none),
            (.timer(at: 210), .none),
            (.disconnected, .none),
        ])
        #expect(m.state == .closed)
    }

    // MARK: - Backoff

    @Test func everyRetryComesWithinTheIntervalJitteredAndTheScheduleFollowsTheSeed() {
        func delays(seed: UInt64) -> [Int] {
            var m = machine(retry: 1000...1200, seed: seed)
            var result: [Int] = []
            for _ in 0..<50 {
                _ = m.retryFired()
                _ = m.start()
                guard case .drop(_, _, let retryAfter?, _) = m.resolved(false) else {
                    Issue.record("a failed lookup must retry")
                    return result
                }
                result.append(milliseconds(retryAfter))
            }
            return result
        }
        let first = delays(seed: 1)
        #expect(first.allSatisfy { (1000...1200).contains($0) })
        #expect(Set(first).count > 10)
        #expect(delays(seed: 1) == first)
        #expect(delays(seed: 2) != first)
    }
}
