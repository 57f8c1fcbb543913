import Foundation
@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
import Testing

/// The settings table (``ConfigurationVariable/setting``) against what
/// loading does, what the start-up summary shows, the contract and
/// docs/configuration.md: every row is checked, so a row added to the table
/// is checked the same way.
@Suite("GatewayConfiguration table")
struct GatewayConfigurationTableTests {
    /// The variables of the contract's configuration section (CONTRACT.md,
    /// section 3), in its order, with the default it writes as a literal
    /// value (nil where it says "unset", "number of CPUs", "system store" or
    /// "built-in sample"). Copied here: tests do not read outside the
    /// repository.
    static let contract: [(name: String, defaultValue: String?)] = [
        ("GATEWAY_LISTEN", "127.0.0.1:8080"),
        ("GATEWAY_WORKERS", nil),
        ("ONSIDE_UPSTREAM_URL", nil),
        ("ONSIDE_APP_ID", "demo"),
        ("ONSIDE_API_TOKEN", nil),
        ("ONSIDE_API_TOKEN_FILE", nil),
        ("ONSIDE_CA_FILE", nil),
        ("GATEWAY_CATALOG", nil),
        ("GATEWAY_DEFAULT_COUNTRY", nil),
        ("GATEWAY_MAX_IDS", "100"),
        ("GATEWAY_MAX_BATCH", "50"),
        ("GATEWAY_MAX_BODY_BYTES", "65536"),
        ("GATEWAY_MAX_ANSWER_BYTES", "8388608"),
        ("GATEWAY_REQUEST_TIMEOUT_MS", "5000"),
        ("GATEWAY_READ_TIMEOUT_MS", "10000"),
        ("GATEWAY_IDLE_TIMEOUT_MS", "60000"),
        ("GATEWAY_ADMIN_LISTEN", nil),
        ("GATEWAY_BATCH_CONCURRENCY", "16"),
        ("GATEWAY_MAX_CONNECTIONS", "1024"),
        ("GATEWAY_API_KEYS", nil),
        ("GATEWAY_API_KEYS_FILE", nil),
        ("UPSTREAM_TIMEOUT_MS", "2000"),
        ("UPSTREAM_MAX_IDS", "50"),
        ("GATEWAY_MERGE_WINDOW_US", "0"),
        ("UPSTREAM_CONCURRENCY", "64"),
        ("UPSTREAM_MAX_BODY_BYTES", "8388608"),
        ("UPSTREAM_RETRIES", "2"),
        ("GATEWAY_CACHE_MAX_TTL_S", "60"),
        ("GATEWAY_CACHE_MAX_BYTES", "33554432"),
        ("GATEWAY_CACHE_MAX_STALE_S", "300"),
        ("GATEWAY_REDIS_URL", nil),
        ("GATEWAY_REDIS_PASSWORD_FILE", nil),
        ("GATEWAY_REDIS_TIMEOUT_MS", "50"),
        ("GATEWAY_REDIS_PREFIX", "onside-gw:"),
        ("GATEWAY_SHUTDOWN_GRACE_MS", "10000"),
        ("LOG_LEVEL", "info"),
        ("LOG_FORMAT", "json"),
    ]

    /// The contract's ranges where it gives one.
    static let contractRanges: [String: ClosedRange<Int>] = [
        "GATEWAY_MERGE_WINDOW_US": 0...100_000,
    ]

    static let table = ConfigurationVariable.table

