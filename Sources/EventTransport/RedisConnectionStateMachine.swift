/// The rules of one Redis connection, with no hiredis, no socket and no
/// timer: its states, the handshake, which reply answers which command, the
/// deadlines, and when it connects again. ``RedisConnection`` makes the
/// hiredis context, writes the commands and arms the timers; it tells this
/// machine what happened and does what the returned ``Action`` says.
///
/// States: `idle` (not started, or waiting for the next attempt),
/// `resolving` (the host's address), `connecting` (TCP; the handshake is
/// queued behind it), `handshaking` (`AUTH`, `SELECT`, then a `PING` Redis
/// itself must answer: a proxy accepts TCP while the server behind it is cut
/// off), `ready` (commands are taken), `closed`. The handshake has the
/// connect timeout; every command the command timeout. When the earliest
/// deadline outstanding passes, the connection is dropped: every
/// outstanding command fails, and no reply that comes later is read, let
/// alone taken for another command's (a new connection's commands have
/// sequences of their own). Every failure is followed by another attempt
/// after ``Configuration/retryInterval``, jittered.
///
/// Generic over the clock and told the instant, so tests drive every
/// deadline and the backoff on instants they make up; `Entry` is what the
/// owner keeps per command (its completion).
public struct RedisConnectionStateMachine<Entry, Clock: _Concurrency.Clock> {
    /// Where the connection is (see the type's description).
    public enum State: Equatable, Sendable {
        case idle, resolving, connecting, handshaking, ready, closed
    }

    /// A command of the handshake.
    public enum HandshakeStep: Equatable, Sendable {
        case auth, select, ping
    }

    /// What the connection is asked to do and within what time.
    public struct Configuration: Sendable {
        /// `AUTH` first.
        public var hasPassword: Bool
        /// `SELECT` a database other than 0.
        public var selectsDatabase: Bool
        /// A subscriber: once the handshake is answered it subscribes, and
        /// takes no commands.
        public var subscribes: Bool
        /// For the TCP connection and the whole handshake.
        public var connectTimeout: Clock.Duration
        /// For each command's reply.
        public var commandTimeout: Clock.Duration
        /// How long after a failure the next attempt starts.
        public var retryInterval: ClosedRange<Clock.Duration>

        public init(hasPassword: Bool, selectsDatabase: Bool, subscribes: Bool, connectTimeout: Clock.Duration, commandTimeout: Clock.Duration, retryInterval: ClosedRange<Clock.Duration>) {
            self.hasPassword = hasPassword
            self.selectsDatabase = selectsDatabase
            self.subscribes = subscribes
            self.connectTimeout = connectTimeout
            self.commandTimeout = commandTimeout
            self.retryInterval = retryInterval
        }
    }

    /// A command sent and not answered yet.
    /// A command in the queue; its entry is moved out when its reply is
    /// delivered.
    private struct Queued {
        let sequence: UInt
        let deadline: Clock.Instant
        var entry: Entry?
    }

    public struct Command {
        /// Its place among the commands sent (never reused until the
        /// counter wraps).
        public let sequence: UInt
        /// When its reply is due.
        public let deadline: Clock.Instant
        /// What the owner keeps for it.
        public let entry: Entry
    }

    /// Why a connection (or an attempt) was dropped.
    public enum DropReason: Equatable, Sendable {
        /// The host name did not resolve.
        case unresolved
        /// The context could not be made or attached.
        case openFailed
        /// The TCP connection failed.
        case connectFailed
        /// Redis refused a handshake command.
        case refused(HandshakeStep)
        /// The connection was lost (closed by the server, a failed read).
        case lost
        /// The earliest deadline outstanding passed: the connect timeout
        /// while connecting, else a command's.
        case timedOut(connecting: Bool)
        /// The owner reset it (another connection found Redis unreachable).
        case reset
        /// The owner closed it for good.
        case closed
    }

