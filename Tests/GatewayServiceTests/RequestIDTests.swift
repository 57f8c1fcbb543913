import Foundation
@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
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

@Suite("Log timestamps")
struct LogTimestampTests {
    /// ISO 8601 in UTC with milliseconds, as every log line's `ts`.
    @Test func theTimestampIsISO8601UTCWithMilliseconds() throws {
        let text = GatewayLogHandler.timestamp()
        let pattern = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
        #expect(text.wholeMatch(of: pattern) != nil, "\(text)")
        let parsed = try #require(try? Date(text, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)))
        #expect(abs(parsed.timeIntervalSinceNow) < 60)
    }
}
