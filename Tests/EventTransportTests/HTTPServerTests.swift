@testable import EventTransport
import Foundation
import Logging
import Synchronization
import Testing

/// Counts how many ``HeldToken``s have been let go.
final class ReleaseCount: Sendable {
    let value = Atomic<Int>(0)
    var current: Int { value.load(ordering: .acquiring) }
}

/// What a response asks its connection to hold until it is written.
final class HeldToken: Sendable {
    private let count: ReleaseCount
    init(_ count: ReleaseCount) { self.count = count }
    deinit { count.value.add(1, ordering: .releasing) }
}

/// A real ``HTTPServer`` on a free port, answering:
/// - `/echo`: `200` with `METHOD path bodyLength`;
/// - `/drop`: never answers (the responder is dropped);
/// - `/deferred`: `first` from another thread, then `second` (ignored);
/// - `/deferred-drop`: a deferred responder dropped unsent;
/// - `/gated`: `gated`, from a callback, once the test opens `gate`;
/// - `/big`: from the loop's queue (after the handler returned), an 8 MiB
///   body;
/// - `/held`: a 32 MiB body (more than the socket buffers take) with a
///   ``HeldToken`` to keep until it is written;
/// - `/until-client-stops`: waits until its connection says the client
///   stopped (``HTTPDeferredResponder/whenClientStops(_:)``), counts it
///   (`clientStops`), then answers `client stopped`;
///
/// - `/stall`: blocks its loop until the test opens `stall`, then answers
///   `stalled` (so that other clients' bytes arrive together);
/// and records every path it is asked for, in order (`handled`).
final class ServerUnderTest: Sendable {
    let group: EventLoopGroup
    let server: HTTPServer
    let port: Int
    let heldReleases = ReleaseCount()
    let clientStops = ReleaseCount()
    let gate = Gate()
    let stall = Gate()
    private let handledPaths = PathLog()

    var handled: [String] { handledPaths.all }

    init(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in }, problemResponder: @escaping HTTPProblemResponder = HTTPServer.problemResponse) throws {
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        configure(&configuration)
        group = try EventLoopGroup(count: 1, namePrefix: "http-test")
        let heldReleases = self.heldReleases
        let clientStops = self.clientStops
        let handledPaths = self.handledPaths
        let gate = self.gate
        let stall = self.stall
        server = HTTPServer(group: group, configuration: configuration, logger: Logger(label: "http-test"), problemResponder: problemResponder) { request, responder in
            handledPaths.append(request.path)
            switch request.path {
            case "/stall":
                stall.block()
                responder.send(HTTPResponse(status: 200, body: Array("stalled".utf8)))
            case "/drop":
                _ = consume responder
            case "/deferred":
                let answer = responder.deferred()
                Thread.detachNewThread {
                    answer.send(HTTPResponse(status: 200, body: Array("first".utf8)))
                    answer.send(HTTPResponse(status: 200, body: Array("second".utf8)))
                }
            case "/deferred-drop":
                _ = responder.deferred()
            case "/gated":
                let answer = responder.deferred()
                gate.whenOpen {
                    answer.send(HTTPResponse(status: 200, body: Array("gated".utf8)))
                }
            case "/big":
                let answer = responder.deferred()
                _ = request.loop.execute {
                    answer.send(HTTPResponse(status: 200, body: [UInt8](repeating: 0x61, count: 8 << 20)))
                }
            case "/until-client-stops":
                let answer = responder.deferred()
                answer.whenClientStops {
                    clientStops.value.add(1, ordering: .releasing)
                    answer.send(HTTPResponse(status: 200, body: Array("client stopped".utf8)))
                }
            case "/held":
                responder.send(HTTPResponse(status: 200, body: [UInt8](repeating: 0x61, count: 32 << 20), heldUntilWritten: HeldToken(heldReleases)))
            case "/held16":
                responder.send(HTTPResponse(status: 200, body: [UInt8](repeating: 0x62, count: 16 << 20), heldUntilWritten: HeldToken(heldReleases)))
            default:
                responder.send(HTTPResponse(status: 200, headers: ["Content-Type": "text/plain"], body: Array("\(request.method) \(request.path) \(request.body.count)".utf8)))
            }
        }
        port = try server.start()
    }

    /// Returns once the server's one loop has polled again after everything
    /// sent so far reached it: a request on a new connection is answered,
    /// and the loop reads every socket that was readable in that poll before
    /// the work the test queues next (a gate opened from the test runs on a
    /// later turn).
    func answerAfterTheLoopHasRead() {
        guard let barrier = try? RawSocket(port: port) else { return }
        barrier.send("GET /barrier HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = barrier.readResponses(1)
    }

    func stop() {
        gate.open()
        stall.open()
        server.stop()
        group.shutdown()
    }
}