    /// What the owner does after an event.
    public enum Action {
        /// Nothing.
        case none
        /// Find the host's address (a numeric host is its own), then call
        /// ``resolved(_:)``.
        case resolve
        /// Make the context for the address, then call ``opened(now:)``
        /// (or ``openFailed()``).
        case open
        /// Queue the handshake's commands (``handshake``), each told with
        /// ``handshakeSent(_:sequence:)``, and set the deadline timer.
        case handshake(timer: Clock.Instant)
        /// Subscribe to the channels, then call ``subscribed()``.
        case subscribe
        /// The connection takes commands now.
        case ready
        /// Set the deadline timer (it is set only for a deadline earlier
        /// than the one it is set for).
        case armTimer(Clock.Instant)
        /// The reply is this command's.
        case deliver(Entry)
        /// Forget the context (free it, unless hiredis frees it after the
        /// callback this came from), cancel the deadline timer, fail
        /// `failing`; when `retryAfter` is given, tell the observer and
        /// try again that long after (``retryFired()``). `wasReady`: the
        /// connection dropped was taking commands.
        case drop(DropReason, failing: ArraySlice<Command>, retryAfter: Clock.Duration?, wasReady: Bool)
    }

    /// How a reply came.
    public enum Reply: Equatable, Sendable {
        /// A reply, not an error.
        case answered
        /// An error reply.
        case refused
        /// None: the context is being freed.
        case lost
    }

    public let configuration: Configuration
    /// Where the connection is now.
    public private(set) var state = State.idle
    /// The handshake's commands, in the order sent.
    public let handshake: [HandshakeStep]
    /// Handshake commands sent and not answered, oldest first.
    private var handshakeSent: [(sequence: UInt, step: HandshakeStep)] = []
    private var handshakeLeft = 0
    /// Commands sent and not answered, oldest first from `head`: replies
    /// come in order, so the head is the one the next reply answers.
    private var commands: [Queued] = []
    private var head = 0
    private var lastSequence: UInt = 0
    private var connectDeadline: Clock.Instant?
    /// The instant the deadline timer is set for.
    private var timerAt: Clock.Instant?
    /// A retry is scheduled.
    public private(set) var isWaitingToRetry = false
    /// xorshift64 state for the retry's jitter: the machine stays pure,
    /// and a fleet of replicas seeded apart does not reconnect in step.
    private var random: UInt64

    /// - Parameter seed: the jitter's seed (not 0).
    public init(configuration: Configuration, seed: UInt64) {
        self.configuration = configuration
        self.random = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed
        var steps: [HandshakeStep] = []
        if configuration.hasPassword { steps.append(.auth) }
        if configuration.selectsDatabase { steps.append(.select) }
        steps.append(.ping)
        self.handshake = steps
    }

    /// Whether commands are taken.
    public var isReady: Bool { state == .ready }

    /// The command the next reply answers.
    public var nextCommand: Entry? { head < commands.count ? commands[head].entry : nil }

    // MARK: - Connecting

    /// Starts connecting, unless it is under way or waits for a retry.
    public mutating func start() -> Action {
        guard state == .idle, !isWaitingToRetry else { return .none }
        state = .resolving
        return .resolve
    }

    /// The retry timer fired.
    public mutating func retryFired() -> Action {
        isWaitingToRetry = false
        guard state == .idle else { return .none }
        state = .resolving
        return .resolve
    }

    /// The host's address was found (`true`) or not.
    public mutating func resolved(_ found: Bool) -> Action {
        guard state == .resolving else { return .none }
        guard found else { return fail(.unresolved) }
        state = .connecting
        return .open
    }

    /// The context is made; its handshake is due within the connect timeout.
    public mutating func opened(now: Clock.Instant) -> Action {
        guard state == .connecting else { return .none }
        let deadline = now.advanced(by: configuration.connectTimeout)
        connectDeadline = deadline
        handshakeSent = []
        handshakeLeft = handshake.count
        timerAt = deadline
        return .handshake(timer: deadline)
    }

    public mutating func openFailed() -> Action {
        guard state == .connecting else { return .none }
        return fail(.openFailed)
    }

    /// A handshake command was queued as `sequence`.
    public mutating func handshakeSent(_ step: HandshakeStep, sequence: UInt) {
        handshakeSent.append((sequence, step))
    }

    /// hiredis: the TCP connection is made (`true`) or has failed.
    public mutating func connected(_ ok: Bool) -> Action {
        guard state == .connecting else { return .none }
        guard ok else { return fail(.connectFailed) }
        state = .handshaking
        return .none
    }

    /// A subscriber subscribed to its channels.
    public mutating func subscribed() -> Action {
        guard state == .handshaking, handshakeLeft == 0 else { return .none }
        return becomeReady()
    }

    private mutating func becomeReady() -> Action {
        state = .ready
        connectDeadline = nil
        return .ready
    }

    // MARK: - Commands

