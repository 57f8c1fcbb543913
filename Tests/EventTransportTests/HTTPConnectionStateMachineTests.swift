import EventTransport
import MonotonicTime
import Testing

/// The HTTP front's connection rules, event by event, on instants the test
/// makes up: no socket, no timer, no sleeping. Each table is the events a
/// connection tells its machine and the exact action the machine answers.
@Suite("HTTPConnectionStateMachine")
struct HTTPConnectionStateMachineTests {
    typealias Machine = HTTPConnectionStateMachine<MonotonicClock>
    typealias Action = Machine.Action
    let t0 = MonotonicInstant.now

    /// An instant `ms` milliseconds after `t0`.
    func at(_ ms: Int) -> MonotonicInstant { t0 + .milliseconds(ms) }

    /// What a connection tells its machine; times in ms after `t0`.
    enum Event {
        case start(at: Int)
        case received(Int, unparsed: Int)
        case mayParseHeld
        case resumed
        case needMore(insideRequest: Bool, at: Int)
        case continueExpected(at: Int)
        case request(keepAlive: Bool)
        case handlerReturned
        case framingFailed
        case endOfInput
        case clientStops(serial: UInt64)
        case answer(serial: UInt64, close: Bool)
        case partlyWritten(at: Int)
        case written(frontClosing: Bool, unparsed: Int, at: Int)
        case timer(at: Int)
    }

    func machine(read: Int = 10_000, idle: Int = 60_000, write: Int = 10_000, linger: Int = 2_000, holdLimit: Int = 1000) -> Machine {
        Machine(
            timeouts: .init(read: .milliseconds(read), idle: .milliseconds(idle), write: .milliseconds(write), linger: .milliseconds(linger)),
            holdLimit: holdLimit, now: t0
        )
    }

    func step(_ machine: inout Machine, _ event: Event) -> Action {
        switch event {
        case .start(let ms): return machine.start(now: at(ms))
        case .received(let count, let unparsed): return machine.received(count, unparsed: unparsed)
        case .mayParseHeld: return machine.mayParseHeld()
        case .resumed:
            machine.resumed()
            return .none
        case .needMore(let inside, let ms): return machine.needMore(insideRequest: inside, now: at(ms))
        case .continueExpected(let ms): return machine.continueExpected(now: at(ms))
        case .request(let keepAlive): return machine.requestReceived(keepAlive: keepAlive)
        case .handlerReturned:
            machine.handlerReturned()
            return .none
        case .framingFailed: return machine.framingFailed()
        case .endOfInput: return machine.endOfInput()
        case .clientStops(let serial): return machine.clientStopsCallback(serial: serial)
        case .answer(let serial, let close): return machine.answerReady(serial: serial, close: close)
        case .partlyWritten(let ms): return machine.answerPartlyWritten(now: at(ms))
        case .written(let closing, let unparsed, let ms): return machine.answerWritten(frontClosing: closing, unparsed: unparsed, now: at(ms))
        case .timer(let ms): return machine.timerFired(now: at(ms))
        }
    }

