import Foundation
import JSONRPC
import Testing

/// JSONTestSuite's parsing cases (`Tests/Fixtures/jsontestsuite/`, MIT, a
/// copy kept in the repository, or `JSONTESTSUITE_DIR`): every `y_` document must parse,
/// every `n_` document must be refused, and every `i_` document must be
/// either, without crashing. The parser is the gateway's front door for
/// every body, so these are its contract with RFC 8259.
@Suite("JSONTestSuite")
struct JSONTestSuiteTests {
    static let directory: URL = {
        if let given = ProcessInfo.processInfo.environment["JSONTESTSUITE_DIR"] {
            return URL(fileURLWithPath: given)
        }
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return packageRoot.appendingPathComponent("Tests/Fixtures/jsontestsuite")
    }()

    static func cases(_ prefix: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".json") }.sorted()
    }

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    /// The corpus must be there: a missing directory would pass the
    /// argument-driven tests below with zero cases.
    @Test func theCorpusIsPresent() {
        #expect(Self.cases("y_").count >= 90, "JSONTestSuite not found at \(Self.directory.path)")
        #expect(Self.cases("n_").count >= 180)
        #expect(Self.cases("i_").count >= 30)
    }

    @Test(arguments: cases("y_"))
    func acceptedDocumentsParse(name: String) throws {
        let input = try Self.bytes(name)
        #expect(throws: Never.self, "\(name)") { _ = try JSONParser.parse(input) }
    }

    @Test(arguments: cases("n_"))
    func rejectedDocumentsAreRefused(name: String) throws {
        let input = try Self.bytes(name)
        #expect(throws: JSONParseError.self, "\(name)") { _ = try JSONParser.parse(input) }
    }

    /// Implementation-defined cases: either answer is allowed, a crash is not;
    /// what is accepted must serialize to JSON that parses again.
    @Test(arguments: cases("i_"))
    func implementationDefinedDocumentsDoNotCrash(name: String) throws {
        let input = try Self.bytes(name)
        if let value = try? JSONParser.parse(input) {
            #expect(throws: Never.self, "\(name)") { _ = try JSONParser.parse(value.serialized()) }
        }
    }
}
