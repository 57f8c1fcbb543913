import HTTPFraming
import Testing

/// A deterministic generator (SplitMix64), so a failing case can be replayed
/// from its seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The parser's answer must not depend on how the socket split the bytes:
/// whatever the reads, the same requests, the same refusal, at the same
/// place. Mutated requests (bytes flipped, dropped, doubled, framing
/// fields swapped in) explore the refusals.
@Suite struct SplitInvarianceTests {
    static let seeds: [String] = [
        "POST /rpc HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"jsonrpc\":\"2.0\"}",
        "POST /rpc HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n",
        "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "HEAD /readyz HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
    ]

    static let fragments: [String] = [
        "Content-Length: 3\r\n", "Transfer-Encoding: chunked\r\n", "Host: b\r\n", "\r\n", "\n", "\r", " ", ":", "\u{0}",
        "0\r\n\r\n", "ffffffffffffffff\r\n", "HTTP/1.1", "Expect: 100-continue\r\n", "Connection: close\r\n",
    ]

    /// Every event as text, and how many bytes the whole stream used.
    static func events(of stream: [UInt8], readSizes: inout SeededGenerator, random: Bool) -> [String] {
        var parser = HTTPRequestParser(limits: .init(maxHeaderBytes: 256, maxHeaderFields: 8, maxBodyBytes: 64))
        var events: [String] = []
        var pending: [UInt8] = []
        var next = 0
        while next < stream.count {
            let size = random ? Int.random(in: 1...16, using: &readSizes) : stream.count
            let end = min(stream.count, next + size)
            pending += stream[next..<end]
            next = end
            while !pending.isEmpty {
                let (used, event) = pending.withUnsafeBytes { parser.parse($0) }
                pending.removeFirst(used)
                switch event {
                case .needMore:
                    break
                case .continueExpected:
                    // Whether the body came in the same read is the one thing
                    // a split may change; it changes no request.
                    continue
                case .request(let head, let body):
                    events.append("\(head.method) \(head.target) \(head.headers.count) \(body)")
                    continue
                case .failed(let error):
                    events.append("failed \(error) at \(next - pending.count)")
                    return events
                }
            }
        }
        events.append(parser.isInsideRequest ? "incomplete" : "complete")
        return events
    }

    @Test(arguments: 0..<8)
    func mutatedRequestsParseTheSameWhateverTheReads(batch: Int) {
        var random = SeededGenerator(state: UInt64(batch) &* 7919)
        for round in 0..<250 {
            var stream: [UInt8] = []
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                stream += Array(Self.seeds.randomElement(using: &random)!.utf8)
            }
            for _ in 0..<Int.random(in: 0...3, using: &random) where !stream.isEmpty {
                let at = Int.random(in: 0..<stream.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: stream[at] = UInt8.random(in: 0...255, using: &random)
                case 1: stream.remove(at: at)
                case 2: stream.insert(stream[at], at: at)
                default: stream.insert(contentsOf: Array(Self.fragments.randomElement(using: &random)!.utf8), at: at)
                }
            }
            var splits = SeededGenerator(state: random.next())
            let whole = Self.events(of: stream, readSizes: &splits, random: false)
            for _ in 0..<3 {
                let pieces = Self.events(of: stream, readSizes: &splits, random: true)
                #expect(pieces == whole, "batch \(batch) round \(round): \(String(decoding: stream, as: UTF8.self).debugDescription)")
            }
        }
    }
}