    /// Runs `steps` in order, expecting each action exactly.
    func run(_ machine: inout Machine, _ steps: [(Event, Action)], sourceLocation: SourceLocation = #_sourceLocation) {
        for (index, (event, expected)) in steps.enumerated() {
            let action = step(&machine, event)
            #expect(action == expected, "step \(index): \(event)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Keep-alive and close

    @Test func aNewConnectionGetsTheShorterOfReadAndIdleForItsFirstByteThenClosesSilently() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.timer(at: 10_000), .close),
        ])
        var short = machine(idle: 5_000)
        run(&short, [(.start(at: 0), .read(timer: at(5_000)))])
    }

    @Test func aKeptAliveConnectionWaitsTheIdleDeadlineForTheNextRequestOnTheTimerAlreadySet() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.answer(serial: 1, close: false), .write(close: false)),
            // The timer is set for 10 s already: earlier than the idle
            // deadline, so it is not set again; it fires early and is set
            // for what is left.
            (.written(frontClosing: false, unparsed: 0, at: 1_000), .readNext(timer: nil, parse: false)),
            (.handlerReturned, .none),
            (.timer(at: 10_000), .armTimer(at(61_000))),
            (.timer(at: 61_000), .close),
        ])
        #expect(m.waitingSince == at(1_000))
    }

    @Test func aRequestWithoutKeepAliveADrainingServerOrAClosingAnswerEndInLingeringThenClose() {
        for (keepAlive, close) in [(false, false), (true, true)] {
            var m = machine()
            run(&m, [
                (.start(at: 0), .read(timer: at(10_000))),
                (.received(100, unparsed: 0), .parse),
                (.request(keepAlive: keepAlive), .handOver(serial: 1)),
                (.handlerReturned, .none),
                (.timer(at: 10_000), .none),
                (.answer(serial: 1, close: close), .write(close: true)),
                (.written(frontClosing: false, unparsed: 0, at: 11_000), .linger(timer: at(13_000))),
                // The client's late bytes are dropped; its EOF closes.
                (.received(10, unparsed: 0), .drop),
                (.endOfInput, .close),
            ])
            #expect(m.phase == .lingering)
            #expect(m.keepsRest == false)
        }
    }

    @Test func lingeringEndsAtItsDeadline() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: false), .handOver(serial: 1)),
            (.answer(serial: 1, close: false), .write(close: true)),
            (.written(frontClosing: false, unparsed: 0, at: 500), .linger(timer: at(2_500))),
            (.timer(at: 2_500), .close),
        ])
        #expect(m.owesBytes)
    }

    @Test func aClosingFrontClosesAConnectionOnceItsAnswerIsWritten() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.answer(serial: 1, close: true), .write(close: true)),
            (.written(frontClosing: true, unparsed: 0, at: 1), .close),
        ])
    }

    // MARK: - Pipelining

    @Test func pipelinedRequestsAreHeldUntilTheAnswerBeforeThemIsWrittenAndHandedOverInOrder() {
        var m = machine(holdLimit: 1000)
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            // Two requests in one read: the first goes to the handler, the
            // rest is held (the handler answers later, by a callback).
            (.received(300, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.handlerReturned, .none),
            (.mayParseHeld, .none),
            // More arrives while the first is answered: held, not parsed,
            // and past one request's worth reading stops.
            (.received(500, unparsed: 150), .hold(stopReading: false, parse: false)),
            (.received(500, unparsed: 650), .hold(stopReading: true, parse: false)),
            // An answer to a request not handed over yet is dropped.
            (.answer(serial: 2, close: false), .none),
            (.answer(serial: 1, close: false), .write(close: false)),
            // Written later than the handler's call: the held requests are
            // parsed now, in order.
            (.written(frontClosing: false, unparsed: 1150, at: 100), .readNext(timer: nil, parse: true)),
            (.mayParseHeld, .parse),
            (.request(keepAlive: true), .handOver(serial: 2)),
            // Answered within the handler's call: the parse loop goes on.
            (.answer(serial: 2, close: false), .write(close: false)),
            (.written(frontClosing: false, unparsed: 1000, at: 100), .readNext(timer: nil, parse: false)),
            (.handlerReturned, .none),
            (.mayParseHeld, .parse),
            (.request(keepAlive: true), .handOver(serial: 3)),
            (.handlerReturned, .none),
            // A second answer to request 1 (or one after 3's) is dropped.
            (.answer(serial: 1, close: false), .none),
        ])
        #expect(m.serial == 3)
        #expect(m.phase == .responding)
    }

    @Test func aPipeliningClientGetsAtMostSixteenRequestsATurnThenTheRestWaitsForALaterTurn() {
        var m = machine()
        run(&m, [(.start(at: 0), .read(timer: at(10_000))), (.received(4000, unparsed: 0), .parse)])
        for serial in 1...Machine.requestsPerTurn {
            if serial > 1 { run(&m, [(.mayParseHeld, .parse)]) }
            run(&m, [
                (.request(keepAlive: true), .handOver(serial: UInt64(serial))),
                (.answer(serial: UInt64(serial), close: false), .write(close: false)),
                (.written(frontClosing: false, unparsed: 100, at: 1), .readNext(timer: nil, parse: false)),
                (.handlerReturned, .none),
            ])
        }
        run(&m, [
            (.mayParseHeld, .yield),
            // While it waits, what arrives is held, not parsed.
            (.received(10, unparsed: 100), .hold(stopReading: false, parse: false)),
            (.resumed, .none),
            (.mayParseHeld, .parse),
        ])
        #expect(m.isYielding == false)
    }

    @Test func anAnswerGivenByACallbackStartsATurnOfItsOwn() {
        var m = machine()
        run(&m, [(.start(at: 0), .read(timer: at(10_000))), (.received(4000, unparsed: 0), .parse)])
        for serial in 1...(Machine.requestsPerTurn + 4) {
            if serial > 1 { run(&m, [(.mayParseHeld, .parse)]) }
            run(&m, [
                (.request(keepAlive: true), .handOver(serial: UInt64(serial))),
                (.handlerReturned, .none),
                (.answer(serial: UInt64(serial), close: false), .write(close: false)),
                (.written(frontClosing: false, unparsed: 100, at: 1), .readNext(timer: nil, parse: true)),
            ])
        }
    }

    // MARK: - Half-close

    @Test func aClientThatHalfClosesAfterACompleteRequestGetsItsAnswerThenTheConnectionCloses() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.handlerReturned, .none),
            (.clientStops(serial: 1), .keepCallback),
            // The EOF: reading stops and the waiting handler is told.
            (.endOfInput, .stopReadingAndTellClientStopped),
            // Asked again after the EOF: at once.
            (.clientStops(serial: 1), .callNow),
            // A keep-alive answer still closes.
            (.answer(serial: 1, close: false), .write(close: true)),
            (.partlyWritten(at: 100), .none),
            (.written(frontClosing: false, unparsed: 0, at: 200), .linger(timer: at(2_200))),
            (.endOfInput, .close),
        ])
    }

    @Test func anEOFWhileTheAnswerIsBeingWrittenLetsItFinishThenCloses() {
        var m = machine(write: 5_000)
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.answer(serial: 1, close: false), .write(close: false)),
            (.handlerReturned, .none),
            (.partlyWritten(at: 100), .armTimer(at(5_100))),
            (.endOfInput, .stopReadingAndTellClientStopped),
            (.clientStops(serial: 1), .none),
            (.written(frontClosing: false, unparsed: 0, at: 200), .linger(timer: at(2_200))),
            (.timer(at: 2_200), .close),
        ])
    }

    @Test func anEOFMidRequestOrBetweenRequestsCloses() {
        var mid = machine()
        run(&mid, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(10, unparsed: 0), .parse),
            (.needMore(insideRequest: true, at: 0), .none),
            (.endOfInput, .close),
        ])
        var between = machine()
        run(&between, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.endOfInput, .close),
        ])
    }

    @Test func aCallbackAskedForAfterTheConnectionClosedIsCalledAtOnceAndOneForAnEarlierRequestNever() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.handlerReturned, .none),
            (.clientStops(serial: 0), .none),
        ])
        let closed = m.close()
        let closedAgain = m.close()
        #expect(closed)
        #expect(!closedAgain)
        run(&m, [
            (.clientStops(serial: 1), .callNow),
            (.answer(serial: 1, close: false), .none),
            (.timer(at: 10_000), .none),
            (.received(10, unparsed: 0), .drop),
            (.endOfInput, .none),
        ])
    }

    // MARK: - Deadlines

    @Test func theReadDeadlineCountsFromTheFirstByteAndIsNotExtendedByMoreBytes() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(10, unparsed: 0), .parse),
            // The timer (10 s) is earlier than the read deadline (13 s).
            (.needMore(insideRequest: true, at: 3_000), .none),
            (.received(10, unparsed: 10), .hold(stopReading: false, parse: true)),
            (.mayParseHeld, .parse),
            (.needMore(insideRequest: true, at: 8_000), .none),
            (.timer(at: 10_000), .armTimer(at(13_000))),
            (.timer(at: 13_000), .requestTimedOut),
            (.framingFailed, .refuse),
            (.written(frontClosing: false, unparsed: 0, at: 13_001), .linger(timer: at(15_001))),
            (.timer(at: 15_001), .close),
        ])
        #expect(m.keepsRest == false)
    }

    @Test func aContinueExpectedArmsTheReadDeadlineForTheBody() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.answer(serial: 1, close: false), .write(close: false)),
            (.written(frontClosing: false, unparsed: 0, at: 1_000), .readNext(timer: nil, parse: false)),
            (.handlerReturned, .none),
            (.timer(at: 10_000), .armTimer(at(61_000))),
            // The next request's head, at 20 s, asks for `100 Continue`:
            // its body is due within the read deadline.
            (.received(100, unparsed: 0), .parse),
            (.continueExpected(at: 20_000), .armTimer(at(30_000))),
            (.needMore(insideRequest: true, at: 21_000), .none),
            (.timer(at: 30_000), .requestTimedOut),
        ])
    }

    @Test func bytesOutsideARequestDoNotStartTheReadDeadline() {
        var m = machine(idle: 5_000)
        run(&m, [
            (.start(at: 0), .read(timer: at(5_000))),
            (.received(2, unparsed: 0), .parse),
            (.needMore(insideRequest: false, at: 1_000), .none),
            (.timer(at: 5_000), .close),
        ])
    }

    @Test func aClientThatDoesNotReadItsAnswerIsResetAtTheWriteDeadline() {
        var m = machine(write: 5_000)
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.handlerReturned, .none),
            (.answer(serial: 1, close: false), .write(close: false)),
            (.partlyWritten(at: 1_000), .armTimer(at(6_000))),
            // A deadline is the machine's, not the timer's: the 10 s one
            // was replaced.
            (.timer(at: 6_000), .reset),
        ])
        #expect(m.phase == .writing)
        #expect(m.owesBytes)
    }

    @Test func noDeadlineAppliesWhileTheHandlerHasTheRequest() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.request(keepAlive: true), .handOver(serial: 1)),
            (.handlerReturned, .none),
            (.timer(at: 10_000), .none),
            (.answer(serial: 1, close: false), .write(close: false)),
            (.written(frontClosing: false, unparsed: 0, at: 90_000), .readNext(timer: at(150_000), parse: false)),
        ])
        #expect(m.deadline == at(150_000))
        #expect(m.deadlineKind == .idle)
    }

    // MARK: - Errors

    @Test func aFramingErrorIsAnsweredThenTheConnectionLingers() {
        var m = machine()
        run(&m, [
            (.start(at: 0), .read(timer: at(10_000))),
            (.received(100, unparsed: 0), .parse),
            (.framingFailed, .refuse),
        ])
        #expect(m.keepsRest == false)
        #expect(m.phase == .responding)
        run(&m, [
            // The socket took part of the error answer.
            (.partlyWritten(at: 10), .none),
            (.written(frontClosing: false, unparsed: 0, at: 20), .linger(timer: at(2_020))),
        ])
    }
}
