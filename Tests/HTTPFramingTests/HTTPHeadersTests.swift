import HTTPFraming
import Testing

@Suite("HTTPHeaders")
struct HTTPHeadersTests {
    /// Two list fields read in one pass: names compared case-insensitively,
    /// a field sent twice joined with a comma, in order; an absent one nil;
    /// a name of the same length but other letters not taken.
    @Test func listValuesJoinRepeatedFieldsInOrder() {
        let headers = HTTPHeaders([
            ("Host", "example"), ("TraceState", "a=1"), ("traceparent", "00-x"), ("tracestatf", "no"), ("tracestate", "b=2"),
        ])
        let (parent, state) = headers.listValues("traceparent", "tracestate")
        #expect(parent == "00-x")
        #expect(state == "a=1,b=2")
        let twice = HTTPHeaders([("traceparent", "one"), ("TRACEPARENT", "two")])
        #expect(twice.listValues("traceparent", "tracestate") == ("one,two", nil))
        #expect(HTTPHeaders().listValues("traceparent", "tracestate") == (nil, nil))
    }
}
