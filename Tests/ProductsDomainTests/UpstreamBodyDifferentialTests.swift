import Foundation
import JSONRPC
@testable import ProductsDomain
import Testing

/// The one-pass reading of upstream bodies (`UpstreamBodyReader`) against
/// the tree-based one (`UpstreamProductsPage.parseViaTree`), which decides
/// what a body means: over the hand-written cases, JSONTestSuite's
/// documents as bodies and spliced into a valid body at every member, and
/// seeded mutations of a valid body.
///
/// For every body: when the one-pass reading answers, the tree-based one
/// accepts the body and makes the same page; when the tree-based one
/// accepts, the one-pass reading answers too (it may give up only on the
/// repeated members of ``repeatedMemberBodies``); and `parse(_:)` answers
/// exactly what the tree-based reading answers, page or message.
@Suite("Upstream body: one-pass reading against the tree", .serialized)
struct UpstreamBodyDifferentialTests {
    /// What a reading made of a body, compared byte for byte (`String ==`
    /// would call canonically equivalent texts equal).
    enum Outcome: Equatable, CustomStringConvertible {
        /// The page written back as an upstream body.
        case page([UInt8])
        /// The error's message.
        case refused(String)

        init(_ reading: () throws(UpstreamBodyError) -> UpstreamProductsPage) {
            do {
                self = .page(Self.bytes(of: try reading()))
            } catch {
                self = .refused(error.message)
            }
        }

        /// Encoded products as one array of their bytes, sorted by identifier.
        static func encoded(_ reading: () throws(UpstreamBodyError) -> [String: EncodedJSON]) -> Outcome {
            do {
                let products = try reading()
                return .page(products.keys.sorted().flatMap { Array($0.utf8) + [0] + products[$0]!.bytes + [0] })
            } catch {
                return .refused(error.message)
            }
        }

        static func bytes(of page: UpstreamProductsPage) -> [UInt8] {
            page.upstreamBody(country: CountryCode("DE")!).serialized()
        }

        var isPage: Bool {
            if case .page = self { return true }
            return false
        }

        var description: String {
            switch self {
            case .page(let bytes): "page \(String(decoding: bytes, as: UTF8.self))"
            case .refused(let message): "refused: \(message)"
            }
        }
    }

    /// Checks one body as the suite's summary says; returns the tree-based
    /// outcome.
    @discardableResult
    static func check(_ body: [UInt8], _ label: @autoclosure () -> String, mayGiveUp: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) -> Outcome {
        let tree = Outcome { () throws(UpstreamBodyError) in try UpstreamProductsPage.parseViaTree(body) }
        let public_ = Outcome { () throws(UpstreamBodyError) in try UpstreamProductsPage.parse(body) }
        #expect(public_ == tree, "\(label())", sourceLocation: sourceLocation)
        let fastPage = UpstreamBodyReader.page(from: body)
        if let page = fastPage {
            let treePage = try? UpstreamProductsPage.parseViaTree(body)
            #expect(treePage == page, "\(label())", sourceLocation: sourceLocation)
            #expect(tree == .page(Outcome.bytes(of: page)), "\(label())", sourceLocation: sourceLocation)
        } else if tree.isPage, !mayGiveUp {
            Issue.record("the one-pass reading gave up on an accepted body: \(label())", sourceLocation: sourceLocation)
        }
        // The transcoding reads what the one-pass reading reads, and writes
        // byte for byte what encoding the tree's products writes.
        let transcoded = UpstreamBodyReader.encodedProducts(from: body)
        #expect((transcoded == nil) == (fastPage == nil), "\(label())", sourceLocation: sourceLocation)
        if let transcoded {
            #expect(transcoded == (try? UpstreamProductsPage.parseViaTree(body))?.encodedProducts, "\(label())", sourceLocation: sourceLocation)
        }
        let encoded = Outcome.encoded { () throws(UpstreamBodyError) in try UpstreamProductsPage.encodedProducts(of: body) }
        let treeEncoded = Outcome.encoded { () throws(UpstreamBodyError) in try UpstreamProductsPage.parseViaTree(body).encodedProducts }
        #expect(encoded == treeEncoded, "\(label())", sourceLocation: sourceLocation)
        return tree
    }

    // MARK: - Hand-written cases