/// Held shut until the test opens it: answers wait on it (`whenOpen`, a
/// callback) or hold their loop's thread (`block`), so a test orders
/// what it sends against them by events, not delays.
final class Gate: Sendable {
    private struct State {
        var open = false
        var waiters: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())
    private let opened = DispatchSemaphore(value: 0)

    func open() {
        let waiters = state.withLock { state -> [@Sendable () -> Void] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        waiters.forEach { $0() }
        opened.signal()
    }

    /// Calls `callback` once the gate is open (at once when it is).
    func whenOpen(_ callback: @escaping @Sendable () -> Void) {
        let isOpen = state.withLock { state -> Bool in
            if !state.open { state.waiters.append(callback) }
            return state.open
        }
        if isOpen { callback() }
    }

    /// Holds the calling thread until `open()`, 20 s at most.
    func block() {
        _ = opened.wait(timeout: .now() + 20)
    }
}

/// The paths a server was asked for, in order.
final class PathLog: Sendable {
    private let paths = Mutex<[String]>([])
    var all: [String] { paths.withLock { $0 } }
    func append(_ path: String) { paths.withLock { $0.append(path) } }
}

/// Polls `condition` for up to `seconds` (ten by default, for a loaded
/// machine under a sanitizer; no deadline under test is near as long):
/// waits for an event, the 10 ms sleep is only the poll's interval.
func eventually(within seconds: Int = 10, _ condition: () -> Bool) async -> Bool {
    for _ in 0..<(seconds * 100) {
        if condition() { return true }
        // Polls for the event (`condition`), `seconds` at most: the sleep is only the poll's interval.
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Sends `GET path` on a new connection, reads the answer's first bytes,
/// runs `whileOpen`, and hangs up with the rest unread. Returns the start
/// of the status line.
func hangUpMidAnswer(_ path: String, port: Int, whileOpen: () -> Void = {}) throws -> String {
    let socket = try RawSocket(port: port)
    socket.send("GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n")
    var start = [UInt8](repeating: 0, count: 100)
    _ = start.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, 0) }
    withExtendedLifetime(socket) { whileOpen() }
    return String(decoding: start.prefix(15), as: UTF8.self)
}

func body(of response: String) -> String {
    guard let range = response.range(of: "\r\n\r\n") else { return "" }
    return String(response[range.upperBound...])
}

func statusLine(of response: String) -> String {
    response.components(separatedBy: "\r\n").first ?? ""
}

@Suite(.serialized) struct HTTPServerTests {
    @Test func aFramingErrorIsAnsweredInJSONAndTheConnectionCloses() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 30\r\n\r\n{}GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        let reading = socket.readToEnd()
        #expect(statusLine(of: reading.text) == "HTTP/1.1 400 Bad Request")
        #expect(reading.text.contains("\r\nConnection: close\r\n"))
        #expect(reading.text.contains("\r\nContent-Type: application/json\r\n"))
        #expect(body(of: reading.text) == #"{"error":{"status":400,"message":"more than one Content-Length field"}}"#)
        #expect(reading.end == .closed)

        let next = try RawSocket(port: subject.port)
        next.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(next.readResponses(1).map(body(of:)) == ["GET /echo 0"])
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\nPOST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcPUT /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n")
        #expect(socket.readResponses(3).map(body(of:)) == ["GET /echo 0", "POST /echo 3", "PUT /echo 2"])
    }

    @Test func aRequestSentWhileAnotherIsAnsweredWaitsItsTurn() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("GET /gated HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually(within: 20) { subject.handled == ["/gated"] })
        socket.send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")
        subject.answerAfterTheLoopHasRead()
        subject.gate.open()
        #expect(socket.readResponses(2).map(body(of:)) == ["gated", "POST /echo 3"])
    }

