import Synchronization

/// The right and the duty to answer one request, exactly once.
///
/// It cannot be copied, and each way of answering consumes it, so a second
/// answer does not compile. One dropped without answering (a bug) answers
/// `500` as it goes (the server's problem answer, with what the problem
/// responder adds, such as `X-Request-Id`), so the client is never left
/// waiting.
public struct HTTPResponder: ~Copyable, @unchecked Sendable {
    // @unchecked: the connection is loop-bound and `respond` hops to its loop.
    // Unmanaged (a retained reference) because `discard self` needs fields
    // that are trivially destroyed; every path takes the reference back once.
    private let connection: Unmanaged<HTTPConnection>
    private let serial: UInt64

    init(connection: HTTPConnection, serial: UInt64) {
        self.connection = Unmanaged.passRetained(connection)
        self.serial = serial
    }

    /// Sends `response`, from any thread.
    public consuming func send(_ response: HTTPResponse) {
        let connection = self.connection.takeRetainedValue()
        let serial = self.serial
        discard self
        connection.respond(serial: serial, with: response)
    }

    /// Hands the answer to a callback that may run on any thread, later:
    /// for a call its loop finishes (a Redis reply, a batch's turn).
    public consuming func deferred() -> HTTPDeferredResponder {
        let connection = self.connection.takeRetainedValue()
        let serial = self.serial
        discard self
        return HTTPDeferredResponder(connection: connection, serial: serial)
    }

    deinit {
        let connection = self.connection.takeRetainedValue()
        connection.respondUnanswered(serial: serial)
    }
}

/// The answer of one request, to be sent once from a callback. Copyable,
/// so that escaping closures can hold it; the first ``send(_:)`` answers
/// and later ones are ignored, and one dropped unsent answers 500, as
/// ``HTTPResponder`` does.
public final class HTTPDeferredResponder: Sendable {
    // The connection is loop-bound; `respond` hops to its loop.
    private let connection: HTTPConnection
    private let serial: UInt64
    private let sent = Atomic<Bool>(false)

    init(connection: HTTPConnection, serial: UInt64) {
        self.connection = connection
        self.serial = serial
    }

    /// Sends `response`, from any thread; only the first call counts.
    public func send(_ response: HTTPResponse) {
        guard !sent.exchange(true, ordering: .acquiringAndReleasing) else { return }
        connection.respond(serial: serial, with: response)
    }

    /// Calls `callback` on the connection's loop when the client stops
    /// sending before this request is answered (it hung up, or only shut
    /// its side: TCP does not tell the two apart) or the connection closes
    /// first; at once when that has happened already. Work that waits (a
    /// batch waiting for its turn) can then leave at once; what it sends
    /// afterwards is still written when the socket takes it, as to a client
    /// that only shut its side. Forgotten once the answer is sent; a later
    /// call replaces an earlier one.
    ///
    /// On the connection's loop only (the request's handler runs there).
    public func whenClientStops(_ callback: @escaping () -> Void) {
        connection.whenClientStops(serial: serial, callback)
    }

    deinit {
        guard !sent.load(ordering: .acquiring) else { return }
        connection.respondUnanswered(serial: serial)
    }
}
