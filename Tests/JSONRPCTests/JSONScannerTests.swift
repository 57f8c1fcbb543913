import JSONRPC
import Testing

/// `JSONScanner` accepts exactly what `JSONParser` accepts, and reads
/// names and strings as the parser makes them.
@Suite("JSON scanner")
struct JSONScannerTests {
    /// Whether the scanner takes `bytes` as one document, skipped whole.
    static func scans(_ bytes: [UInt8], limits: JSONParser.Limits = .init()) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer, limits: limits)
            do {
                try scanner.skipValue()
                try scanner.end()
                return true
            } catch {
                return false
            }
        }
    }

    @Test func theCorpusIsDecidedAsByTheParser() {
        let names = JSONTestSuiteTests.cases("")
        #expect(names.count >= 300)
        for name in names {
            guard let bytes = try? JSONTestSuiteTests.bytes(name) else {
                Issue.record("\(name) unreadable")
                continue
            }
            let parsed = (try? JSONParser.parse(bytes)) != nil
            #expect(Self.scans(bytes) == parsed, "\(name)")
        }
    }

    @Test func depthLimitAsTheParsers() {
        for maxDepth in [1, 2, 3, 64] {
            let limits = JSONParser.Limits(maxDepth: maxDepth)
            for depth in 0 ... maxDepth + 1 {
                for text in [
                    String(repeating: "[", count: depth) + String(repeating: "]", count: depth),
                    String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth),
                    String(repeating: "[", count: depth) + "{}" + String(repeating: "]", count: depth),
                ] {
                    let bytes = Array(text.utf8)
                    let parsed = (try? JSONParser.parse(bytes, limits: limits)) != nil
                    #expect(Self.scans(bytes, limits: limits) == parsed, "\(text) within \(maxDepth)")
                }
            }
        }
    }

    @Test func walksAnObjectAndReadsItsStrings() throws {
        let text = #" { "n\u0061me" : "caf\u00e9 \ud83d\ude00 \"\\\/" , "skip" : [1, {"x": null}], "list": ["a", "b\n"] , "name2": "plain" } "#
        let bytes = Array(text.utf8)
        let tree = try JSONParser.parse(bytes).objectValue
        var seen: [String] = []
        try bytes.withUnsafeBufferPointer { buffer throws(JSONScanner.Refusal) in
            var scanner = JSONScanner(buffer)
            #expect(try scanner.peek() == .object)
            try scanner.beginObject()
            while let name = try scanner.nextMember() {
                switch scanner.index(of: name, in: ["name", "list", "name2"]) {
                case 0?:
                    let value = scanner.text(of: try scanner.string())
                    #expect(value.utf8.elementsEqual(tree?["name"]?.stringValue?.utf8 ?? "".utf8))
                    seen.append("name")
                case 1?:
                    try scanner.beginArray()
                    while try scanner.nextElement() {
                        seen.append(scanner.text(of: try scanner.string()))
                    }
                case 2?:
                    seen.append(scanner.text(of: try scanner.string()))
                default:
                    #expect(scanner.text(of: name) == "skip")
                    #expect(try scanner.peek() == .array)
                    try scanner.skipValue()
                }
            }
            try scanner.end()
        }
        #expect(seen == ["name", "a", "b\n", "plain"])
    }

    @Test func refusesWhatFollowsTheDocument() {
        #expect(Self.scans(Array(#"{"a":[1,2]} "#.utf8)))
        for text in [#"{"a":1} x"#, "[] []", "1 2", #""a" ,"#, "", " "] {
            #expect(!Self.scans(Array(text.utf8)), "\(text)")
        }
    }
}
