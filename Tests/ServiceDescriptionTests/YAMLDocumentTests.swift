import JSONRPC
import ServiceDescription
import Testing

/// YAML in, the gateway's `JSONValue` out: the JSON-compatible part of
/// YAML, numbers as their text, anything else refused.
@Suite struct YAMLDocumentTests {
    @Test func readsScalarsAsOpenAPIToolsDo() throws {
        let value = try YAMLDocument.jsonValue(ofYAML: """
            version: '2.0'
            float: 2.0
            price: 0.00
            code: -32700
            nothing: null
            tilde: ~
            flag: true
            yes-word: yes
            text: plain words
            quoted: "1"
            """)
        #expect(value == [
            "version": "2.0",
            "float": .number("2.0"),
            "price": .number("0.00"),
            "code": .number("-32700"),
            "nothing": .null,
            "tilde": .null,
            "flag": true,
            "yes-word": true,
            "text": "plain words",
            "quoted": "1",
        ])
    }

    @Test func keepsOrderAndNesting() throws {
        let value = try YAMLDocument.jsonValue(ofYAML: """
            z: [1, b, {value: 4.99, currencyCode: EUR}]
            a:
              - x: 1
              - []
            '200': {}
            """)
        #expect(value.serializedString == #"{"z":[1,"b",{"value":4.99,"currencyCode":"EUR"}],"a":[{"x":1},[]],"200":{}}"#)
    }

    /// Anchors and aliases are YAML's own shorthand: read as the value
    /// they stand for, as PyYAML reads them.
    @Test func resolvesAliases() throws {
        #expect(try YAMLDocument.jsonValue(ofYAML: "a: &x {v: 1}\nb: *x") == ["a": ["v": 1], "b": ["v": 1]])
    }

    @Test(arguments: [
        ("n: 0x1F", "the number 0x1F at /n has no JSON form"),
        ("n: .inf", "the number .inf at /n has no JSON form"),
        ("b:\n  <<: {x: 1}", "a mapping key at /b is not a plain scalar"),
        ("", "the YAML document is empty"),
    ])
    func refusesWhatJSONCannotHold(yaml: String, message: String) {
        #expect(throws: ServiceDescriptionError(message)) {
            try YAMLDocument.jsonValue(ofYAML: yaml)
        }
    }
}
