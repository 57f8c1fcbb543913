/// How the test upstream misbehaves for one request.
public enum MockUpstreamFault: Sendable, Equatable {
    /// Answer normally, after a delay.
    case delay(milliseconds: Int)
    /// Answer with this status (and `Retry-After` when given) and a small JSON body.
    case status(Int, retryAfterSeconds: Int? = nil)
    /// ``status(_:retryAfterSeconds:)`` after a delay.
    case slowStatus(Int, milliseconds: Int)
    /// A 200 whose body is not JSON.
    case invalidJSON
    /// A 200 whose first item lacks its `title`.
    case missingField
    /// Reset the TCP connection instead of answering.
    case reset
    /// Never answer.
    case hang
    /// Answer normally once the test says so (``MockUpstream/answerHeld()``):
    /// a fetch that lasts exactly as long as the test needs, whatever the
    /// machine's speed.
    case held
    /// Answer normally, but as a chunked body of `chunks` pieces sent
    /// `intervalMilliseconds` apart: every wait is short, the whole is long.
    case trickle(chunks: Int, intervalMilliseconds: Int)
    /// A 200 padded to `bytes` bytes (valid JSON, an unknown key holding
    /// spaces), declared with `Content-Length`, or sent chunked with no
    /// length when `chunked` is set.
    case oversized(bytes: Int, chunked: Bool)
    /// Write these bytes on the connection instead of an HTTP answer
    /// (framing the gateway must refuse: a huge header section, a transfer
    /// coding it did not ask for, a NUL in a field, status 101 or 600).
    case rawResponse([UInt8])
    /// Answer normally, with one more item in `items`, which the gateway
    /// did not ask for: a one-time product of this id and title.
    case extraItem(id: String, title: String)
}
