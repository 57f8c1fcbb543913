import CHiredis
import CLibevent
import CRedisShims
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import MonotonicTime

/// One hiredis asynchronous connection to Redis, run by one event loop
/// through hiredis's libevent adapter: no thread of its own, and every
/// callback arrives on that loop.
///
/// The connection connects (and reconnects, at most once a second) on its
/// own, and is ready only once Redis has answered a `PING` on it (after
/// `AUTH` and `SELECT`): a TCP connection that a middlebox accepts while
/// Redis is out of reach never takes a command. A command sent while it is
/// not ready fails at once with ``RedisError/Kind/notConnected``: no call
/// ever waits for a reconnect. Every command has the endpoint's
/// `commandTimeout`; when the oldest outstanding command passes it, the
/// connection is considered stalled: every outstanding command fails with
/// ``RedisError/Kind/timeout``, the connection is dropped (so a reply that
/// comes later is never read, let alone taken for another command's) and
/// made again after the retry interval. TCP keepalive finds a peer that
/// went away while nothing was sent.
///
/// Loop-bound: create it anywhere, then use it only on `loop` (``start()``,
/// ``send(_:completion:)``, ``command(_:)``, ``close()``).
///
/// Its rules (states, handshake, deadlines, which reply is whose, the
/// retry) are ``RedisConnectionStateMachine``'s: this type tells the machine
/// what happened and does what it answers. All of hiredis stays in this
/// file: the context, its callbacks and the `Unmanaged` back-pointer
/// (`redisAsyncContext.data`, unretained: the connection outlives every
/// context it makes, and clears the pointer before freeing one).
public final class RedisConnection: @unchecked Sendable {
    // @unchecked: every mutable field is touched on `loop` only (checked by
    // `preconditionInEventLoop` at each entry point).

    public typealias Completion = (Result<RedisValue, RedisError>) -> Void

    /// What is kept per command sent.
    struct Pending {
        /// The most elements its reply may hold.
        let replyElements: Int
        /// A script's `EVALSHA`, sent again as `EVAL` with the script's
        /// text if Redis answers `NOSCRIPT`.
        let script: (script: RedisScript, command: RedisCommand)?
        let completion: Completion
    }

    typealias StateMachine = RedisConnectionStateMachine<Pending, MonotonicClock>

    public let loop: EventLoop
    private let endpoint: RedisEndpoint
    private let observer: (any RedisConnectionObserver)?
    private let onMessage: ((String, [UInt8]) -> Void)?
    private let channels: [String]

    private var machine: StateMachine
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var deadlineTimer: LoopTimer?
    private var retryTimer: LoopTimer?
    /// Whether this turn's commands are to be written when its callbacks
    /// are done (``flushSoon()``).
    private var flushArmed = false
    /// What the reader may read of the next reply (its element count set
    /// to what the oldest outstanding command asked for); owned here, as
    /// it outlives every context it is attached to.
    private let bounds: UnsafeMutablePointer<gw_redis_bounds>

    /// A connection for commands.
    public init(loop: EventLoop, endpoint: RedisEndpoint, observer: (any RedisConnectionObserver)?) {
        self.loop = loop
        self.endpoint = endpoint
        self.observer = observer
        self.onMessage = nil
        self.channels = []
        self.bounds = Self.makeBounds(elements: 0)
        self.machine = Self.machine(endpoint, subscribes: false)
    }

    /// A subscriber connection: once connected it subscribes to `channels`
    /// and hands every message to `onMessage(channel, payload)`, on `loop`.
    /// It takes no commands. Messages published while it is reconnecting
    /// are lost; whoever waits for one must have a deadline of its own.
    public init(loop: EventLoop, endpoint: RedisEndpoint, observer: (any RedisConnectionObserver)?, subscribingTo channels: [String], onMessage: @escaping (String, [UInt8]) -> Void) {
        self.loop = loop
        self.endpoint = endpoint
        self.observer = observer
        self.onMessage = onMessage
        self.channels = channels
        // Subscription confirmations and messages: three elements each.
        self.bounds = Self.makeBounds(elements: 3)
        self.machine = Self.machine(endpoint, subscribes: true)
    }

