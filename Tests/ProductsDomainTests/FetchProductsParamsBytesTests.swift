import Foundation
import JSONRPC
import ProductsDomain
import Testing

/// The params of a call read from bytes with no tree: whenever the reader
/// answers, it answers what the tree's parse answers; for the usual valid
/// params it always answers. JSONTestSuite documents spliced into every
/// param position make the reader give up or agree.
@Suite("FetchProductsParams from bytes")
struct FetchProductsParamsBytesTests {
    static let limits = FetchProductsLimits(maxIdentifiers: 4)

    enum Verdict: Equatable {
        case params(FetchProductsParams)
        case refused
    }

    /// The tree's answer for the same text.
    static func tree(_ text: [UInt8]) -> Verdict {
        guard let value = try? JSONParser.parse(text), case .object(let members) = value,
              let params = try? FetchProductsParams.parse(.object(members), limits: limits) else { return .refused }
        return .params(params)
    }

    static func fast(_ text: [UInt8]) -> FetchProductsParams? {
        text.withUnsafeBufferPointer { FetchProductsParams.read(json: $0, limits: limits) }
    }

    /// Checks agreement; returns whether the reader answered.
    @discardableResult
    static func agree(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let bytes = Array(text.utf8)
        guard let fast = fast(bytes) else { return false }
        #expect(tree(bytes) == .params(fast), "\(text)", sourceLocation: sourceLocation)
        return true
    }

    static let usual: [String] = [
        #"{"productIdentifiers":["premium_monthly","coins_100"]}"#,
        #"{"productIdentifiers":["a"],"countryCode":"DE"}"#,
        #"{"countryCode":"de","productIdentifiers":["a","b","a","c"],"language":"pt-BR"}"#,
        #"{"productIdentifiers":["a"],"defaultCountryCodeAssumption":"FR","countryCode":null,"language":null}"#,
        #"  { "productIdentifiers" : [ "x.y-z_1" , "x.y-z_1" ] , "language" : "de-DE" }  "#,
        #"{"productIdentifiers":["\u0061b","ab"],"countryCode":"\u0044E"}"#,
        #"{"productIdentifiers":["a","b","c","d","a","b"]}"#,
    ]

    @Test func theUsualParamsAreReadAsTheTreeReadsThem() {
        for text in Self.usual {
            #expect(Self.agree(text), "the reader gave up on \(text)")
        }
        #expect(Self.fast(Array(#"{"productIdentifiers":["a","a","b"],"countryCode":"de"}"#.utf8)) ==
            FetchProductsParams(productIdentifiers: ["a", "b"], countryCode: CountryCode("DE")))
    }

    @Test(arguments: [
        #"{}"#,
        #"{"productIdentifiers":[]}"#,
        #"{"productIdentifiers":"a"}"#,
        #"{"productIdentifiers":null}"#,
        #"{"productIdentifiers":["a",1]}"#,
        #"{"productIdentifiers":["a b"]}"#,
        #"{"productIdentifiers":["a","b","c","d","e"]}"#,
        #"{"productIdentifiers":["a"],"countryCode":"XX"}"#,
        #"{"productIdentifiers":["a"],"countryCode":7}"#,
        #"{"productIdentifiers":["a"],"language":"not a tag"}"#,
        #"{"productIdentifiers":["a"],"extra":1}"#,
        #"{"productIdentifiers":["a"],"productIdentifiers":["b"]}"#,
        #"{"productIdentifiers":["a"]"#,
        #"{"productIdentifiers":["a"]} x"#,
        #"[]"#,
    ])
    func unusualOrRefusedParamsAreLeftToTheTree(_ text: String) {
        #expect(Self.fast(Array(text.utf8)) == nil)
    }

    @Test func corpusDocumentsInEveryPositionGiveUpOrAgree() {
        let corpus = UpstreamBodyDifferentialTests.corpus
        #expect(corpus.count > 300, "the JSONTestSuite corpus was not found")
        let templates = [
            #"{"productIdentifiers":[HOLE]}"#,
            #"{"productIdentifiers":["a"],"countryCode":HOLE}"#,
            #"{"productIdentifiers":["a"],"language":HOLE}"#,
            #"{"productIdentifiers":HOLE}"#,
            #"{"productIdentifiers":["a"],"defaultCountryCodeAssumption":HOLE}"#,
        ]
        for (_, document) in corpus {
            for template in templates {
                let parts = template.components(separatedBy: "HOLE")
                let text = Array(parts[0].utf8) + document + Array(parts[1].utf8)
                if let fast = Self.fast(text) {
                    #expect(Self.tree(text) == .params(fast))
                }
            }
        }
    }
}
