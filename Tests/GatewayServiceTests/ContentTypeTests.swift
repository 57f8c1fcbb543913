@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
import Testing

/// Contract section 1: `/rpc` takes `application/json`, parameters allowed;
/// anything else is 415.
@Suite("Content-Type of /rpc")
struct ContentTypeTests {
    @Test(arguments: [
        "application/json",
        "Application/JSON",
        "APPLICATION/JSON; charset=utf-8",
        "application/json;charset=UTF-8",
        " \tapplication/json \t; charset=utf-8",
        "application/json;",
    ])
    func jsonMediaTypesAreAccepted(contentType: String) {
        #expect(GatewayHTTPHandler.isJSON(contentType))
    }

    @Test(arguments: [
        "",
        ";",
        "text/plain",
        "application/jsonx",
        "application/json-seq",
        "application/problem+json",
        "application json",
        "application\\json",
        "xapplication/json",
        "application/jso",
        "application/jsoN\u{00A0}",
        "application/json\u{0301}",
        "application\u{0F}json",
    ])
    func otherMediaTypesAreRefused(contentType: String) {
        #expect(!GatewayHTTPHandler.isJSON(contentType))
    }
}