    private static func machine(_ endpoint: RedisEndpoint, subscribes: Bool) -> StateMachine {
        StateMachine(
            configuration: .init(
                hasPassword: endpoint.password != nil, selectsDatabase: endpoint.database != 0, subscribes: subscribes,
                connectTimeout: endpoint.connectTimeout, commandTimeout: endpoint.commandTimeout, retryInterval: retryInterval
            ),
            seed: UInt64.random(in: 1 ... .max)
        )
    }

    deinit {
        bounds.deallocate()
    }

    private static func makeBounds(elements: Int) -> UnsafeMutablePointer<gw_redis_bounds> {
        let bounds = UnsafeMutablePointer<gw_redis_bounds>.allocate(capacity: 1)
        bounds.initialize(to: gw_redis_bounds(max_element_bytes: Int(GW_REDIS_MAX_ELEMENT_BYTES), max_elements: Int32(elements)))
        return bounds
    }

    /// The next reply may hold what the oldest outstanding command asked
    /// for (commands connections only: a subscriber's stays at 3).
    private func boundNextReply() {
        guard onMessage == nil else { return }
        bounds.pointee.max_elements = Int32(clamping: machine.nextCommand?.replyElements ?? 0)
    }

    /// Whether commands are sent now (else they fail at once).
    public var isReady: Bool {
        loop.preconditionInEventLoop()
        return machine.isReady
    }

    /// Starts connecting. On `loop`.
    public func start() {
        loop.preconditionInEventLoop()
        perform(machine.start())
    }

    /// Drops the connection now (outstanding commands fail at once with
    /// ``RedisError/Kind/disconnected``) and connects again after the retry
    /// interval, proving itself with a `PING` before it takes a command.
    /// For when another connection to the same Redis found it unreachable:
    /// this one is probably cut off too, and must not cost a call a
    /// timeout to find out. On `loop`.
    public func reset(_ reason: String) {
        loop.preconditionInEventLoop()
        perform(machine.reset(), message: reason)
    }

    /// Drops the connection for good: outstanding commands fail with
    /// ``RedisError/Kind/disconnected``, nothing reconnects. On `loop`.
    public func close() {
        loop.preconditionInEventLoop()
        retryTimer?.cancel()
        retryTimer = nil
        perform(machine.close())
    }

    // MARK: Commands

    /// Sends one command; `completion` runs on `loop` with the reply (a
    /// server error is a `.success(.error(...))`), or at once with
    /// ``RedisError/Kind/notConnected`` when the connection is not ready.
    /// Commands sent in one loop turn go out together (pipelined).
    public func send(_ arguments: [[UInt8]], completion: @escaping Completion) {
        send(RedisCommand(arguments), completion: completion)
    }

    /// ``send(_:completion:)`` of a command already written into one buffer.
    public func send(_ command: RedisCommand, completion: @escaping Completion) {
        send(command, script: nil, completion: completion)
    }

    /// Sends `command`, a script's `EVALSHA` when `script` is given: if
    /// Redis answers `NOSCRIPT` (it does not hold the script yet, after a
    /// restart or a `SCRIPT FLUSH`), the same command goes again as `EVAL`
    /// with the script's text (which also loads it), and `completion`
    /// gets that reply. Kept with the command's entry, not in a closure
    /// around `completion`: no allocation per script sent.
    func send(_ command: RedisCommand, script: RedisScript?, completion: @escaping Completion) {
        loop.preconditionInEventLoop()
        guard machine.isReady, onMessage == nil, let context else {
            completion(.failure(RedisError(.notConnected, "no Redis connection is ready")))
            return
        }
        let sequence = machine.nextSequence()
        guard Self.submit(command, to: context, sequence: sequence) else {
            completion(.failure(RedisError(.disconnected, "hiredis refused the command")))
            return
        }
        let first = machine.nextCommand == nil
        perform(machine.sent(Pending(replyElements: command.replyElements, script: script.map { ($0, command) }, completion: completion), sequence: sequence, now: .now))
        if first { boundNextReply() }
        flushSoon()
    }

