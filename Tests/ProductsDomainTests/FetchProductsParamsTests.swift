import JSONRPC
import ProductsDomain
import Testing

@Suite("products.fetch params")
struct FetchProductsParamsTests {
    let limits = FetchProductsLimits(maxIdentifiers: 100)

    private func failure(_ params: JSONRPCParams?, limits: FetchProductsLimits? = nil) -> ParamsError? {
        #expect(throws: ParamsError.self) {
            try FetchProductsParams.parse(params, limits: limits ?? self.limits)
        }
    }

    private func failure(_ text: String, limits: FetchProductsLimits? = nil) throws -> ParamsError? {
        failure(try objectParams(text), limits: limits)
    }

    @Test func acceptsAllParams() throws {
        let params = try FetchProductsParams.parse(
            objectParams(#"{"productIdentifiers":["premium_monthly","coins_100"],"countryCode":"de","defaultCountryCodeAssumption":"FR","language":"pt-br"}"#),
            limits: limits
        )
        #expect(params.productIdentifiers == ["premium_monthly", "coins_100"])
        #expect(params.countryCode?.text == "DE")
        #expect(params.defaultCountryCodeAssumption?.text == "FR")
        #expect(params.language?.text == "pt-BR")
        #expect(params.language?.primaryLanguage == "pt")
    }

    @Test func explicitNullOptionalsMeanAbsent() throws {
        let params = try FetchProductsParams.parse(
            objectParams(#"{"productIdentifiers":["a"],"countryCode":null,"defaultCountryCodeAssumption":null,"language":null}"#),
            limits: limits
        )
        #expect(params == FetchProductsParams(productIdentifiers: ["a"]))
    }

    @Test func positionalParamsAreRefused() throws {
        let error = failure(.array([.array(["a"])]))
        #expect(error?.param == nil)
        #expect(error?.message == "params must be an object with named members, not an array")
        #expect(error?.jsonRPCError == JSONRPCError(code: -32602, message: "Invalid params: params must be an object with named members, not an array", data: nil))
    }

    @Test func missingParamsNameProductIdentifiers() throws {
        let error = failure(nil)
        #expect(error?.param == "productIdentifiers")
        #expect(error?.message == "productIdentifiers is required; pass params as an object with named members")
        #expect(error?.jsonRPCError.code == -32602)
        #expect(error?.jsonRPCError.message == "Invalid params: productIdentifiers is required; pass params as an object with named members")
        #expect(error?.jsonRPCError.data == ["param": "productIdentifiers"])
    }

    @Test func missingProductIdentifiers() throws {
        let error = try failure(#"{"countryCode":"DE"}"#)
        #expect(error?.param == "productIdentifiers")
        #expect(error?.message == "productIdentifiers is required: an array of 1 to 100 product identifiers")
    }

    @Test func unknownParamIsNamedWithTheAllowedNames() throws {
        let error = try failure(#"{"productIdentifiers":["a"],"country":"DE"}"#)
        #expect(error?.param == "country")
        #expect(error?.message == #"unknown param "country"; allowed: productIdentifiers, countryCode, defaultCountryCodeAssumption, language"#)
        #expect(error?.jsonRPCError.data == ["param": "country"])
    }

    @Test func unknownParamIsReportedBeforeOtherProblems() throws {
        let error = try failure(#"{"productIDs":["a"]}"#)
        #expect(error?.param == "productIDs")
    }

    @Test(arguments: [
        (#""premium""#, "productIdentifiers must be an array of strings, not a string"),
        ("null", "productIdentifiers must be an array of strings, not null"),
        (#"{"a":1}"#, "productIdentifiers must be an array of strings, not an object"),
        ("[]", "productIdentifiers must hold at least 1 identifier"),
        (#"["a",1]"#, "productIdentifiers[1] must be a string, not a number"),
        (#"[true]"#, "productIdentifiers[0] must be a string, not a boolean"),
        (#"["ok","bad id"]"#, #"productIdentifiers[1] "bad id" is not a valid product identifier: 1 to 128 characters of A-Z a-z 0-9 . _ -"#),
        (#"[""]"#, #"productIdentifiers[0] "" is not a valid product identifier: 1 to 128 characters of A-Z a-z 0-9 . _ -"#),
        (#"["a,b"]"#, #"productIdentifiers[0] "a,b" is not a valid product identifier: 1 to 128 characters of A-Z a-z 0-9 . _ -"#),
        (#"["café"]"#, #"productIdentifiers[0] "café" is not a valid product identifier: 1 to 128 characters of A-Z a-z 0-9 . _ -"#),
        (#"["a\"b"]"#, #"productIdentifiers[0] "a\"b" is not a valid product identifier: 1 to 128 characters of A-Z a-z 0-9 . _ -"#),
    ])
    func badProductIdentifiers(value: String, message: String) throws {
        let error = try failure(#"{"productIdentifiers":\#(value)}"#)
        #expect(error?.param == "productIdentifiers")
        #expect(error?.message == message)
    }

    @Test func identifierLengthAndAlphabet() throws {
        let longest = String(repeating: "a", count: 128)
        let params = try FetchProductsParams.parse(
            objectParams(#"{"productIdentifiers":["AZaz09._-","\#(longest)"]}"#),
            limits: limits
        )
        #expect(params.productIdentifiers == ["AZaz09._-", longest])

        let tooLong = String(repeating: "b", count: 129)
        let error = try failure(#"{"productIdentifiers":["\#(tooLong)"]}"#)
        // The echoed value is cut to 64 characters.
        #expect(error?.message == #"productIdentifiers[0] "\#(String(repeating: "b", count: 64))…" is not a valid product identifier: 1 to 128 characters of A-Z a-z 0-9 . _ -"#)
    }

    @Test func duplicatesAreRemovedKeepingTheFirstOccurrence() throws {
        let params = try FetchProductsParams.parse(objectParams(#"{"productIdentifiers":["b","a","b","c","a"]}"#), limits: limits)
        #expect(params.productIdentifiers == ["b", "a", "c"])
    }

    @Test func limitCountsDistinctIdentifiers() throws {
        let three = FetchProductsLimits(maxIdentifiers: 3)
        let params = try FetchProductsParams.parse(objectParams(#"{"productIdentifiers":["a","b","a","c","b"]}"#), limits: three)
        #expect(params.productIdentifiers == ["a", "b", "c"])

        let error = try failure(#"{"productIdentifiers":["a","b","c","d","a"]}"#, limits: three)
        #expect(error?.param == "productIdentifiers")
        #expect(error?.message == "productIdentifiers must hold at most 3 distinct identifiers, got 4")
    }

    @Test(arguments: ["countryCode", "defaultCountryCodeAssumption"])
    func countryParams(name: String) throws {
        let accepted = try FetchProductsParams.parse(objectParams(#"{"productIdentifiers":["a"],"\#(name)":"jp"}"#), limits: limits)
        let code = name == "countryCode" ? accepted.countryCode : accepted.defaultCountryCodeAssumption
        #expect(code?.text == "JP")

        for value in ["XX", "EU", "UK", "XK", "DEU", "D", "", "d1"] {
            let error = try failure(#"{"productIdentifiers":["a"],"\#(name)":"\#(value)"}"#)
            #expect(error?.param == name)
            #expect(error?.message == #"\#(name) "\#(value)" is not an assigned ISO 3166-1 alpha-2 country code"#)
        }
        let wrongType = try failure(#"{"productIdentifiers":["a"],"\#(name)":49}"#)
        #expect(wrongType?.param == name)
        #expect(wrongType?.message == "\(name) must be a string holding an ISO 3166-1 alpha-2 code, not a number")
    }

    @Test func languageIsCanonicalized() throws {
        let params = try FetchProductsParams.parse(objectParams(#"{"productIdentifiers":["a"],"language":"ZH-hant-tw"}"#), limits: limits)
        #expect(params.language?.text == "zh-Hant-TW")
    }

    @Test(arguments: ["de_DE", "", "deutsch", "de-", "en-US-x-private", "en-abcdefgh-bcdefghi-cdefghij-defghi"])
    func badLanguage(value: String) throws {
        let error = try failure(#"{"productIdentifiers":["a"],"language":"\#(value)"}"#)
        #expect(error?.param == "language")
        #expect(error?.message == #"language "\#(value)" is not a well-formed BCP 47 language tag such as de, de-DE or pt-BR"#)
    }

    @Test func languageOfWrongType() throws {
        let error = try failure(#"{"productIdentifiers":["a"],"language":["de"]}"#)
        #expect(error?.param == "language")
        #expect(error?.message == "language must be a string holding a BCP 47 language tag, not an array")
    }

    @Test func checksRunInDocumentedOrder() throws {
        let error = try failure(#"{"language":"??","countryCode":"XX","productIdentifiers":[]}"#)
        #expect(error?.param == "productIdentifiers")
        let second = try failure(#"{"language":"??","defaultCountryCodeAssumption":"XX","countryCode":"YY","productIdentifiers":["a"]}"#)
        #expect(second?.param == "countryCode")
    }
}
