import JSONRPC
import ProductsDomain
import Testing

@Suite("Region resolution")
struct RegionResolverTests {
    @Test(arguments: [
        (["LC_ALL": "de_DE.UTF-8"], "DE"),
        (["LANG": "en_US@euro"], "US"),
        (["LANG": "sr_RS.UTF-8@latin"], "RS"),
        (["LANG": "fr_CA"], "CA"),
        (["LANG": "de_de.utf8"], "DE"),
        (["LC_ALL": "", "LANG": "fr_FR.UTF-8"], "FR"),
        (["LC_ALL": "ja_JP.eucJP", "LANG": "de_DE.UTF-8"], "JP"),
    ] as [([String: String], String)])
    func localeWithTerritory(environment: [String: String], territory: String) {
        #expect(SystemLocale(environment: environment).territory?.text == territory)
    }

    @Test(arguments: [
        [:],
        ["LANG": ""],
        ["LANG": "C"],
        ["LANG": "POSIX"],
        ["LANG": "C.UTF-8"],
        ["LANG": "en"],
        ["LANG": "en.UTF-8"],
        ["LANG": "es_419.UTF-8"],
        ["LANG": "xx_XX.UTF-8"],
        ["LANG": "_DE"],
        ["LC_ALL": "C.UTF-8", "LANG": "de_DE.UTF-8"],
        ["LC_ALL": "POSIX", "LANG": "de_DE.UTF-8"],
        ["LC_ALL": "en", "LANG": "de_DE.UTF-8"],
    ] as [[String: String]])
    func localeWithoutTerritory(environment: [String: String]) {
        #expect(SystemLocale(environment: environment).territory == nil)
    }

    @Test func localeNameComesFromTheVariablePOSIXReads() {
        #expect(SystemLocale(environment: ["LC_ALL": "C.UTF-8", "LANG": "de_DE.UTF-8"]).localeName == "C.UTF-8")
        #expect(SystemLocale(environment: ["LC_ALL": "", "LANG": "de_DE.UTF-8"]).localeName == "de_DE.UTF-8")
        #expect(SystemLocale(environment: [:]).localeName == nil)
        #expect(SystemLocale(environment: ["LC_ALL": "", "LANG": ""]).localeName == nil)
    }

    private let de = CountryCode("DE")!
    private let fr = CountryCode("FR")!
    private let ch = CountryCode("CH")!
    private let jp = CountryCode("JP")!
    private let japaneseLocale = SystemLocale(environment: ["LANG": "ja_JP.UTF-8"])
    private let noLocale = SystemLocale(environment: ["LANG": "C.UTF-8"])

    @Test func explicitCountryWins() throws {
        let resolver = RegionResolver(configuredDefault: ch, systemLocale: japaneseLocale)
        let region = try resolver.resolve(FetchProductsParams(productIdentifiers: ["a"], countryCode: de, defaultCountryCodeAssumption: fr))
        #expect(region == ResolvedRegion(countryCode: de, source: .explicit))
        #expect(region.jsonValue.serializedString == #"{"countryCode":"DE","source":"explicit"}"#)
    }

    @Test func callersAssumptionBeatsTheConfiguredDefault() throws {
        let resolver = RegionResolver(configuredDefault: ch, systemLocale: japaneseLocale)
        let region = try resolver.resolve(FetchProductsParams(productIdentifiers: ["a"], defaultCountryCodeAssumption: fr))
        #expect(region == ResolvedRegion(countryCode: fr, source: .defaultAssumption))
        #expect(region.jsonValue.serializedString == #"{"countryCode":"FR","source":"defaultAssumption"}"#)
    }

    @Test func configuredDefaultBeatsTheSystemLocale() throws {
        let resolver = RegionResolver(configuredDefault: ch, systemLocale: japaneseLocale)
        let region = try resolver.resolve(FetchProductsParams(productIdentifiers: ["a"]))
        #expect(region == ResolvedRegion(countryCode: ch, source: .defaultAssumption))
    }

    @Test func systemLocaleIsTheLastResort() throws {
        let resolver = RegionResolver(configuredDefault: nil, systemLocale: japaneseLocale)
        let region = try resolver.resolve(FetchProductsParams(productIdentifiers: ["a"]))
        #expect(region == ResolvedRegion(countryCode: jp, source: .systemLocale))
        #expect(region.jsonValue.serializedString == #"{"countryCode":"JP","source":"systemLocale"}"#)
    }

    @Test func unresolvedRegionSaysWhatToPassOrConfigure() {
        let resolver = RegionResolver(configuredDefault: nil, systemLocale: noLocale)
        let error = #expect(throws: ParamsError.self) {
            try resolver.resolve(FetchProductsParams(productIdentifiers: ["a"]))
        }
        #expect(error?.reason == "regionUnresolved")
        #expect(error?.param == "countryCode")
        #expect(error?.message == "countryCode is needed: no region could be resolved; pass countryCode or defaultCountryCodeAssumption, or configure GATEWAY_DEFAULT_COUNTRY or a LANG/LC_ALL locale with a territory (such as de_DE.UTF-8)")
        #expect(error?.jsonRPCError.code == -32602)
        #expect(error?.jsonRPCError.message.hasPrefix("Invalid params: countryCode is needed") == true)
        #expect(error?.jsonRPCError.data == ["param": "countryCode", "reason": "regionUnresolved"])
    }
}