    /// The start-up summary of `environment`, by variable.
    static func summary(_ environment: [String: String]) throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try GatewayConfiguration.load(environment: environment).redactedSummary)
    }

    // MARK: - The table against the contract and the docs

    @Test func theTableHoldsTheContractsVariablesWithItsDefaults() throws {
        #expect(Set(Self.table.map(\.name)).count == Self.table.count, "a variable has two rows")
        #expect(Set(Self.table.map(\.flag)).count == Self.table.count, "two rows share a flag")
        #expect(Set(Self.table.map(\.name)) == Set(Self.contract.map(\.name)))
        for (name, contractDefault) in Self.contract {
            let setting = try #require(Self.table.first { $0.name == name })
            #expect(setting.defaultValue.text == contractDefault, "\(name): the table's default is not the contract's")
            if let range = Self.contractRanges[name] {
                guard case .integer(let allowed) = setting.allowed else { Issue.record("\(name) is not an integer"); continue }
                #expect(allowed == range, "\(name)")
            }
        }
        for setting in Self.table {
            #expect(ConfigurationVariable(rawValue: setting.name)?.setting.name == setting.name)
            #expect(!setting.meaning.isEmpty && !setting.flag.isEmpty)
            #expect(setting.help.contains("Env: \(setting.name). Default: \(setting.defaultValue). Allowed: \(setting.allowed)."))
        }
    }

    /// The rows of docs/configuration.md's settings tables (variable, flag,
    /// default, allowed, meaning), by variable.
    static func documentedRows() throws -> [String: [String]] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        var rows: [String: [String]] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { String($0).trimmingCharacters(in: CharacterSet.whitespaces) }
            // The secret files' table has two columns; the settings' five.
            guard cells.count == 5 else { continue }
            let name = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            #expect(rows[name] == nil, "docs/configuration.md has two rows for \(name)")
            rows[name] = cells
        }
        return rows
    }

    @Test func theDocsListTheTablesVariablesWithItsFlagsDefaultsAndRanges() throws {
        let rows = try Self.documentedRows()
        #expect(Set(rows.keys) == Set(Self.table.map(\.name)))
        for setting in Self.table {
            guard let row = rows[setting.name] else { continue }
            #expect(row[1] == "`--\(setting.flag)`", "\(setting.name)")
            if let text = setting.defaultValue.text {
                #expect(row[2].contains("`\(text)`"), "\(setting.name): the docs' default is not `\(text)`")
            }
            switch setting.allowed {
            case .integer(let range):
                #expect(row[3].contains("\(range.lowerBound)–\(range.upperBound)"), "\(setting.name): the docs' range is not \(range)")
            case .oneOf(let words):
                for word in words { #expect(row[3].contains("`\(word)`"), "\(setting.name): the docs lack \(word)") }
            case .visibleASCII(let lengths):
                #expect(row[3].contains("\(lengths.lowerBound)–\(lengths.upperBound) visible ASCII characters"), "\(setting.name)")
            case .address, .countryCode, .file, .text:
                break
            }
        }
    }

    // MARK: - Loading

    /// With nothing set, each setting's effective value is the table's
    /// default; giving that default changes nothing.
    @Test func everyDefaultIsTheTables() throws {
        let empty = try Self.summary([:])
        // The Redis settings are shown only with a Redis to apply to.
        let withRedis = try Self.summary(["GATEWAY_REDIS_URL": "redis://cache.internal"])
        for setting in Self.table {
            let shown = empty[setting.name] == "<unused>" ? withRedis[setting.name] : empty[setting.name]
            switch setting.defaultValue {
            case .value(let text, _):
                #expect(shown == text, "\(setting.name): loaded \(shown ?? "nothing"), the table says \(text)")
                #expect(try Self.summary([setting.name: text]) == empty, "\(setting.name): giving the default changed the configuration")
            case .processorCount:
                #expect(shown == "\(ProcessInfo.processInfo.activeProcessorCount)", "\(setting.name)")
            case .unset:
                if case .inLineOf(let other) = setting.shown {
                    #expect(shown == nil, "\(setting.name) has a line of its own")
                    #expect(empty[other.rawValue] == "<unset>", "\(setting.name): \(other.rawValue) is set")
                } else {
                    #expect(shown?.hasPrefix("<") == true && shown?.hasSuffix(">") == true, "\(setting.name): loaded \(shown ?? "nothing") without a value")
                }
            }
        }
    }

    /// Values each `.text` row refuses: its form is not one the test can
    /// derive from.
    static let refusedText: [String: [String]] = [
        "ONSIDE_UPSTREAM_URL": ["http://products.example", "https://user:pw@products.example"],
        // Any one line is a token; what is refused is an example's placeholder.
        "ONSIDE_API_TOKEN": ["<your token>"],
        "GATEWAY_API_KEYS": ["too-short", " , "],
        "GATEWAY_REDIS_URL": ["https://cache", "redis://cache/99999"],
    ]

    /// Values outside `setting`'s range or form.
    static func refusedValues(_ setting: GatewaySetting) -> [String] {
        switch setting.allowed {
        case .integer(let range): ["\(range.lowerBound - 1)", "\(range.upperBound + 1)", "12abc"]
        case .oneOf: ["none-of-these"]
        case .address: ["nonsense", "127.0.0.1:65536"]
        case .visibleASCII(let lengths): [String(repeating: "a", count: lengths.upperBound + 1), "has space"]
        case .countryCode: ["ZZ", "Germany"]
        case .file: ["/nonexistent/gateway-\(UUID().uuidString)"]
        case .text: refusedText[setting.name] ?? []
        }
    }

    /// Values at the edges of `setting`'s range, all taken.
    static func edgeValues(_ setting: GatewaySetting) -> [String] {
        switch setting.allowed {
        case .integer(let range): ["\(range.lowerBound)", "\(range.upperBound)"]
        case .oneOf(let words): words.map { $0.uppercased() }
        case .address: ["[::1]:0", "localhost:65535"]
        case .visibleASCII(let lengths): [String(repeating: "a", count: lengths.lowerBound), String(repeating: "~", count: lengths.upperBound)]
        case .countryCode: ["de"]
        case .file, .text: []
        }
    }

    @Test(arguments: ConfigurationVariable.allCases)
    func aValueOutOfRangeStopsLoadingNamingItsVariable(variable: ConfigurationVariable) throws {
        let setting = variable.setting
        let refused = Self.refusedValues(setting)
        #expect(!refused.isEmpty, "no refused value for \(setting.name): add one to refusedText")
        // A placeholder of an example configuration is refused for every setting.
        let placeholder = try #require(GatewayConfigurationTests.error([setting.name: "<placeholder>"]))
        #expect(placeholder.variable == setting.name)
        for value in refused {
            let error = try #require(GatewayConfigurationTests.error([setting.name: value]), "\(setting.name)=\(value) was taken")
            #expect(error.variable == setting.name)
            #expect(error.description.hasPrefix("invalid \(setting.name) (--\(setting.flag)): "), "\(error.description)")
            // The flag is refused alike, under its variable.
            #expect(GatewayConfigurationTests.error([:], overrides: [variable: value]) == error)
            switch setting.allowed {
            case .integer(let range):
                #expect(error.message == "expected an integer from \(range.lowerBound) to \(range.upperBound), got '\(value)'")
            case .oneOf(let words):
                #expect(error.message == "expected one of \(words.joined(separator: ", ")), got '\(value)'")
            default:
                break
            }
        }
        for value in Self.edgeValues(setting) {
            #expect(GatewayConfigurationTests.error([setting.name: value]) == nil, "\(setting.name)=\(value) was refused")
        }
    }

    // MARK: - Secrets

    static let marker = "s3cr3t-marker-0123456789"

    /// An environment in which `name` holds (or names a file holding) the
    /// marker; nil for a setting that holds no secret.
    static func environmentHoldingTheMarker(_ name: String) throws -> [String: String]? {
        switch name {
        case "ONSIDE_API_TOKEN": [name: marker]
        case "ONSIDE_API_TOKEN_FILE": [name: try GatewayConfigurationTests.temporaryFile(marker + "\n")]
        case "GATEWAY_API_KEYS": [name: "key-\(marker)"]
        case "GATEWAY_API_KEYS_FILE": [name: try GatewayConfigurationTests.temporaryFile("key-\(marker)\n")]
        case "GATEWAY_REDIS_URL": [name: "redis://:\(marker)@cache:6379/1"]
        case "GATEWAY_REDIS_PASSWORD_FILE": ["GATEWAY_REDIS_URL": "redis://cache", name: try GatewayConfigurationTests.temporaryFile(marker + "\n")]
        default: nil
        }
    }

    /// A secret, or a file holding one, is shown as set, never as itself;
    /// a placeholder in a secret is not quoted either.
    @Test(arguments: ConfigurationVariable.allCases)
    func secretsNeverAppearInTheSummary(variable: ConfigurationVariable) throws {
        let setting = variable.setting
        let line: ConfigurationVariable
        if case .inLineOf(let other) = setting.shown { line = other } else { line = variable }
        guard line.isSecret else {
            #expect(try Self.environmentHoldingTheMarker(setting.name) == nil, "\(setting.name) is not marked secret")
            return
        }
        let environment = try #require(try Self.environmentHoldingTheMarker(setting.name), "no secret sample for \(setting.name)")
        let configuration = try GatewayConfiguration.load(environment: environment)
        let summary = configuration.redactedSummary
        let text = summary.map { "\($0.0)=\($0.1)" }.joined(separator: "\n")
        #expect(!text.contains(Self.marker), "\(text)")
        let shown = try #require(summary.first { $0.0 == line.rawValue }?.1)
        switch line.setting.shown {
        case .secret: #expect(shown == "<redacted>")
        case .secrets: #expect(shown == "<1 redacted>")
        case .redacted: #expect(shown.contains("<redacted>"))
        case .value, .inLineOf: Issue.record("\(line.rawValue) is secret but shown as a value")
        }

        let placeholder = try #require(GatewayConfigurationTests.error([setting.name: "<\(Self.marker)>"]))
        #expect(placeholder.variable == setting.name)
        #expect(setting.isSecret == !placeholder.description.contains(Self.marker), "\(placeholder.description)")
    }
}
