import CHiredis
import CRedisShims
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

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
/// All of hiredis stays in this file: the context, its callbacks and the
/// `Unmanaged` back-pointer (`redisAsyncContext.data`, unretained: the
/// connection outlives every context it makes, and clears the pointer
/// before freeing one).
public final class RedisConnection: @unchecked Sendable {
    // @unchecked: every mutable field is touched on `loop` only (checked by
    // `preconditionInEventLoop` at each entry point).

    public typealias Completion = (Result<RedisValue, RedisError>) -> Void

    private enum State {
        /// Waiting for the next attempt (a backoff timer is armed), or not
        /// started yet.
        case idle
        /// Resolving the host name off the loop.
        case resolving
        /// TCP connect, `AUTH` and `SELECT` under way.
        case connecting
        case ready
        case closed
    }

    private struct Pending {
        let sequence: UInt
        let deadline: ContinuousClock.Instant
        /// The most elements its reply may hold.
        let replyElements: Int
        /// `AUTH`/`SELECT` of the connection itself.
        let isHandshake: Bool
        /// A script's `EVALSHA`, sent again as `EVAL` with the script's
        /// text if Redis answers `NOSCRIPT`.
        let script: (script: RedisScript, command: RedisCommand)?
        let completion: Completion
    }

    public let loop: EventLoop
    private let endpoint: RedisEndpoint
    private let observer: (any RedisConnectionObserver)?
    private let onMessage: ((String, [UInt8]) -> Void)?
    private let channels: [String]