    @Test func aClientThatHalfClosesAfterItsRequestStillGetsTheAnswer() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("GET /gated HTTP/1.1\r\nHost: a\r\n\r\n")
        shutdown(socket.fd, Int32(SHUT_WR))
        #expect(await eventually(within: 20) { subject.handled == ["/gated"] })
        subject.answerAfterTheLoopHasRead()
        subject.gate.open()
        let reading = socket.readToEnd()
        #expect(body(of: reading.text) == "gated")
        #expect(reading.text.contains("\r\nConnection: close\r\n"))
        #expect(reading.end == .closed)
        #expect(await eventually { subject.server.openConnections == 0 })
    }

    /// The read deadline runs from a request's first byte: dripping bytes
    /// does not extend it.
    @Test func aRequestDrippedPastTheReadDeadlineGets408() async throws {
        let subject = try ServerUnderTest { $0.readTimeout = .milliseconds(300) }
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        var dripped = 0
        for byte in "GET /echo HTTP/1.1\r\nHost: a\r\n".utf8 {
            guard socket.send([byte]) else { break }
            dripped += 1
            // Wall clock: the behaviour under test is the server's real-time read deadline (a libevent timer).
            try await Task.sleep(for: .milliseconds(50))
            if dripped == 20 { break }
        }
        let reading = socket.readToEnd()
        #expect(statusLine(of: reading.text) == "HTTP/1.1 408 Request Timeout")
        #expect(body(of: reading.text) == #"{"error":{"status":408,"message":"the request's header and body did not arrive within 300 ms"}}"#)
        #expect(reading.end == .closed)
    }

    @Test func anIdleConnectionIsClosedAfterTheIdleDeadline() async throws {
        let subject = try ServerUnderTest { $0.idleTimeout = .milliseconds(200) }
        defer { subject.stop() }
        let silent = try RawSocket(port: subject.port)
        #expect(silent.readToEnd().text == "")
        let served = try RawSocket(port: subject.port)
        served.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        let reading = served.readToEnd()
        #expect(body(of: reading.text) == "GET /echo 0")
        #expect(reading.end == .closed)
        #expect(await eventually { subject.server.openConnections == 0 })
    }

    /// A connection that sends nothing is closed at the read deadline when
    /// it is shorter than the idle one: an idle flood cannot hold the cap.
    @Test func aConnectionThatSendsNothingIsClosedAtTheReadDeadline() async throws {
        let subject = try ServerUnderTest {
            $0.readTimeout = .milliseconds(300)
            $0.idleTimeout = .seconds(60)
        }
        defer { subject.stop() }
        let silent = try RawSocket(port: subject.port, timeoutSeconds: 10)
        #expect(silent.readToEnd() == Reading(text: "", end: .closed))
        #expect(await eventually { subject.server.openConnections == 0 })
        // After a first request, the idle deadline applies again: the
        // kept-alive connection outlives the read deadline.
        let kept = try RawSocket(port: subject.port)
        kept.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(kept.readResponses(1).map(body(of:)) == ["GET /echo 0"])
        // Wall clock: that the real-time read deadline (300 ms) does not close a kept-alive connection can only be seen by letting it pass.
        try await Task.sleep(for: .milliseconds(600))
        kept.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(kept.readResponses(1).map(body(of:)) == ["GET /echo 0"])
    }

    /// A client pipelining many requests gets at most 16 handled per turn
    /// of the loop; another client whose request arrived meanwhile is
    /// served between them, and every pipelined request is still answered,
    /// in order.
    @Test func pipelinedRequestsTakeTurnsWithOtherConnections() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let staller = try RawSocket(port: subject.port)
        let pipeliner = try RawSocket(port: subject.port)
        let other = try RawSocket(port: subject.port)
        staller.send("GET /stall HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually(within: 20) { subject.handled == ["/stall"] })
        // While the loop is held, both clients' bytes arrive: the
        // pipeliner's first. (On loopback a send has reached the server's
        // socket when it returns.)
        pipeliner.send(String(repeating: "GET /a HTTP/1.1\r\nHost: a\r\n\r\n", count: 200))
        other.send("GET /b HTTP/1.1\r\nHost: a\r\n\r\n")
        subject.stall.open()
        #expect(staller.readResponses(1).map(body(of:)) == ["stalled"])
        #expect(other.readResponses(1).map(body(of:)) == ["GET /b 0"])
        let answers = pipeliner.readResponses(200)
        #expect(answers.count == 200)
        #expect(answers.allSatisfy { body(of: $0) == "GET /a 0" })
        let order = subject.handled
        let position = try #require(order.firstIndex(of: "/b"))
        #expect(position <= 1 + 16, "the other client waited for \(position - 1) pipelined requests")
        #expect(order.count == 202)
    }

    /// The server's own answers (a dropped responder's `500`, the `503`
    /// over the cap) go through the problem responder, so they carry what
    /// it adds, such as the gateway's `X-Request-Id`.
    @Test func theServersOwnAnswersGoThroughTheProblemResponder() async throws {
        let subject = try ServerUnderTest({ $0.maxConnections = 1 }, problemResponder: { error in
            var headers = HTTPServer.problemResponse(error).headers
            headers.add("X-Request-Id", error.requestHeaders?["X-Request-Id"] ?? "fresh-id")
            return HTTPResponse(status: error.status, headers: headers, body: HTTPServer.problemResponse(error).body)
        })
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("GET /drop HTTP/1.1\r\nHost: a\r\nX-Request-Id: caller-7\r\n\r\n")
        let dropped = try #require(socket.readResponses(1).first)
        #expect(statusLine(of: dropped) == "HTTP/1.1 500 Internal Server Error")
        #expect(dropped.contains("\r\nX-Request-Id: caller-7\r\n"))
        #expect(body(of: dropped) == #"{"error":{"status":500,"message":"the request was not answered"}}"#)

        let refused = try RawSocket(port: subject.port).readToEnd()
        #expect(statusLine(of: refused.text) == "HTTP/1.1 503 Service Unavailable")
        #expect(refused.text.contains("\r\nX-Request-Id: fresh-id\r\n"))
        #expect(refused.text.contains("\r\nConnection: close\r\n"))
        #expect(body(of: refused.text) == #"{"error":{"status":503,"message":"too many connections; retry later"}}"#)
    }

    @Test func connectionsPastTheCapAreTold503AndClosed() async throws {
        let subject = try ServerUnderTest { $0.maxConnections = 2 }
        defer { subject.stop() }
        var first: RawSocket? = try RawSocket(port: subject.port)
        let second = try RawSocket(port: subject.port)
        for socket in [first!, second] {
            socket.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(socket.readResponses(1).count == 1)
        }
        #expect(subject.server.openConnections == 2)

        let third = try RawSocket(port: subject.port)
        let refused = third.readToEnd()
        #expect(statusLine(of: refused.text) == "HTTP/1.1 503 Service Unavailable")
        #expect(body(of: refused.text) == #"{"error":{"status":503,"message":"too many connections; retry later"}}"#)
        #expect(subject.server.rejectedConnections == 1)
        #expect(subject.server.openConnections == 2)

        // A place frees up: the next connection is served.
        first = nil
        #expect(await eventually { subject.server.openConnections == 1 })
        let fourth = try RawSocket(port: subject.port)
        fourth.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(fourth.readResponses(1).map(body(of:)) == ["GET /echo 0"])
        _ = first
    }

    /// `.closeIdlest` (the admin listener): a connection past the cap is
    /// served, and one already open makes room: first one with no request
    /// in progress (the one waiting longest), then one whose request is
    /// still arriving; never one whose request is being answered.
    @Test func pastTheCapTheConnectionIdleLongestMakesRoom() async throws {
        let subject = try ServerUnderTest {
            $0.maxConnections = 3
            $0.whenFull = .closeIdlest
        }
        defer { subject.stop() }
        // A request answered, then the head of the next one, cut short.
        let dripping = try RawSocket(port: subject.port)
        dripping.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\nGET /echo HTTP/1.1\r\n")
        #expect(dripping.readResponses(1).map(body(of:)) == ["GET /echo 0"])
        let idle = try RawSocket(port: subject.port)
        idle.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(idle.readResponses(1).count == 1)
        var busy: RawSocket? = try RawSocket(port: subject.port)
        busy?.send("GET /until-client-stops HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually { subject.handled.contains("/until-client-stops") })

        // Idle beats dripping, though the dripping one is older.
        let fourth = try RawSocket(port: subject.port)
        #expect(idle.readToEnd() == .init(text: "", end: .closed))
        // A new connection that has sent nothing is idle too.
        let fifth = try RawSocket(port: subject.port)
        #expect(fourth.readToEnd() == .init(text: "", end: .closed))
        fifth.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\nGET /echo HTTP/1.1\r\n")
        #expect(fifth.readResponses(1).count == 1)
        // Now only requests arriving and one being answered: the request
        // arriving longest goes.
        let sixth = try RawSocket(port: subject.port)
        #expect(dripping.readToEnd() == .init(text: "", end: .closed))
        sixth.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(sixth.readResponses(1).map(body(of:)) == ["GET /echo 0"])

        #expect(subject.server.openConnections == 3)
        #expect(subject.server.rejectedConnections == 0)
        #expect(subject.clientStops.current == 0)
        fifth.send("Host: a\r\n\r\n")
        #expect(fifth.readResponses(1).map(body(of:)) == ["GET /echo 0"])
        // The answer in progress ends with its client, before the server:
        // nothing of it is left waiting at exit.
        busy = nil
        #expect(await eventually(within: 10) { subject.clientStops.current == 1 })
    }

    /// Answers held for clients that do not read them are bounded in total
    /// (`maxUnwrittenBytes`): past the bound, the connection with the most
    /// bytes still to write is reset and what its answer held let go; the
    /// others are served on. (The write deadline is far away here: without
    /// the bound, the first client would read its whole answer.)
    @Test func pastTheBoundOfUnreadAnswersTheLargestIsReset() async throws {
        let subject = try ServerUnderTest {
            $0.maxUnwrittenBytes = 40 << 20
            $0.writeTimeout = .seconds(60)
        }
        defer { subject.stop() }
        let first = try RawSocket(port: subject.port)
        first.send("GET /held HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually { subject.handled.contains("/held") })
        // 32 MiB waits for the first client; 16 MiB more is over the bound.
        let second = try RawSocket(port: subject.port)
        second.send("GET /held16 HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually { subject.handled.contains("/held16") })

        let cut = first.readToEnd()
        #expect(cut.end == .reset)
        #expect(cut.text.utf8.count < 32 << 20)
        #expect(await eventually { subject.heldReleases.current == 1 })
        let answer = second.readResponses(1)
        #expect(answer.first.map(body(of:))?.utf8.count == 16 << 20)
        #expect(await eventually { subject.heldReleases.current == 2 })
        #expect(subject.server.openConnections == 1)
    }

    /// nginx's lingering close: the client sends its whole oversized body
    /// without waiting, and still reads the 413 rather than a reset.
    @Test func anOversizedBodySentInOneGoStillReadsThe413() async throws {
        let subject = try ServerUnderTest { $0.limits.maxBodyBytes = 1024 }
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        let payload = Array("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4194304\r\n\r\n".utf8) + [UInt8](repeating: 0x20, count: 4 << 20)
        let sender = Thread { socket.send(payload) }
        sender.start()
        let reading = socket.readToEnd()
        #expect(statusLine(of: reading.text) == "HTTP/1.1 413 Content Too Large")
        #expect(body(of: reading.text) == #"{"error":{"status":413,"message":"the request body is larger than 1024 bytes"}}"#)
        #expect(reading.end == .closed)
    }

    @Test func expectContinueGetsAnInterimAnswerThenTheAnswer() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        var interim = [UInt8](repeating: 0, count: 25)
        let count = interim.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, Int32(MSG_WAITALL)) }
        #expect(count == 25)
        #expect(String(decoding: interim, as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        socket.send("{}")
        #expect(socket.readResponses(1).map(body(of:)) == ["POST /echo 2"])
    }

    @Test func aClientThatHangsUpMidAnswerLeavesTheServerServing() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        // Most of the 8 MiB unread.
        #expect(try hangUpMidAnswer("/big", port: subject.port) == "HTTP/1.1 200 OK")
        #expect(await eventually { subject.server.openConnections == 0 })
        let next = try RawSocket(port: subject.port)
        next.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(next.readResponses(1).map(body(of:)) == ["GET /echo 0"])
    }

    /// An answer larger than the socket takes at once is written whole from
    /// the response's own bytes, and what the response asked to be held is
    /// let go once the last byte is written, not before.
    @Test func whatAnAnswerHoldsIsLetGoOnceItsLastByteIsWritten() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("GET /held HTTP/1.1\r\nHost: a\r\n\r\n")
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var headEnd: Int?
        while headEnd == nil {
            let count = buffer.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, 0) }
            try #require(count > 0)
            received += buffer[..<count]
            headEnd = received.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound
        }
        let head = String(decoding: received[..<headEnd!], as: UTF8.self)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(head.contains("Content-Length: 33554432\r\n"))
        // 32 MiB do not fit the socket buffers: the answer is still being written.
        #expect(subject.heldReleases.current == 0)
        // Compared with memcmp: a closure per byte of 32 MiB took seconds
        // under ThreadSanitizer and starved the timing-bound suites beside it.
        let expected = [UInt8](repeating: 0x61, count: buffer.count)
        func allA(_ bytes: ArraySlice<UInt8>) -> Bool {
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let length = min(expected.count, raw.count - offset)
                    guard memcmp(raw.baseAddress! + offset, expected, length) == 0 else { return false }
                    offset += length
                }
                return true
            }
        }
        var bodyBytes = received.count - headEnd!
        var everyByteIsA = allA(received[headEnd!...])
        while bodyBytes < 32 << 20 {
            let count = buffer.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, 0) }
            try #require(count > 0)
            bodyBytes += count
            everyByteIsA = everyByteIsA && allA(buffer[..<count])
        }
        #expect(bodyBytes == 32 << 20)
        #expect(everyByteIsA)
        #expect(await eventually { subject.heldReleases.current == 1 })
        socket.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(socket.readResponses(1).map(body(of:)) == ["GET /echo 0"])
    }

    @Test func whatAnAnswerHoldsIsLetGoWhenTheClientHangsUpMidAnswer() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        // Most of the 32 MiB unread.
        let status = try hangUpMidAnswer("/held", port: subject.port) {
            #expect(subject.heldReleases.current == 0)
        }
        #expect(status == "HTTP/1.1 200 OK")
        #expect(await eventually { subject.heldReleases.current == 1 })
        #expect(await eventually { subject.server.openConnections == 0 })
    }

    @Test func aResponderDroppedWithoutAnsweringAnswers500() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("GET /drop HTTP/1.1\r\nHost: a\r\n\r\nGET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        let responses = socket.readResponses(2)
        #expect(responses.map(statusLine(of:)) == ["HTTP/1.1 500 Internal Server Error", "HTTP/1.1 200 OK"])
        #expect(responses.first.map(body(of:)) == #"{"error":{"status":500,"message":"the request was not answered"}}"#)
    }

    @Test func aDeferredAnswerIsSentOnceFromAnyThreadAndOneDroppedAnswers500() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("GET /deferred HTTP/1.1\r\nHost: a\r\n\r\nGET /deferred-drop HTTP/1.1\r\nHost: a\r\n\r\nGET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        let responses = socket.readResponses(3)
        #expect(responses.map(statusLine(of:)) == ["HTTP/1.1 200 OK", "HTTP/1.1 500 Internal Server Error", "HTTP/1.1 200 OK"])
        #expect(responses.map(body(of:)) == ["first", #"{"error":{"status":500,"message":"the request was not answered"}}"#, "GET /echo 0"])
    }

    /// Shutdown's last step: idle connections close at once, and one still
    /// writing an answer its client reads slowly closes once it is out.
    @Test func closingAfterWritingLetsAnAnswerFinishAndClosesIdleConnections() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let idle = try RawSocket(port: subject.port)
        let writing = try RawSocket(port: subject.port)
        writing.send("GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        // The 8 MiB answer's first bytes have arrived: it is being written,
        // and fills the socket's buffers while nobody reads the rest.
        let head = writing.read(100)
        #expect(statusLine(of: head) == "HTTP/1.1 200 OK")
        subject.server.beginDraining()
        let closing = Task { await subject.server.closeAfterWritingAnswers(within: .seconds(20)) }
        #expect(idle.readToEnd() == Reading(text: "", end: .closed))
        let reading = writing.readToEnd()
        await closing.value
        #expect(reading.end == .closed)
        #expect(body(of: head + reading.text).utf8.count == 8 << 20)
        #expect(subject.server.openConnections == 0)
    }

    @Test func drainingClosesKeptConnectionsAfterTheirNextAnswerAndTakesNoNewOnes() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let kept = try RawSocket(port: subject.port)
        kept.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(kept.readResponses(1).count == 1)
        subject.server.beginDraining()
        kept.send("HEAD /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        let last = kept.readToEnd()
        #expect(last.text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(last.text.contains("\r\nConnection: close\r\n"))
        #expect(last.text.contains("\r\nContent-Length: 12\r\n"))
        #expect(body(of: last.text) == "") // HEAD: the length, not the body
        #expect(last.end == .closed)
        #expect(throws: RawSocketError.self) { try RawSocket(port: subject.port) }
    }

    /// A handler answering a request is told when its client hangs up, so
    /// work that waits (a batch's turn) can leave at once; the connection
    /// closes.
    @Test func aHandlerIsToldWhenItsClientHangsUp() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        var socket: RawSocket? = try RawSocket(port: subject.port)
        socket?.send("GET /until-client-stops HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually { subject.handled == ["/until-client-stops"] })
        #expect(subject.clientStops.current == 0)
        socket = nil
        #expect(await eventually(within: 10) { subject.clientStops.current == 1 })
        #expect(await eventually(within: 10) { subject.server.openConnections == 0 })
    }

    /// A connection the server closes before its request is answered (at
    /// stop, here) tells the handler too, once, as it closes.
    @Test func aHandlerIsToldWhenTheServerClosesItsConnection() async throws {
        let subject = try ServerUnderTest()
        let socket = try RawSocket(port: subject.port)
        socket.send("GET /until-client-stops HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually { subject.handled == ["/until-client-stops"] })
        #expect(subject.clientStops.current == 0)
        // Closes every connection on its loop, and returns after.
        subject.server.stop()
        #expect(subject.clientStops.current == 1)
        subject.group.shutdown()
        withExtendedLifetime(socket) {}
    }

    /// TCP cannot tell a client that only shut its side from one that hung
    /// up: the handler is told either way, and what it answers is still
    /// written to a client that reads.
    @Test func aHandlerIsToldWhenItsClientHalfClosesAndItsAnswerIsStillSent() async throws {
        let subject = try ServerUnderTest()
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port, timeoutSeconds: 20)
        socket.send("GET /until-client-stops HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually { subject.handled == ["/until-client-stops"] })
        shutdown(socket.fd, Int32(SHUT_WR))
        let reading = socket.readToEnd()
        #expect(body(of: reading.text) == "client stopped")
        #expect(reading.text.contains("\r\nConnection: close\r\n"))
        #expect(reading.end == .closed)
        #expect(subject.clientStops.current == 1)
    }

    /// An answer the client does not read within the write deadline (from
    /// its first write, however the client trickles) resets the
    /// connection, and what the answer held is let go: a client that reads
    /// nothing cannot keep it until the idle deadline.
    @Test func anAnswerNotReadWithinTheWriteDeadlineResetsTheConnection() async throws {
        let subject = try ServerUnderTest {
            $0.writeTimeout = .milliseconds(300)
            $0.idleTimeout = .seconds(60)
        }
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port, timeoutSeconds: 20)
        socket.send("GET /held HTTP/1.1\r\nHost: a\r\n\r\n")
        // Nothing read: 32 MiB do not fit the socket buffers.
        #expect(await eventually(within: 10) { subject.heldReleases.current == 1 })
        #expect(await eventually(within: 10) { subject.server.openConnections == 0 })
        let reading = socket.readToEnd()
        #expect(reading.text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(reading.end != .timedOut)
        #expect(body(of: reading.text).utf8.count < 32 << 20)
    }

    /// A `100 Continue` the socket takes only part of is finished before
    /// the answer's head: the client reads exactly the interim answer, then
    /// the answer to the body it sent after its own wait.
    @Test func aPartlyWritten100ContinueIsFinishedBeforeTheAnswer() async throws {
        let subject = try ServerUnderTest { $0.writeSizeLimitForTesting = 10 }
        defer { subject.stop() }
        let socket = try RawSocket(port: subject.port)
        socket.send("POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        var start = [UInt8](repeating: 0, count: 10)
        let count = start.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, Int32(MSG_WAITALL)) }
        #expect(count == 10)
        #expect(String(decoding: start, as: UTF8.self) == "HTTP/1.1 1")
        // The rest of the interim answer waits for the answer; the client
        // sends its body anyway, as clients do after a short wait.
        socket.send("{}")
        // The rest of the stream reads as two heads: the interim answer's
        // end, then the answer.
        let stream = String(decoding: start, as: UTF8.self) + socket.readResponses(2).joined()
        #expect(stream.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"))
        #expect(body(of: String(stream.dropFirst(25))) == "POST /echo 2")
    }
}
