@testable import GatewayService
import Testing

@Suite("RequestID")
struct RequestIDTests {
    @Test func freshIdsAre32LowerCaseHexDigitsAndNeverRepeat() {
        let ids = (0..<10_000).map { _ in RequestID.generate() }
        #expect(Set(ids).count == ids.count)
        let hex = Set("0123456789abcdef".utf8)
        #expect(ids.allSatisfy { $0.utf8.count == 32 && $0.utf8.allSatisfy(hex.contains) })
        // One process, one prefix: the ids differ in their second half.
        #expect(Set(ids.map { $0.prefix(16) }).count == 1)
    }

    @Test func aSaneCallerIdIsKeptAndAnythingElseIsReplaced() {
        #expect(RequestID.accept("abc-123") == "abc-123")
        #expect(RequestID.accept(String(repeating: "x", count: 128)) == String(repeating: "x", count: 128))
        #expect(RequestID.accept(String(repeating: "x", count: 129)) == nil)
        #expect(RequestID.accept("has space") == nil)
        #expect(RequestID.accept("") == nil)
        #expect(RequestID.accept(nil) == nil)
    }
}