    /// The sequence of the next command to send (never 0: hiredis's
    /// `privdata` of a command with none).
    public mutating func nextSequence() -> UInt {
        lastSequence &+= 1
        if lastSequence == 0 { lastSequence = 1 }
        return lastSequence
    }

    /// A command was sent as `sequence`; its reply is the next after those
    /// before it, due within the command timeout.
    public mutating func sent(_ entry: Entry, sequence: UInt, now: Clock.Instant) -> Action {
        let deadline = now.advanced(by: configuration.commandTimeout)
        commands.append(Queued(sequence: sequence, deadline: deadline, entry: entry))
        // A command's deadline may come before the one the timer is set
        // for (the handshake's, right after a reconnect): it moves.
        if let timerAt, timerAt <= deadline { return .none }
        timerAt = deadline
        return .armTimer(deadline)
    }

    /// The reply to command `sequence` came. One that answers no command
    /// outstanding (its connection was dropped) is ignored.
    public mutating func replied(sequence: UInt, _ reply: Reply) -> Action {
        switch state {
        case .connecting, .handshaking:
            guard let first = handshakeSent.first, first.sequence == sequence else { return .none }
            handshakeSent.removeFirst()
            switch reply {
            case .answered: break
            case .refused: return fail(.refused(first.step))
            case .lost: return .none // dropped already, by whoever freed it
            }
            handshakeLeft -= 1
            guard handshakeLeft == 0 else { return .none }
            if configuration.subscribes { return .subscribe }
            return becomeReady()
        case .ready:
            guard head < commands.count, commands[head].sequence == sequence else { return .none }
            // Moved out, not copied: the queue keeps no reference to what it
            // delivered (a copy here, released when the queue was emptied,
            // cost a retain and a release of everything the entry holds).
            guard let entry = commands[head].entry.take() else { return .none }
            head += 1
            if head == commands.count {
                commands.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64, head * 2 >= commands.count {
                commands.removeFirst(head)
                head = 0
            }
            return .deliver(entry)
        case .idle, .resolving, .closed:
            return .none
        }
    }

    /// The deadline timer fired.
    public mutating func timerFired(now: Clock.Instant) -> Action {
        timerAt = nil
        var earliest = connectDeadline
        // The earliest deadline outstanding: the head's, unless one sent
        // with a shorter timeout is behind it.
        for command in commands[head...] where earliest == nil || command.deadline < earliest! {
            earliest = command.deadline
        }
        guard let earliest else { return .none }
        guard earliest <= now else {
            timerAt = earliest
            return .armTimer(earliest)
        }
        return fail(.timedOut(connecting: state != .ready))
    }

    /// hiredis: a connection went away.
    public mutating func disconnected() -> Action {
        guard state != .closed, state != .idle, state != .resolving else { return .none }
        return fail(.lost)
    }

    /// Drops the connection and tries again after the retry interval.
    public mutating func reset() -> Action {
        guard state == .ready || state == .connecting || state == .handshaking else { return .none }
        return fail(.reset)
    }

    /// Drops the connection for good.
    public mutating func close() -> Action {
        guard state != .closed else { return .none }
        let wasReady = state == .ready
        let failing = takeOutstanding()
        state = .closed
        isWaitingToRetry = false
        return .drop(.closed, failing: failing, retryAfter: nil, wasReady: wasReady)
    }

    // MARK: - Failing

    private mutating func fail(_ reason: DropReason) -> Action {
        let wasReady = state == .ready
        let failing = takeOutstanding()
        state = .idle
        isWaitingToRetry = true
        return .drop(reason, failing: failing, retryAfter: retryDelay(), wasReady: wasReady)
    }

    private mutating func takeOutstanding() -> ArraySlice<Command> {
        let outstanding = commands[head...].compactMap { queued in
            queued.entry.map { Command(sequence: queued.sequence, deadline: queued.deadline, entry: $0) }
        }[...]
        commands = []
        head = 0
        handshakeSent = []
        handshakeLeft = 0
        connectDeadline = nil
        timerAt = nil
        return outstanding
    }

    /// A delay in ``Configuration/retryInterval``, in thousandths of its
    /// spread.
    private mutating func retryDelay() -> Clock.Duration {
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        let lower = configuration.retryInterval.lowerBound
        let spread = configuration.retryInterval.upperBound - lower
        return lower + spread / 1000 * Int(random % 1001)
    }
}

extension RedisConnectionStateMachine.Command: Equatable where Entry: Equatable {}
extension RedisConnectionStateMachine.Action: Equatable where Entry: Equatable {}