    /// Writes the commands of this loop turn once its callbacks are done,
    /// in one `write(2)`, rather than on hiredis's write event: that event
    /// costs two `epoll_ctl` (interest in writing added, then removed) and
    /// one more pass of the loop for every write, and delays the command
    /// by that pass. (With the loop's changelist, the interest hiredis adds
    /// and removes within the turn never reaches epoll.) What the socket
    /// does not take at once waits for the write event, as before.
    private func flushSoon() {
        guard !flushArmed else { return }
        flushArmed = true
        if !loop.execute({ [self] in flush() }) { flushArmed = false }
    }

    private func flush() {
        flushArmed = false
        guard machine.isReady, let context else { return }
        // May end in hiredis's disconnect callback (a failed write), which
        // drops this context: nothing here touches it afterwards.
        redisAsyncHandleWrite(context)
    }

    /// Hands the command to hiredis in the protocol's form (RESP), written
    /// here in one pass into one buffer, which hiredis copies into its
    /// output buffer (`redisAsyncFormattedCommand`). hiredis's own
    /// formatter (`redisAsyncCommandArgv`) builds the same bytes with a
    /// `printf`-style call per argument and a buffer grown as it goes: a
    /// shared-tier miss sends a few dozen arguments, and that formatting
    /// showed in its profile.
    private static func submit(_ command: RedisCommand, to context: UnsafeMutablePointer<redisAsyncContext>, sequence: UInt) -> Bool {
        let wire = Self.wire(command)
        return wire.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { base in
                // The trailing NUL is not sent: hiredis reads the command's
                // name with `strchr`, as in the C string its formatter makes.
                redisAsyncFormattedCommand(context, redisReplyCallback, UnsafeMutableRawPointer(bitPattern: sequence), base, buffer.count - 1) == REDIS_OK
            }
        }
    }

    /// `*n\r\n`, then `$length\r\n{bytes}\r\n` per argument, then a NUL.
    package static func wire(_ command: RedisCommand) -> [UInt8] {
        let lengths = command.lengths
        let bytes = command.bytes
        // At most 20 digits per length, and 5 bytes around it.
        let capacity = bytes.count + 25 * (lengths.count + 1) + 1
        // One pass over raw pointers, the position a local of the innermost
        // closure: a position shared with nested functions was a dynamic
        // exclusivity check per byte written (`swift_beginAccess`, 0.09 µs
        // per shared-tier miss in its profile).
        return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let out = buffer.baseAddress!
            count = bytes.withUnsafeBufferPointer { source in
                lengths.withUnsafeBufferPointer { lengths in
                    var at = header(UInt8(ascii: "*"), lengths.count, at: out)
                    var offset = 0
                    for length in lengths {
                        at += header(UInt8(ascii: "$"), length, at: out + at)
                        if length > 0 {
                            (out + at).initialize(from: source.baseAddress! + offset, count: length)
                            at += length
                            offset += length
                        }
                        out[at] = UInt8(ascii: "\r")
                        out[at + 1] = UInt8(ascii: "\n")
                        at += 2
                    }
                    out[at] = 0
                    return at + 1
                }
            }
        }
    }

    /// Writes `mark`, `value` in decimal and CRLF at `out`; returns how
    /// many bytes it wrote.
    @inline(__always)
    private static func header(_ mark: UInt8, _ value: Int, at out: UnsafeMutablePointer<UInt8>) -> Int {
        out[0] = mark
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        var left = value
        var index = digits
        while index > 0 {
            out[index] = UInt8(ascii: "0") + UInt8(left % 10)
            left /= 10
            index -= 1
        }
        out[digits + 1] = UInt8(ascii: "\r")
        out[digits + 2] = UInt8(ascii: "\n")
        return digits + 3
    }

    // MARK: Connecting

    /// The address of the endpoint's host: itself when numeric, else
    /// looked up by the loop's resolver (``EventLoop/resolver()``, the
    /// upstream's as well), which calls ``resolved(_:)`` back on the loop.
    private func resolve() {
        let host = endpoint.host
        if Self.isNumericAddress(host) {
            perform(machine.resolved(true), address: host)
            return
        }
        guard let resolver = try? loop.resolver() else {
            perform(machine.resolved(false))
            return
        }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        // Retained until the callback, which evdns makes exactly once (at
        // once when it knows the answer already).
        let context = Unmanaged.passRetained(self).toOpaque()
        _ = evdns_getaddrinfo(resolver, host, nil, &hints, redisHostResolved, context)
    }

    /// The loop's resolver answered: `list` is nil when the host has no
    /// address.
    fileprivate func resolved(_ list: UnsafeMutablePointer<addrinfo>?) {
        let address = list.flatMap(Self.preferredAddress)
        perform(machine.resolved(address != nil), address: address)
    }

    private func open(address: String) {
        guard let context = redisAsyncConnect(address, Int32(endpoint.port)) else {
            perform(machine.openFailed(), message: "cannot allocate a Redis connection")
            return
        }
        if context.pointee.err != 0 {
            let message = Self.errorText(context)
            redisAsyncFree(context)
            perform(machine.openFailed(), message: "cannot connect to Redis at \(endpoint.host):\(endpoint.port): \(message)")
            return
        }
        context.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        boundNextReply()
        // A peer gone without a word (a host lost, a NAT entry forgotten)
        // is found even while nothing is sent (hiredis: idle 15 s).
        _ = redisEnableKeepAlive(&context.pointee.c)
        guard gw_redis_libevent_attach(context, loop.base, bounds) == REDIS_OK else {
            context.pointee.data = nil
            redisAsyncFree(context)
            perform(machine.openFailed(), message: "cannot attach the Redis connection to the event loop")
            return
        }
        redisAsyncSetConnectCallback(context, redisConnectCallback)
        redisAsyncSetDisconnectCallback(context, redisDisconnectCallback)
        self.context = context
        guard case .handshake(let deadline) = machine.opened(now: .now) else { return }
        armDeadline(at: deadline)
        // Queued now, sent once connected, answered before anything else.
        // One hiredis refuses is never answered: the deadline drops the
        // connection.
        for step in machine.handshake {
            let command = switch step {
            case .auth: RedisCommand([Array("AUTH".utf8), Array((endpoint.password ?? "").utf8)])
            case .select: RedisCommand([Array("SELECT".utf8), Array(String(endpoint.database).utf8)])
            case .ping: RedisCommand([Array("PING".utf8)])
            }
            let sequence = machine.nextSequence()
            if Self.submit(command, to: context, sequence: sequence) { machine.handshakeSent(step, sequence: sequence) }
        }
    }

    /// hiredis: the TCP connection is made or has failed.
    fileprivate func connected(_ context: UnsafePointer<redisAsyncContext>, ok: Bool) {
        guard UnsafePointer(self.context) == context else { return }
        // hiredis frees a context that failed itself, after this callback.
        perform(machine.connected(ok), message: ok ? nil : "cannot connect to Redis at \(endpoint.host):\(endpoint.port): \(Self.errorText(context))", freeContext: false)
    }

    /// hiredis: a ready connection went away (the server closed it, a read
    /// failed). hiredis frees the context after this callback.
    fileprivate func disconnected(_ context: UnsafePointer<redisAsyncContext>) {
        guard UnsafePointer(self.context) == context else { return }
        let message = Self.errorText(context)
        perform(machine.disconnected(), message: "the Redis connection was lost: \(message.isEmpty ? "closed by the server" : message)", freeContext: false)
    }

    // MARK: Replies and deadlines

    /// hiredis: the reply to the command `sequence` (nil when the context is
    /// being freed and the command will get none).
    fileprivate func replied(_ reply: RedisValue?, sequence: UInt, context: UnsafeMutablePointer<redisAsyncContext>) {
        guard self.context == context else { return }
        let kind: StateMachine.Reply = switch reply {
        case nil: .lost
        case .error?: .refused
        default: .answered
        }
        let action = machine.replied(sequence: sequence, kind)
        if case .deliver = action { boundNextReply() }
        perform(action, reply: reply)
    }

    private static let evalName = Array("EVAL".utf8)

    /// hiredis: a message on a subscribed channel.
    fileprivate func message(_ reply: RedisValue, context: UnsafeMutablePointer<redisAsyncContext>) {
        guard self.context == context, let onMessage else { return }
        // ["message", channel, payload]; subscribe confirmations are skipped.
        guard case .array(let parts) = reply, parts.count == 3, parts[0] == .bulk(Array("message".utf8)),
              let channel = parts[1].bytes, let payload = parts[2].bytes else { return }
        onMessage(String(decoding: channel, as: UTF8.self), payload)
    }

    private func armDeadline(at deadline: MonotonicInstant) {
        deadlineTimer?.cancel()
        deadlineTimer = loop.scheduleTimer(at: deadline) { [self] in
            deadlineTimer = nil
            perform(machine.timerFired(now: .now))
        }
    }

    /// How long after a failed attempt or a lost connection the next
    /// attempt starts: at most one a second (a partitioned Redis costs the
    /// replica no more), and soon enough that the replica uses Redis again
    /// within 2 s of its answering (an attempt under way when it does
    /// gets its `PING` answered at once). Jittered, so a fleet of replicas
    /// does not reconnect in step.
    public static let retryInterval = Duration.milliseconds(1000) ... Duration.milliseconds(1200)

    // MARK: Actions

    /// Does what the machine answered. `message`: the observer's words for
    /// a failure the caller saw (else the machine's reason is worded);
    /// `freeContext` is false inside hiredis's connect and disconnect
    /// callbacks, after which hiredis frees the context itself; `address`:
    /// the host's, once resolved; `reply`: the reply being handed over.
    private func perform(_ action: StateMachine.Action, message: String? = nil, freeContext: Bool = true, address: String? = nil, reply: RedisValue? = nil) {
        switch action {
        case .none:
            break
        case .resolve:
            resolve()
        case .open:
            guard let address else { return }
            open(address: address)
        case .handshake(let deadline):
            armDeadline(at: deadline)
        case .subscribe:
            guard let context else { return }
            for channel in channels where !Self.subscribe(channel, on: context) {
                // Left handshaking: the connect deadline drops it, outside
                // hiredis's callbacks (freeing inside its connect callback
                // is not safe in 0.14).
                return
            }
            perform(machine.subscribed())
        case .ready:
            if endpoint.password != nil { observer?.redisPasswordRefused(loop: loop.name, false) }
            observer?.redisConnected(loop: loop.name)
        case .armTimer(let deadline):
            armDeadline(at: deadline)
        case .deliver(let entry):
            if let script = entry.script, case .error(let message)? = reply, message.hasPrefix("NOSCRIPT") {
                send(script.command.replacingFirstTwo(with: Self.evalName, script.script.body), completion: entry.completion)
                return
            }
            if let reply {
                entry.completion(.success(reply))
            } else {
                entry.completion(.failure(RedisError(.disconnected, "the Redis connection was lost")))
            }
        case .drop(let reason, let failing, let retryAfter, let wasReady):
            if reason == .timedOut(connecting: false) { observer?.redisTimedOut(loop: loop.name) }
            drop(freeContext: freeContext)
            let error = dropError(reason, message: message)
            for command in failing { command.entry.completion(.failure(error)) }
            guard let retryAfter else {
                if wasReady { observer?.redisConnectionClosed(loop: loop.name) }
                return
            }
            if reason == .refused(.auth) { observer?.redisPasswordRefused(loop: loop.name, true) }
            observer?.redisConnectionFailed(loop: loop.name, message: failureMessage(reason, message: message, reply: reply), wasReady: wasReady)
            retryTimer?.cancel()
            retryTimer = loop.scheduleTimer(after: retryAfter) { [self] in
                retryTimer = nil
                perform(machine.retryFired())
            }
        }
    }

    /// Forgets the current context and its deadline timer.
    private func drop(freeContext: Bool) {
        deadlineTimer?.cancel()
        deadlineTimer = nil
        guard let context else { return }
        self.context = nil
        // Its callbacks (NULL replies while it is freed) find no owner.
        context.pointee.data = nil
        if freeContext { redisAsyncFree(context) }
    }

    /// What the commands outstanding on a dropped connection fail with.
    private func dropError(_ reason: StateMachine.DropReason, message: String?) -> RedisError {
        switch reason {
        case .closed: RedisError(.disconnected, "the Redis connection was closed")
        case .reset: RedisError(.disconnected, message ?? "the Redis connection was reset")
        case .timedOut: RedisError(.timeout, "Redis did not answer within \(endpoint.commandTimeout.milliseconds) ms")
        case .lost: RedisError(.disconnected, "the Redis connection was lost")
        case .connectFailed, .unresolved, .openFailed: RedisError(.disconnected, "connecting to Redis failed")
        case .refused(let step): RedisError(.disconnected, "Redis refused \(stepName(step))")
        }
    }

    /// The observer's words for a failure.
    private func failureMessage(_ reason: StateMachine.DropReason, message: String?, reply: RedisValue?) -> String {
        if let message { return message }
        switch reason {
        case .unresolved:
            return "cannot resolve the Redis host '\(endpoint.host)'"
        case .timedOut(connecting: true):
            return "connecting to Redis at \(endpoint.host):\(endpoint.port) took over \(endpoint.connectTimeout.milliseconds) ms"
        case .timedOut(connecting: false):
            return "Redis did not answer within \(endpoint.commandTimeout.milliseconds) ms (GATEWAY_REDIS_TIMEOUT_MS); reconnecting"
        case .refused(let step):
            // Only the reply's error code (WRONGPASS, NOAUTH, ERR) is kept:
            // a server, or something posing as one, may echo the password
            // in the rest.
            var code = "error"
            if case .error(let text)? = reply { code = Self.errorCode(text) }
            if step == .auth {
                return "Redis refused the password (AUTH \(code)): check the password in GATEWAY_REDIS_URL or GATEWAY_REDIS_PASSWORD_FILE"
            }
            return "Redis refused \(stepName(step)) (\(code))"
        case .lost:
            return "the Redis connection was lost"
        case .connectFailed, .openFailed:
            return "cannot connect to Redis at \(endpoint.host):\(endpoint.port)"
        case .reset, .closed:
            return "the Redis connection was reset"
        }
    }

    private func stepName(_ step: StateMachine.HandshakeStep) -> String {
        switch step {
        case .auth: "AUTH"
        case .select: "SELECT \(endpoint.database)"
        case .ping: "PING"
        }
    }

    /// The first word of an error reply when it is a Redis error code
    /// (upper-case letters, at most 32), else `error`: never the rest.
    public static func errorCode(_ message: String) -> String {
        let word = message.prefix { $0 != " " }
        guard (1...32).contains(word.count), word.allSatisfy({ $0.isASCII && $0.isUppercase }) else { return "error" }
        return String(word)
    }

    // MARK: C helpers

    /// `SUBSCRIBE channel`, written by ``wire(_:)`` as every other command
    /// (one encoder); hiredis reads the command's name from those bytes and
    /// keeps `redisMessageCallback` for every message of the channel.
    private static func subscribe(_ channel: String, on context: UnsafeMutablePointer<redisAsyncContext>) -> Bool {
        let wire = Self.wire(RedisCommand([Array("SUBSCRIBE".utf8), Array(channel.utf8)]))
        return wire.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { base in
                redisAsyncFormattedCommand(context, redisMessageCallback, nil, base, buffer.count - 1) == REDIS_OK
            }
        }
    }

    private static func errorText(_ context: UnsafePointer<redisAsyncContext>) -> String {
        guard let text = context.pointee.errstr else { return "" }
        return String(cString: text)
    }

    private static func isNumericAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// An address of `list`, as text, IPv4 first (Redis commonly binds
    /// IPv4 only, and `localhost` may list `::1` first).
    private static func preferredAddress(_ list: UnsafeMutablePointer<addrinfo>) -> String? {
        var first = list
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            if entry.pointee.ai_family == AF_INET {
                first = entry
                break
            }
            cursor = entry.pointee.ai_next
        }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch first.pointee.ai_family {
        case AF_INET:
            var address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            guard inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        case AF_INET6:
            var address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        default:
            return nil
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension RedisValue {
    /// Copies a hiredis reply (which hiredis frees after the callback).
    init(reply: UnsafePointer<redisReply>) {
        let reply = reply.pointee
        switch reply.type {
        case REDIS_REPLY_STRING:
            self = .bulk(reply.str.map { Array(UnsafeRawBufferPointer(start: $0, count: reply.len)) } ?? [])
        case REDIS_REPLY_STATUS:
            self = .status(reply.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: reply.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_ERROR:
            self = .error(reply.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: reply.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_INTEGER:
            self = .integer(Int(reply.integer))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisValue] = []
            elements.reserveCapacity(reply.elements)
            for index in 0..<reply.elements {
                if let element = reply.element[index] {
                    elements.append(RedisValue(reply: element))
                } else {
                    elements.append(.null)
                }
            }
            self = .array(elements)
        default:
            self = .null
        }
    }
}

private func owner(of context: UnsafePointer<redisAsyncContext>) -> RedisConnection? {
    guard let data = context.pointee.data else { return nil }
    return Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue()
}

private func redisReplyCallback(_ context: UnsafeMutablePointer<redisAsyncContext>?, _ reply: UnsafeMutableRawPointer?, _ privdata: UnsafeMutableRawPointer?) {
    guard let context, let connection = owner(of: context) else { return }
    let value = reply.map { RedisValue(reply: $0.assumingMemoryBound(to: redisReply.self)) }
    connection.replied(value, sequence: UInt(bitPattern: privdata), context: context)
}

private func redisMessageCallback(_ context: UnsafeMutablePointer<redisAsyncContext>?, _ reply: UnsafeMutableRawPointer?, _ privdata: UnsafeMutableRawPointer?) {
    guard let context, let reply, let connection = owner(of: context) else { return }
    connection.message(RedisValue(reply: reply.assumingMemoryBound(to: redisReply.self)), context: context)
}

private func redisHostResolved(_ result: Int32, _ list: UnsafeMutablePointer<addrinfo>?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { preconditionFailure("a lookup without its Redis connection") }
    let connection = Unmanaged<RedisConnection>.fromOpaque(context).takeRetainedValue()
    defer { if let list { evutil_freeaddrinfo(list) } }
    connection.resolved(result == 0 ? list : nil)
}

private func redisConnectCallback(_ context: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let context, let connection = owner(of: context) else { return }
    connection.connected(context, ok: status == REDIS_OK)
}

private func redisDisconnectCallback(_ context: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let context, let connection = owner(of: context) else { return }
    connection.disconnected(context)
}