    private var state = State.idle
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    /// Outstanding commands of `context`, oldest first: replies come in
    /// order, so the head is the one the next reply answers.
    private var pending: [Pending] = []
    private var pendingHead = 0
    private var handshakeLeft = 0
    private var nextSequence: UInt = 1
    private var deadlineTimer: LoopTimer?
    /// When ``deadlineTimer`` fires.
    private var deadlineTimerAt = ContinuousClock.Instant.now
    private var retryTimer: LoopTimer?
    private var connectTimer: LoopTimer?
    /// Whether the connection last dropped was ready, for the observer.
    private var droppedReady = false
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
        bounds.pointee.max_elements = pendingHead < pending.count ? Int32(clamping: pending[pendingHead].replyElements) : 0
    }

    /// Whether commands are sent now (else they fail at once).
    public var isReady: Bool {
        loop.preconditionInEventLoop()
        return state == .ready
    }

    /// Starts connecting. On `loop`.
    public func start() {
        loop.preconditionInEventLoop()
        guard state == .idle, retryTimer == nil else { return }
        connect()
    }

    /// Drops the connection now (outstanding commands fail at once with
    /// ``RedisError/Kind/disconnected``) and connects again after the retry
    /// interval, proving itself with a `PING` before it takes a command.
    /// For when another connection to the same Redis found it unreachable:
    /// this one is probably cut off too, and must not cost a call a
    /// timeout to find out. On `loop`.
    public func reset(_ reason: String) {
        loop.preconditionInEventLoop()
        guard state == .ready || state == .connecting else { return }
        drop(RedisError(.disconnected, reason), freeContext: true)
        failed(reason)
    }

    /// Drops the connection for good: outstanding commands fail with
    /// ``RedisError/Kind/disconnected``, nothing reconnects. On `loop`.
    public func close() {
        loop.preconditionInEventLoop()
        guard state != .closed else { return }
        retryTimer?.cancel()
        retryTimer = nil
        drop(RedisError(.disconnected, "the Redis connection was closed"), freeContext: true)
        if droppedReady { observer?.redisConnectionClosed(loop: loop.name) }
        droppedReady = false
        state = .closed
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
        guard state == .ready, onMessage == nil, let context else {
            completion(.failure(RedisError(.notConnected, "no Redis connection is ready")))
            return
        }
        guard enqueue(command, on: context, deadline: .now + endpoint.commandTimeout, isHandshake: false, replyElements: command.replyElements, script: script, completion: completion) else {
            completion(.failure(RedisError(.disconnected, "hiredis refused the command")))
            return
        }
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
        guard state == .ready, let context else { return }
        // May end in hiredis's disconnect callback (a failed write), which
        // drops this context: nothing here touches it afterwards.
        redisAsyncHandleWrite(context)
    }

    private func enqueue(
        _ command: RedisCommand, on context: UnsafeMutablePointer<redisAsyncContext>, deadline: ContinuousClock.Instant, isHandshake: Bool,
        replyElements: Int = 0, script: RedisScript? = nil, completion: @escaping Completion
    ) -> Bool {
        let sequence = nextSequence
        nextSequence &+= 1
        if nextSequence == 0 { nextSequence = 1 }
        guard Self.submit(command, to: context, sequence: sequence) else { return false }
        track(sequence: sequence, deadline: deadline, isHandshake: isHandshake, replyElements: replyElements, script: script.map { ($0, command) }, completion: completion)
        return true
    }

    /// Records a command sent: its reply is the next after those before it.
    private func track(
        sequence: UInt, deadline: ContinuousClock.Instant, isHandshake: Bool, replyElements: Int,
        script: (script: RedisScript, command: RedisCommand)?, completion: @escaping Completion
    ) {
        pending.append(Pending(sequence: sequence, deadline: deadline, replyElements: replyElements, isHandshake: isHandshake, script: script, completion: completion))
        if pendingHead == pending.count - 1 { boundNextReply() }
        // A command's deadline may come before the one the timer watches
        // (the handshake's, a second or more, right after a reconnect):
        // the timer then moves to it, so every command has its own.
        if deadlineTimer == nil || deadline < deadlineTimerAt {
            deadlineTimer?.cancel()
            armDeadline(at: deadline)
        }
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
        return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            var at = 0
            func put(_ byte: UInt8) {
                buffer[at] = byte
                at += 1
            }
            func put(decimal value: Int) {
                var digits = 1
                var rest = value / 10
                while rest > 0 {
                    digits += 1
                    rest /= 10
                }
                var left = value
                for index in stride(from: at + digits - 1, through: at, by: -1) {
                    buffer[index] = UInt8(ascii: "0") + UInt8(left % 10)
                    left /= 10
                }
                at += digits
            }
            put(UInt8(ascii: "*"))
            put(decimal: lengths.count)
            put(UInt8(ascii: "\r"))
            put(UInt8(ascii: "\n"))
            bytes.withUnsafeBufferPointer { source in
                var offset = 0
                for length in lengths {
                    put(UInt8(ascii: "$"))
                    put(decimal: length)
                    put(UInt8(ascii: "\r"))
                    put(UInt8(ascii: "\n"))
                    if length > 0 {
                        (buffer.baseAddress! + at).initialize(from: source.baseAddress! + offset, count: length)
                        at += length
                        offset += length
                    }
                    put(UInt8(ascii: "\r"))
                    put(UInt8(ascii: "\n"))
                }
            }
            put(0)
            count = at
        }
    }

    // MARK: Connecting

    private func connect() {
        state = .resolving
        let host = endpoint.host
        if Self.isNumericAddress(host) {
            open(address: host)
            return
        }
        // getaddrinfo blocks: never on a loop.
        DispatchQueue.global().async { [self] in
            let address = Self.resolve(host)
            loop.execute { [self] in
                guard state == .resolving else { return }
                if let address {
                    open(address: address)
                } else {
                    failed("cannot resolve the Redis host '\(host)'")
                }
            }
        }
    }

    private func open(address: String) {
        state = .connecting
        guard let context = redisAsyncConnect(address, Int32(endpoint.port)) else {
            failed("cannot allocate a Redis connection")
            return
        }
        if context.pointee.err != 0 {
            let message = Self.errorText(context)
            redisAsyncFree(context)
            failed("cannot connect to Redis at \(endpoint.host):\(endpoint.port): \(message)")
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
            failed("cannot attach the Redis connection to the event loop")
            return
        }
        redisAsyncSetConnectCallback(context, redisConnectCallback)
        redisAsyncSetDisconnectCallback(context, redisDisconnectCallback)
        self.context = context
        let deadline = ContinuousClock.now + endpoint.connectTimeout
        connectTimer = loop.scheduleTimer(at: deadline) { [self] in
            connectTimer = nil
            guard state == .connecting else { return }
            drop(RedisError(.timeout, "connecting to Redis timed out"), freeContext: true)
            failed("connecting to Redis at \(endpoint.host):\(endpoint.port) took over \(endpoint.connectTimeout.milliseconds) ms")
        }
        // Queued now, sent once connected, answered before anything else.
        handshakeLeft = 0
        if let password = endpoint.password {
            handshakeLeft += 1
            _ = enqueue(RedisCommand([Array("AUTH".utf8), Array(password.utf8)]), on: context, deadline: deadline, isHandshake: true) { [self] result in
                handshakeReplied(result, step: "AUTH")
            }
        }
        if endpoint.database != 0 {
            handshakeLeft += 1
            _ = enqueue(RedisCommand([Array("SELECT".utf8), Array(String(endpoint.database).utf8)]), on: context, deadline: deadline, isHandshake: true) { [self] result in
                handshakeReplied(result, step: "SELECT \(endpoint.database)")
            }
        }
        // Redis itself must answer before the connection takes a command:
        // a proxy or load balancer accepts TCP connections while the
        // server behind it is cut off.
        handshakeLeft += 1
        _ = enqueue(RedisCommand([Array("PING".utf8)]), on: context, deadline: deadline, isHandshake: true) { [self] result in
            handshakeReplied(result, step: "PING")
        }
    }

    /// hiredis: the TCP connection is made or has failed.
    fileprivate func connected(_ context: UnsafePointer<redisAsyncContext>, ok: Bool) {
        guard UnsafePointer(self.context) == context else { return }
        guard ok else {
            let message = Self.errorText(context)
            // hiredis frees the context itself after this callback.
            drop(RedisError(.disconnected, "connecting to Redis failed"), freeContext: false)
            failed("cannot connect to Redis at \(endpoint.host):\(endpoint.port): \(message)")
            return
        }
    }

    private func handshakeReplied(_ result: Result<RedisValue, RedisError>, step: String) {
        guard state == .connecting else { return }
        switch result {
        case .success(.error(let message)):
            // Only the reply's error code (WRONGPASS, NOAUTH, ERR) is kept:
            // a server, or something posing as one, may echo the password
            // in the rest.
            drop(RedisError(.disconnected, "Redis refused \(step)"), freeContext: true)
            if step == "AUTH" {
                observer?.redisPasswordRefused(loop: loop.name, true)
                failed("Redis refused the password (AUTH \(Self.errorCode(message))): check the password in GATEWAY_REDIS_URL or GATEWAY_REDIS_PASSWORD_FILE")
            } else {
                failed("Redis refused \(step) (\(Self.errorCode(message)))")
            }
        case .success:
            handshakeLeft -= 1
            if handshakeLeft == 0 { becomeReady() }
        case .failure(let error):
            // Already dropped (timeout or disconnect) by whoever failed it.
            _ = error
        }
    }

    private func becomeReady() {
        if let context, onMessage != nil {
            for channel in channels where !Self.subscribe(channel, on: context) {
                // Left connecting: the connect timer drops it, outside
                // hiredis's callbacks (freeing inside its connect callback
                // is not safe in 0.14).
                return
            }
        }
        connectTimer?.cancel()
        connectTimer = nil
        state = .ready
        if endpoint.password != nil { observer?.redisPasswordRefused(loop: loop.name, false) }
        observer?.redisConnected(loop: loop.name)
    }

    /// hiredis: a ready connection went away (the server closed it, a read
    /// failed). hiredis frees the context after this callback.
    fileprivate func disconnected(_ context: UnsafePointer<redisAsyncContext>) {
        guard UnsafePointer(self.context) == context, state != .closed else { return }
        let message = Self.errorText(context)
        drop(RedisError(.disconnected, "the Redis connection was lost"), freeContext: false)
        failed("the Redis connection was lost: \(message.isEmpty ? "closed by the server" : message)")
    }

    // MARK: Replies and deadlines

    /// hiredis: the reply to the command `sequence` (nil when the context is
    /// being freed and the command will get none).
    fileprivate func replied(_ reply: RedisValue?, sequence: UInt, context: UnsafeMutablePointer<redisAsyncContext>) {
        guard self.context == context, pendingHead < pending.count, pending[pendingHead].sequence == sequence else { return }
        let entry = pending[pendingHead]
        pendingHead += 1
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingHead = 0
        } else if pendingHead >= 64, pendingHead * 2 >= pending.count {
            pending.removeFirst(pendingHead)
            pendingHead = 0
        }
        boundNextReply()
        if let script = entry.script, case .error(let message)? = reply, message.hasPrefix("NOSCRIPT") {
            send(script.command.replacingFirstTwo(with: Self.evalName, script.script.body), completion: entry.completion)
            return
        }
        if let reply {
            entry.completion(.success(reply))
        } else {
            entry.completion(.failure(RedisError(.disconnected, "the Redis connection was lost")))
        }
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

    private func armDeadline(at deadline: ContinuousClock.Instant) {
        deadlineTimerAt = deadline
        deadlineTimer = loop.scheduleTimer(at: deadline) { [self] in
            deadlineTimer = nil
            guard pendingHead < pending.count else { return }
            // The earliest deadline outstanding: the head's, unless a
            // handshake command with a longer one is still ahead of others.
            let head = pending[pendingHead...].min { $0.deadline < $1.deadline }!
            if head.deadline <= .now {
                let wasConnecting = state == .connecting
                if state == .ready { observer?.redisTimedOut(loop: loop.name) }
                drop(RedisError(.timeout, "Redis did not answer within \(endpoint.commandTimeout.milliseconds) ms"), freeContext: true)
                failed(wasConnecting
                    ? "connecting to Redis at \(endpoint.host):\(endpoint.port) took over \(endpoint.connectTimeout.milliseconds) ms"
                    : "Redis did not answer within \(endpoint.commandTimeout.milliseconds) ms (GATEWAY_REDIS_TIMEOUT_MS); reconnecting")
            } else {
                armDeadline(at: head.deadline)
            }
        }
    }

    /// Forgets the current context: every outstanding command fails with
    /// `error`. `freeContext` is false inside hiredis's connect and
    /// disconnect callbacks, after which hiredis frees it itself.
    private func drop(_ error: RedisError, freeContext: Bool) {
        let context = self.context
        self.context = nil
        let outstanding = pending[pendingHead...]
        pending = []
        pendingHead = 0
        deadlineTimer?.cancel()
        deadlineTimer = nil
        connectTimer?.cancel()
        connectTimer = nil
        if let context {
            // Its callbacks (NULL replies while it is freed) find no owner.
            context.pointee.data = nil
            if freeContext { redisAsyncFree(context) }
        }
        if state == .ready { droppedReady = true }
        if state != .closed { state = .idle }
        for entry in outstanding { entry.completion(.failure(error)) }
    }

    /// How long after a failed attempt or a lost connection the next
    /// attempt starts: at most one a second (a partitioned Redis costs the
    /// replica no more), and soon enough that the replica uses Redis again
    /// within 2 s of its answering (an attempt under way when it does
    /// gets its `PING` answered at once). Jittered, so a fleet of replicas
    /// does not reconnect in step.
    public static let retryInterval = Duration.milliseconds(1000) ... Duration.milliseconds(1200)

    /// An attempt failed or a connection was lost: tell the observer and
    /// try again after ``retryInterval``, in the background.
    private func failed(_ message: String) {
        guard state != .closed else { return }
        state = .idle
        let wasReady = droppedReady
        droppedReady = false
        observer?.redisConnectionFailed(loop: loop.name, message: message, wasReady: wasReady)
        let delay = Duration.milliseconds(Int.random(in: Int(Self.retryInterval.lowerBound.milliseconds) ... Int(Self.retryInterval.upperBound.milliseconds)))
        retryTimer?.cancel()
        retryTimer = loop.scheduleTimer(after: delay) { [self] in
            retryTimer = nil
            guard state == .idle else { return }
            connect()
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

    /// An address of `host`, as text, IPv4 first (Redis commonly binds
    /// IPv4 only, and `localhost` may list `::1` first); blocking.
    private static func resolve(_ host: String) -> String? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let list = result else { return nil }
        defer { freeaddrinfo(result) }
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

private func redisConnectCallback(_ context: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let context, let connection = owner(of: context) else { return }
    connection.connected(context, ok: status == REDIS_OK)
}

private func redisDisconnectCallback(_ context: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let context, let connection = owner(of: context) else { return }
    connection.disconnected(context)
}
