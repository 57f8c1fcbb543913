import Testing
import Tracing

/// `traceparent` and `tracestate` as W3C Trace Context Level 1 reads them,
/// every form the contract lists.
@Suite("W3C Trace Context")
struct TraceParentTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("a valid version 00 traceparent is read whole")
    func valid() throws {
        let context = try #require(TraceParent.parse(Self.valid))
        #expect(context.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(context.spanID.hex == "00f067aa0ba902b7")
        #expect(context.flags.isSampled)
        #expect(TraceParent.parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.flags.isSampled == false)
        // Flags other than sampled are kept (and passed on as read).
        #expect(TraceParent.parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09")?.flags.rawValue == 9)
    }

    @Test("invalid forms start a new trace", arguments: [
        // upper-case hex, in each field
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
        "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        // all-zero trace id, all-zero parent id
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        // version ff
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        // wrong lengths
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "",
        // extra fields on version 00
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
        // wrong separators, not hex
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        // a higher version needs its first four fields, then `-` or the end
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
    ])
    func invalid(_ header: String) {
        #expect(TraceParent.parse(header) == nil)
        #expect(IncomingTrace.read(traceparent: header, tracestate: "congo=t61rcWkgMzE") == nil)
    }

    @Test("a higher version is read by its first four fields")
    func higherVersion() throws {
        let exact = try #require(TraceParent.parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        #expect(exact.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        let longer = try #require(TraceParent.parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-the-future-holds"))
        #expect(longer.spanID.hex == "00f067aa0ba902b7")
        #expect(!longer.flags.isSampled)
    }

    @Test("tracestate: valid forms are kept unchanged", arguments: [
        "congo=t61rcWkgMzE",
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
        "rojo=00f067aa0ba902b7 , congo=t61rcWkgMzE",
        "rojo=1,,congo=2",
        "",
        "tenant@system=value",
        "1tenant@vendor=x",
        "a-b_c*d/e=with spaces inside",
        "k=" + String(repeating: "v", count: 256),
        (1...32).map { "k\($0)=v" }.joined(separator: ","),
    ])
    func validState(_ state: String) throws {
        #expect(TraceState.isValid(state))
        let incoming = try #require(IncomingTrace.read(traceparent: Self.valid, tracestate: state))
        #expect(incoming.traceState == state)
    }

    @Test("tracestate: invalid forms are dropped", arguments: [
        "Congo=t61rcWkgMzE",
        "congo",
        "=value",
        "congo=",
        "congo=a,congo=b",
        "congo=a=b",
        "congo=tab\there",
        "1congo=x",
        "tenant@=x",
        "@system=x",
        "tenant@1system=x",
        "tenant@systemnamemorethan14=x",
        "k=" + String(repeating: "v", count: 257),
        (1...33).map { "k\($0)=v" }.joined(separator: ","),
        "congo=caf\u{e9}",
    ])
    func invalidState(_ state: String) throws {
        #expect(!TraceState.isValid(state))
        let incoming = try #require(IncomingTrace.read(traceparent: Self.valid, tracestate: state))
        #expect(incoming.traceState == nil)
    }

    @Test("ids are written as lower-case hex, and traceparent round-trips")
    func writing() throws {
        let context = SpanContext(traceID: TraceID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210), spanID: SpanID(0xAB), flags: .sampled)
        #expect(context.traceparent == "00-0123456789abcdeffedcba9876543210-00000000000000ab-01")
        #expect(TraceParent.parse(context.traceparent) == context)
    }

    @Test("generated ids are valid and differ")
    func generated() {
        var seen = Set<TraceID>()
        for _ in 0..<1000 {
            let id = TraceIDGenerator.traceID()
            #expect(id.isValid)
            seen.insert(id)
            #expect(TraceIDGenerator.spanID().isValid)
        }
        #expect(seen.count == 1000)
    }

    @Test("samplers decide as OTEL_TRACES_SAMPLER says")
    func samplers() throws {
        let parent = try #require(TraceParent.parse(Self.valid))
        var unsampled = parent
        unsampled.flags = .none
        let trace = TraceIDGenerator.traceID()
        #expect(Sampler(name: "always_on", ratio: 1)!.isSampled(traceID: trace, parent: unsampled))
        #expect(!Sampler(name: "always_off", ratio: 1)!.isSampled(traceID: trace, parent: parent))
        let parentBased = Sampler(name: "parentbased_always_on", ratio: 1)!
        #expect(!parentBased.isSampled(traceID: trace, parent: unsampled))
        #expect(parentBased.isSampled(traceID: trace, parent: parent))
        #expect(parentBased.isSampled(traceID: trace, parent: nil))
        #expect(!Sampler(name: "parentbased_always_off", ratio: 1)!.isSampled(traceID: trace, parent: nil))
        #expect(!Sampler(name: "traceidratio", ratio: 0)!.isSampled(traceID: trace, parent: parent))
        let half = Sampler(name: "traceidratio", ratio: 0.5)!
        let sampled = (0..<4000).filter { _ in half.isSampled(traceID: TraceIDGenerator.traceID(), parent: nil) }.count
        #expect((1600...2400).contains(sampled))
        #expect(Sampler(name: "jaeger_remote", ratio: 1) == nil)
    }
}