    /// Bodies the tree-based reading accepts only because a repeated
    /// member's first value is never read: the one-pass reading gives up on
    /// them, and `parse(_:)` answers through the tree.
    static let repeatedMemberBodies = [
        UpstreamProductsPageTests.body(item: #""title":5,"description":"D","price":"4.99","price":{"amount":"1.00","currency":"EUR"},"title":"T""#),
        UpstreamProductsPageTests.body(item: UpstreamProductsPageTests.basics + #","subscription":{"period":"P1M","discount_offer":{"amount":"x"},"discount_offer":null,"period":"P2M"}"#),
        #"{"items":5,"items":[]}"#,
        #"{"items":[{"id":"a"}],"not_found":["z"],"items":[],"not_found":null}"#,
    ]

    static let acceptedBodies = [
        UpstreamProductsPageTests.contractBody,
        #"{"items":[],"not_found":["a","b"]}"#,
        #"{"items":[],"not_found":null}"#,
        #"{"items":[{"id":"a","title":"T","description":"D","price":{"amount":"1","currency":"EUR"}}],"not_found":["z"],"items":[],"not_found":null}"#,
        UpstreamProductsPageTests.body(item: UpstreamProductsPageTests.basics),
        UpstreamProductsPageTests.body(item: UpstreamProductsPageTests.basics + #","icon_url":null,"subscription":null"#),
        UpstreamProductsPageTests.body(item: UpstreamProductsPageTests.basics + #","title":"Second","icon_url":"https://a","icon_url":null"#),
        UpstreamProductsPageTests.body(item: UpstreamProductsPageTests.basics + #","subscription":{"period":"P0001Y","group_id":null,"introductory_offer":null,"discount_offer":null}"#),
        #"{"\u0069tems":[{"id":"caf\u00e9","\u0074itle":"\"q\" \\ \/ \b\f\n\r\t \ud83d\ude00 \u0000","description":"Münzen €","price":{"amount":"1\u002e00","currency":"e\u0055r"}}]}"#,
        #" {"items" : [ ] , "x" : [ 1 , -0.5e+3 , true , false , null , { } , [ ] , "" ] } "#,
    ] + repeatedMemberBodies

    @Test func handWrittenCases() {
        for text in Self.acceptedBodies {
            let outcome = Self.check(Array(text.utf8), text, mayGiveUp: Self.repeatedMemberBodies.contains(text))
            #expect(outcome.isPage, "\(text): \(outcome)")
        }
        for (text, message) in UpstreamProductsPageTests.badShapes {
            #expect(Self.check(Array(text.utf8), text) == .refused(message))
        }
        for (members, message) in UpstreamProductsPageTests.badItems {
            let text = UpstreamProductsPageTests.body(item: members)
            #expect(Self.check(Array(text.utf8), text) == .refused(message))
        }
        for text in ["", " ", "{", "{}x", #"{"items":[]}]"#, #"{"items":[],}"#, "[{}]", "null", #""items""#, #"{"items":[{"id":"x""#] {
            #expect(!Self.check(Array(text.utf8), text).isPage, "\(text)")
        }
    }

    // MARK: - JSONTestSuite

    static let corpusDirectory: URL = {
        if let given = ProcessInfo.processInfo.environment["JSONTESTSUITE_DIR"] {
            return URL(fileURLWithPath: given)
        }
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return packageRoot.appendingPathComponent("Tests/Fixtures/jsontestsuite")
    }()

    /// Every document of the corpus, by name.
    static let corpus: [(name: String, bytes: [UInt8])] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: corpusDirectory.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().compactMap { name in
            (try? Data(contentsOf: corpusDirectory.appendingPathComponent(name))).map { (name, Array($0)) }
        }
    }()

    /// A valid body as a tree of members, so that any one value can be
    /// swapped for other bytes: two products, one with every member (both
    /// offers included), one with only the required ones.
    enum Template {
        case text(String)
        case object([(name: String, value: Template)])
        case array([Template])
        /// Where the spliced bytes go.
        case hole

        static let body = Template.object([
            ("country", .text(#""DE""#)),
            ("items", .array([
                .object([
                    ("id", .text(#""premium_monthly""#)),
                    ("title", .text(#""Premium""#)),
                    ("description", .text(#""All features, billed monthly""#)),
                    ("icon_url", .text(#""https://cdn.example.com/premium.png""#)),
                    ("price", .object([("amount", .text(#""4.99""#)), ("currency", .text(#""EUR""#))])),
                    ("subscription", .object([
                        ("period", .text(#""P1M""#)),
                        ("group_id", .text(#""premium""#)),
                        ("introductory_offer", .object([("amount", .text(#""0.00""#)), ("currency", .text(#""EUR""#)), ("period", .text(#""P1W""#))])),
                        ("discount_offer", .object([("amount", .text(#""3.99""#)), ("currency", .text(#""eur""#)), ("period", .text(#""P3M""#))])),
                    ])),
                ]),
                .object([
                    ("id", .text(#""coins_100""#)),
                    ("title", .text(#""100 Coins""#)),
                    ("description", .text(#""Some coins""#)),
                    ("price", .object([("amount", .text(#""0.99""#)), ("currency", .text(#""EUR""#))])),
                ]),
            ])),
            ("not_found", .array([.text(#""retired_pack""#)])),
        ])

        /// The body with the hole filled by `value`.
        func bytes(filling value: [UInt8]) -> [UInt8] {
            switch self {
            case .text(let text):
                return Array(text.utf8)
            case .hole:
                return value
            case .array(let elements):
                return Array("[".utf8) + Array(elements.map { $0.bytes(filling: value) }.joined(separator: Array(",".utf8))) + Array("]".utf8)
            case .object(let members):
                let written = members.map { Array("\"\($0.name)\":".utf8) + $0.value.bytes(filling: value) }
                return Array("{".utf8) + Array(written.joined(separator: Array(",".utf8))) + Array("}".utf8)
            }
        }

        /// This template with one hole, in each way: every member's value in
        /// turn, and a new member `x_unknown` first in every object; with a
        /// label for messages.
        func holes(path: String = "body") -> [(label: String, template: Template)] {
            switch self {
            case .text, .hole:
                return []
            case .array(let elements):
                return elements.indices.flatMap { index in
                    elements[index].holes(path: "\(path)[\(index)]").map { hole in
                        var copy = elements
                        copy[index] = hole.template
                        return (hole.label, Template.array(copy))
                    }
                }
            case .object(let members):
                var result = [("\(path).x_unknown", Template.object([("x_unknown", .hole)] + members))]
                for index in members.indices {
                    var replaced = members
                    replaced[index].value = .hole
                    result.append(("\(path).\(members[index].name)", .object(replaced)))
                    for inner in members[index].value.holes(path: "\(path).\(members[index].name)") {
                        var copy = members
                        copy[index].value = inner.template
                        result.append((inner.label, .object(copy)))
                    }
                }
                return result
            }
        }
    }

    /// The corpus must be there: a missing directory would check nothing.
    @Test func theCorpusIsPresent() {
        #expect(Self.corpus.count >= 300, "JSONTestSuite not found at \(Self.corpusDirectory.path)")
        #expect(Template.body.holes().count == 35)
    }

    @Test func corpusDocumentsAsBodies() {
        for (name, bytes) in Self.corpus {
            Self.check(bytes, name)
        }
    }

    @Test func corpusDocumentsInEveryMember() {
        let holes = Template.body.holes()
        var accepted = 0
        // Each document goes into every fifth member, shifted by its place
        // in the corpus: every member still gets a fifth of the corpus (about
        // 60 documents of each kind), at a fifth of the cost. All of it,
        // 22,000 readings, kept the tests that share the CPU with it under
        // ThreadSanitizer from their deadlines.
        for (position, (name, bytes)) in Self.corpus.enumerated() {
            for (index, hole) in holes.enumerated() where (index + position) % 5 == 0 {
                if Self.check(hole.template.bytes(filling: bytes), "\(name) at \(hole.label)").isPage { accepted += 1 }
            }
        }
        // The unknown members take every valid document: the accepting
        // path is exercised, not only refusals.
        #expect(accepted > 150)
    }

    /// The depth limit counts the containers around a member too: nesting
    /// around 64 levels in every member, in arrays and in objects.
    @Test func nestingAroundTheLimitInEveryMember() {
        let holes = Template.body.holes()
        var accepted = 0
        for depth in 56 ... 66 {
            let arrays = Array((String(repeating: "[", count: depth) + String(repeating: "]", count: depth)).utf8)
            let objects = Array((String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)).utf8)
            for hole in holes {
                for value in [arrays, objects] where Self.check(hole.template.bytes(filling: value), "depth \(depth) at \(hole.label)").isPage {
                    accepted += 1
                }
            }
        }
        // Deeper members take fewer levels: each boundary is crossed.
        #expect(accepted > 0)
    }

    /// String contents at the edges of the rules: every byte alone, every
    /// escape letter, `\u` escapes around the surrogates, and UTF-8
    /// sequences around every lead byte's limits; in a kept value, in an
    /// ignored value and in a member name.
    @Test func stringContentsAtTheEdges() {
        var contents: [[UInt8]] = (0 ... 255).map { [UInt8($0)] }
        contents += (0 ... 255).map { [UInt8(ascii: "\\"), UInt8($0)] }
        let units = ["0000", "001f", "0020", "007F", "00e9", "d7ff", "D800", "dbff", "DC00", "dfff", "E000", "FFFF", "12", "12g4", "ZZZZ"]
        contents += units.map { Array("\\u\($0)".utf8) }
        for high in ["D800", "dbff", "DC00"] {
            contents += ["DC00", "dfff", "DBFF", "E000", "0041", "d83d"].map { Array("\\u\(high)\\u\($0)".utf8) }
            contents += ["", "x", "\\n", "\\u", "\\u00"].map { Array("\\u\(high)\($0)".utf8) }
        }
        for lead in UInt8(0xC0) ... 0xFF {
            for second: UInt8 in [0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0] {
                contents += [[lead, second], [lead, second, 0x80], [lead, second, 0xBF, 0x80], [lead, second, 0x80, 0x7F]]
            }
        }
        var accepted = 0
        for content in contents {
            let quoted = Array("\"".utf8) + content + Array("\"".utf8)
            let bodies = [
                Array(#"{"items":[{"id":"x","title":"#.utf8) + quoted + Array(#","description":"D","price":{"amount":"1","currency":"EUR"}}]}"#.utf8),
                Array(#"{"items":[],"x":"#.utf8) + quoted + Array("}".utf8),
                Array(#"{"items":[],"#.utf8) + quoted + Array(":1}".utf8),
            ]
            for body in bodies where Self.check(body, "string content \(content)").isPage {
                accepted += 1
            }
        }
        #expect(accepted > 1000)
    }

    // MARK: - Mutations

    /// SplitMix64: a small seeded generator, so every run tries the same
    /// mutants.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64

        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
    }

    /// Five products, subscriptions with both offers, escapes, non-ASCII
    /// text, unknown members and whitespace: every part of the reading.
    static let mutationSource = #"""
    {"country": "DE", "items": [
      {"id": "premium_monthly", "title": "Premium", "description": "All features, billed monthly", "icon_url": "https://cdn.example.com/premium.png",
       "price": {"amount": "4.99", "currency": "EUR"},
       "subscription": {"period": "P1M", "group_id": "premium", "introductory_offer": {"amount": "0.00", "currency": "EUR", "period": "P1W"},
                        "discount_offer": {"amount": "3.99", "currency": "eur", "period": "P3M"}}},
      {"id": "premium_yearly", "title": "Premium \u00e9t\u00e9", "description": "Line\nbreak \"quoted\" \\ \ud83d\ude00", "icon_url": null,
       "price": {"amount": "39.99", "currency": "EUR"}, "subscription": {"period": "P1Y", "group_id": null, "introductory_offer": null}},
      {"id": "coins_100", "title": "100 Münzen", "description": "Some coins", "price": {"amount": "0.99", "currency": "usd", "tax": [0.19, true]}, "subscription": null},
      {"id": "coins_1200", "title": "1200 Coins", "description": "A chest of coins", "rating": -1.5e3, "price": {"amount": "1200", "currency": "EUR"}},
      {"id": "remove_ads", "title": "No ads", "description": "Remove all ads", "price": {"amount": "2.99", "currency": "EUR"},
       "subscription": {"period": "P7D", "discount_offer": {"amount": "1.99", "currency": "EUR", "period": "P0001D"}}}
    ], "not_found": ["retired_pack", "gone"], "meta": {"next": null}}
    """#

    @Test func theMutationSourceIsAccepted() throws {
        let page = try UpstreamProductsPage.parse(Array(Self.mutationSource.utf8))
        #expect(page.items.count == 5)
        #expect(page.items.compactMap(\.subscription).count == 3)
        #expect(page.items[1].description == "Line\nbreak \"quoted\" \\ \u{1F600}")
        #expect(UpstreamBodyReader.page(from: Array(Self.mutationSource.utf8)) == page)
    }

    @Test func seededMutations() {
        let source = Array(Self.mutationSource.utf8)
        let insertions = [",", "}", "]", "{", "[", "\"", "\\", ":", "null", " ", "\\u00", "\u{E9}"].map { Array($0.utf8) }
        var generator = SeededGenerator(state: 0x0D51_DE00)
        var accepted = 0
        for round in 0 ..< 800 {
            var body = source
            var steps: [String] = []
            for _ in 0 ... Int.random(in: 0 ... 2, using: &generator) {
                guard !body.isEmpty else { break }
                let index = Int.random(in: 0 ..< body.count, using: &generator)
                switch Int.random(in: 0 ..< 5, using: &generator) {
                case 0:
                    let bit = UInt8(1) << UInt8.random(in: 0 ..< 8, using: &generator)
                    body[index] ^= bit
                    steps.append("flip \(bit) at \(index)")
                case 1:
                    body.removeSubrange(index...)
                    steps.append("cut at \(index)")
                case 2:
                    body.remove(at: index)
                    steps.append("remove at \(index)")
                case 3:
                    body[index] = UInt8.random(in: 0x20 ..< 0x7F, using: &generator)
                    steps.append("set \(body[index]) at \(index)")
                default:
                    let inserted = insertions.randomElement(using: &generator)!
                    body.insert(contentsOf: inserted, at: index)
                    steps.append("insert \(String(decoding: inserted, as: UTF8.self)) at \(index)")
                }
            }
            if Self.check(body, "mutant \(round): \(steps.joined(separator: ", "))").isPage {
                accepted += 1
            }
        }
        // Some mutants stay valid (a changed digit or letter, an unknown
        // member renamed): both outcomes are compared, not only refusals.
        #expect(accepted > 50)
    }
}
