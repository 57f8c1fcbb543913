import Foundation
import Logging
@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
import ProductsDomain
import Testing

/// `GatewayConfiguration.load`: the defaults of contract section 3, and
/// every bad value stopping start-up with a message naming its variable.
@Suite("GatewayConfiguration")
struct GatewayConfigurationTests {
    static let upstream = [
        "ONSIDE_UPSTREAM_URL": "https://products.onside.example",
        "ONSIDE_APP_ID": "demo",
    ]

    /// A file in a fresh temporary directory, holding `text`.
    static func temporaryFile(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "gateway-config-\(UUID().uuidString)"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The error `load` throws, or nil when it succeeds.
    static func error(_ environment: [String: String], overrides: [ConfigurationVariable: String] = [:]) -> ConfigurationError? {
        do {
            _ = try GatewayConfiguration.load(environment: environment, overrides: overrides)
            return nil
        } catch {
            return error
        }
    }

    @Test func defaultsAreTheContractsWithTheEmbeddedCatalog() throws {
        let configuration = try GatewayConfiguration.load(environment: [:])
        #expect(configuration.listenHost == "127.0.0.1")
        #expect(configuration.listenPort == 8080)
        #expect(configuration.workers == ProcessInfo.processInfo.activeProcessorCount)
        #expect(configuration.upstream == nil)
        #expect(configuration.appID == "demo")
        #expect(configuration.apiToken == nil)
        #expect(configuration.caFile == nil)
        #expect(configuration.catalogPath == nil)
        #expect(configuration.defaultCountry == nil)
        #expect(configuration.maxIdentifiers == 100)
        #expect(configuration.maxBatch == 50)
        #expect(configuration.batchConcurrency == 16)
        #expect(configuration.maxBodyBytes == 65536)
        #expect(configuration.requestTimeoutMS == 5000)
        #expect(configuration.readTimeoutMS == 10_000)
        #expect(configuration.idleTimeoutMS == 60_000)
        #expect(configuration.maxConnections == 1024)
        #expect(configuration.apiKeys.isEmpty)
        #expect(configuration.upstreamTimeoutMS == 2000)
        #expect(configuration.upstreamMaxIDs == 50)
        #expect(configuration.mergeWindowUS == 0)
        #expect(configuration.upstreamConcurrency == 64)
        #expect(configuration.upstreamRetries == 2)
        #expect(configuration.upstreamMaxBodyBytes == 8_388_608)
        #expect(configuration.cacheMaxTTLSeconds == 60)
        #expect(configuration.cacheMaxBytes == 33_554_432)
        #expect(configuration.cacheMaxStaleSeconds == 300)
        #expect(configuration.shutdownGraceMS == 10_000)
        #expect(configuration.logLevel == "info")
        #expect(configuration.logFormat == .json)
    }

    @Test func anUpstreamURLIsSplitIntoHostPortAndBasePath() throws {
        var environment = Self.upstream
        environment["ONSIDE_UPSTREAM_URL"] = "https://api.onside.example:8443/products/"
        let configuration = try GatewayConfiguration.load(environment: environment)
        #expect(configuration.upstream == .init(host: "api.onside.example", port: 8443, basePath: "/products"))

        let plain = try GatewayConfiguration.load(environment: Self.upstream)
        #expect(plain.upstream == .init(host: "products.onside.example", port: 443, basePath: ""))
    }

    @Test func everySettingIsRead() throws {
        let configuration = try GatewayConfiguration.load(environment: [
            "GATEWAY_LISTEN": "[::1]:8088",
            "GATEWAY_WORKERS": "3",
            "GATEWAY_DEFAULT_COUNTRY": "de",
            "GATEWAY_MAX_IDS": "120",
            "GATEWAY_MAX_BATCH": "5",
            "GATEWAY_MAX_BODY_BYTES": "1024",
            "GATEWAY_REQUEST_TIMEOUT_MS": "1500",
            "GATEWAY_READ_TIMEOUT_MS": "2500",
            "GATEWAY_IDLE_TIMEOUT_MS": "7000",
            "GATEWAY_MAX_CONNECTIONS": "64",
            "GATEWAY_API_KEYS": "key-0123456789abcdef, key-fedcba9876543210",
            "UPSTREAM_TIMEOUT_MS": "300",
            "UPSTREAM_MAX_IDS": "10",
            "GATEWAY_MERGE_WINDOW_US": "100000",
            "UPSTREAM_CONCURRENCY": "4",
            "GATEWAY_BATCH_CONCURRENCY": "3",
            "UPSTREAM_RETRIES": "0",
            "GATEWAY_CACHE_MAX_TTL_S": "0",
            "GATEWAY_CACHE_MAX_BYTES": "1048576",
            "GATEWAY_CACHE_MAX_STALE_S": "45",
            "GATEWAY_SHUTDOWN_GRACE_MS": "0",
            "LOG_LEVEL": "DEBUG",
            "LOG_FORMAT": "text",
        ])
        #expect(configuration.listenHost == "::1")
        #expect(configuration.listenPort == 8088)
        #expect(configuration.workers == 3)
        #expect(configuration.defaultCountry == CountryCode("DE"))
        #expect(configuration.maxIdentifiers == 120)
        #expect(configuration.maxBatch == 5)
        #expect(configuration.maxBodyBytes == 1024)
        #expect(configuration.requestTimeoutMS == 1500)
        #expect(configuration.readTimeoutMS == 2500)
        #expect(configuration.idleTimeoutMS == 7000)
        #expect(configuration.maxConnections == 64)
        #expect(configuration.apiKeys == ["key-0123456789abcdef", "key-fedcba9876543210"])
        #expect(configuration.upstreamTimeoutMS == 300)
        #expect(configuration.upstreamMaxIDs == 10)
        #expect(configuration.mergeWindowUS == 100_000)
        #expect(configuration.upstreamConcurrency == 4)
        #expect(configuration.batchConcurrency == 3)
        #expect(configuration.upstreamRetries == 0)
        #expect(configuration.cacheMaxTTLSeconds == 0)
        #expect(configuration.cacheMaxBytes == 1_048_576)
        #expect(configuration.cacheMaxStaleSeconds == 45)
        #expect(configuration.shutdownGraceMS == 0)
        #expect(configuration.logLevel == "debug")
        #expect(configuration.logFormat == .text)
    }

    @Test func flagsTakePrecedenceAndAnEmptyVariableMeansUnset() throws {
        let configuration = try GatewayConfiguration.load(
            environment: ["GATEWAY_MAX_IDS": "100", "UPSTREAM_RETRIES": "", "LOG_FORMAT": ""],
            overrides: [.maxIDs: "7"]
        )
        #expect(configuration.maxIdentifiers == 7)
        #expect(configuration.upstreamRetries == 2)
        #expect(configuration.logFormat == .json)
        #expect(try GatewayConfiguration.load(environment: [:], overrides: [.cacheMaxBytes: "0"]).cacheMaxBytes == 0)
        #expect(Self.error([:], overrides: [.cacheMaxBytes: "-1"])?.variable == "GATEWAY_CACHE_MAX_BYTES")
        #expect(try GatewayConfiguration.load(environment: [:], overrides: [.cacheMaxStaleSeconds: "0"]).cacheMaxStaleSeconds == 0)
        #expect(Self.error([:], overrides: [.cacheMaxStaleSeconds: "soon"])?.variable == "GATEWAY_CACHE_MAX_STALE_S")
        // A bad flag is reported under its variable too.
        #expect(Self.error([:], overrides: [.maxIDs: "abc"])?.variable == "GATEWAY_MAX_IDS")
    }

    @Test func theSharedTierIsReadFromItsURLAndPasswordFile() throws {
        #expect(try GatewayConfiguration.load(environment: [:]).redis == nil)
        let plain = try GatewayConfiguration.load(environment: ["GATEWAY_REDIS_URL": "redis://cache.internal"]).redis
        #expect(plain == .init(host: "cache.internal", port: 6379, password: nil, database: 0, timeoutMS: 50, prefix: "onside-gw:"))
        let full = try GatewayConfiguration.load(environment: [
            "GATEWAY_REDIS_URL": "redis://:p%40ss@10.0.0.5:6380/3", "GATEWAY_REDIS_TIMEOUT_MS": "20", "GATEWAY_REDIS_PREFIX": "gw-a:",
        ])
        #expect(full.redis == .init(host: "10.0.0.5", port: 6380, password: "p@ss", database: 3, timeoutMS: 20, prefix: "gw-a:"))
        #expect(full.redis?.redactedURL == "redis://:<redacted>@10.0.0.5:6380/3")
        #expect(!full.redactedSummary.contains { $0.1.contains("p@ss") })

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("redis-pw-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        // One trailing newline is ignored, as a Secret or `echo` writes it.
        try "from file \n".write(toFile: path, atomically: true, encoding: .utf8)
        let fromFile = try GatewayConfiguration.load(environment: ["GATEWAY_REDIS_URL": "redis://r", "GATEWAY_REDIS_PASSWORD_FILE": path])
        #expect(fromFile.redis?.password == "from file ")
        try "a\r\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try GatewayConfiguration.load(environment: ["GATEWAY_REDIS_URL": "redis://r", "GATEWAY_REDIS_PASSWORD_FILE": path]).redis?.password == "a")
        try "a\nb\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(Self.error(["GATEWAY_REDIS_URL": "redis://r", "GATEWAY_REDIS_PASSWORD_FILE": path])?.variable == "GATEWAY_REDIS_PASSWORD_FILE")
        #expect(Self.error(["GATEWAY_REDIS_URL": "redis://:x@r", "GATEWAY_REDIS_PASSWORD_FILE": path])?.variable == "GATEWAY_REDIS_PASSWORD_FILE")
        #expect(Self.error(["GATEWAY_REDIS_PASSWORD_FILE": path])?.variable == "GATEWAY_REDIS_PASSWORD_FILE")
        #expect(Self.error(["GATEWAY_REDIS_URL": "redis://r", "GATEWAY_REDIS_PASSWORD_FILE": "/nonexistent/pw"])?.variable == "GATEWAY_REDIS_PASSWORD_FILE")
    }

    @Test(arguments: ["rediss://r", "http://r", "redis://", "redis://r/db", "redis://r/99999", "redis://admin:pw@r", "redis://r?x=1", "redis://r:0"])
    func aBadRedisURLNamesItsVariableWithoutThePassword(url: String) throws {
        let error = try #require(Self.error(["GATEWAY_REDIS_URL": url]))
        #expect(error.variable == "GATEWAY_REDIS_URL")
        #expect(!error.message.contains("pw"))
    }

    @Test(arguments: [
        ("GATEWAY_MAX_IDS", "abc"),
        ("GATEWAY_MAX_IDS", "0"),
        ("GATEWAY_MAX_IDS", "10001"),
        ("GATEWAY_WORKERS", "0"),
        ("GATEWAY_MAX_BATCH", "-1"),
        ("GATEWAY_MAX_BODY_BYTES", "12"),
        ("GATEWAY_REQUEST_TIMEOUT_MS", "0"),
        ("GATEWAY_REQUEST_TIMEOUT_MS", "1.5"),
        ("GATEWAY_READ_TIMEOUT_MS", "0"),
        ("GATEWAY_READ_TIMEOUT_MS", "10s"),
        ("GATEWAY_IDLE_TIMEOUT_MS", "-1"),
        ("GATEWAY_MAX_CONNECTIONS", "0"),
        ("GATEWAY_MAX_CONNECTIONS", "many"),
        ("UPSTREAM_TIMEOUT_MS", "soon"),
        ("UPSTREAM_MAX_IDS", "0"),
        ("GATEWAY_MERGE_WINDOW_US", "-1"),
        ("GATEWAY_MERGE_WINDOW_US", "100001"),
        ("GATEWAY_MERGE_WINDOW_US", "1ms"),
        ("UPSTREAM_CONCURRENCY", "0"),
        ("GATEWAY_BATCH_CONCURRENCY", "0"),
        ("GATEWAY_BATCH_CONCURRENCY", "10001"),
        ("UPSTREAM_RETRIES", "11"),
        ("UPSTREAM_RETRIES", "-1"),
        ("UPSTREAM_MAX_BODY_BYTES", "0"),
        ("UPSTREAM_MAX_BODY_BYTES", "8MB"),
        ("GATEWAY_CACHE_MAX_TTL_S", "-5"),
        ("GATEWAY_CACHE_MAX_BYTES", "-1"),
        ("GATEWAY_CACHE_MAX_BYTES", "32MiB"),
        ("GATEWAY_CACHE_MAX_BYTES", "1.5"),
        ("GATEWAY_CACHE_MAX_STALE_S", "-1"),
        ("GATEWAY_CACHE_MAX_STALE_S", "5m"),
        ("GATEWAY_CACHE_MAX_STALE_S", "604801"),
        ("GATEWAY_REDIS_TIMEOUT_MS", "0"),
        ("GATEWAY_REDIS_TIMEOUT_MS", "fast"),
        ("GATEWAY_REDIS_PREFIX", "has space"),
        ("GATEWAY_REDIS_URL", "https://cache"),
        ("GATEWAY_SHUTDOWN_GRACE_MS", "abc"),
        ("LOG_LEVEL", "verbose"),
        ("LOG_FORMAT", "xml"),
        ("GATEWAY_LISTEN", "nonsense"),
        ("GATEWAY_LISTEN", ":8080"),
        ("GATEWAY_LISTEN", "127.0.0.1:99999"),
        ("GATEWAY_LISTEN", "127.0.0.1:http"),
        ("GATEWAY_LISTEN", "[::1]8080"),
        ("GATEWAY_DEFAULT_COUNTRY", "ZZ"),
        ("GATEWAY_DEFAULT_COUNTRY", "Germany"),
        ("ONSIDE_APP_ID", "has space"),
        ("GATEWAY_API_KEYS", "too-short"),
        ("GATEWAY_API_KEYS", " , "),
    ])
    func aBadValueNamesItsVariable(variable: String, value: String) throws {
        let error = try #require(Self.error([variable: value]))
        #expect(error.variable == variable)
        #expect(error.description.contains(variable))
    }

    @Test(arguments: [
        "http://products.onside.example",
        "HTTP://products.onside.example:80",
        "ftp://products.onside.example",
        "products.onside.example",
        "https://",
        "https://user:secret@products.onside.example",
        "https://products.onside.example/?x=1",
        "https://products.onside.example/#frag",
    ])
    func anUpstreamURLThatIsNotPlainHTTPSIsRefused(url: String) throws {
        let error = try #require(Self.error(["ONSIDE_UPSTREAM_URL": url, "ONSIDE_APP_ID": "demo"]))
        #expect(error.variable == "ONSIDE_UPSTREAM_URL")
        #expect(error.description.contains("ONSIDE_UPSTREAM_URL"))
        // Credentials in a URL are never echoed back.
        #expect(!error.description.contains("secret"))
    }

    @Test func plainHTTPIsRefusedSayingHTTPSIsRequired() throws {
        let error = try #require(Self.error(["ONSIDE_UPSTREAM_URL": "http://localhost:8443", "ONSIDE_APP_ID": "demo"]))
        #expect(error.variable == "ONSIDE_UPSTREAM_URL")
        #expect(error.message.contains("https://"))
    }

    @Test func theAppIDIsRequiredWithAnUpstream() throws {
        let error = try #require(Self.error(["ONSIDE_UPSTREAM_URL": "https://products.onside.example"]))
        #expect(error.variable == "ONSIDE_APP_ID")
        #expect(error.message.contains("ONSIDE_UPSTREAM_URL"))
    }

    @Test func aCatalogAndAnUpstreamTogetherAreRefused() throws {
        let catalog = try Self.temporaryFile(Catalog.sampleJSON)
        var environment = Self.upstream
        environment["GATEWAY_CATALOG"] = catalog
        #expect(Self.error(environment)?.variable == "GATEWAY_CATALOG")
    }

    @Test func unreadableFilesAreNamed() throws {
        let missing = NSTemporaryDirectory() + "gateway-config-missing-\(UUID().uuidString)"
        var withCA = Self.upstream
        withCA["ONSIDE_CA_FILE"] = missing
        #expect(Self.error(withCA)?.variable == "ONSIDE_CA_FILE")
        #expect(Self.error(["GATEWAY_CATALOG": missing])?.variable == "GATEWAY_CATALOG")
        #expect(Self.error(["ONSIDE_API_TOKEN_FILE": missing])?.variable == "ONSIDE_API_TOKEN_FILE")
        #expect(Self.error(["GATEWAY_API_KEYS_FILE": missing])?.variable == "GATEWAY_API_KEYS_FILE")
    }

    @Test func theTokenComesFromItsVariableOrItsFileButNotBoth() throws {
        let file = try Self.temporaryFile("file-token-0123456789\n")
        var environment = Self.upstream
        environment["ONSIDE_API_TOKEN_FILE"] = file
        #expect(try GatewayConfiguration.load(environment: environment).apiToken == "file-token-0123456789")

        environment["ONSIDE_API_TOKEN"] = "env-token-0123456789"
        let error = try #require(Self.error(environment))
        #expect(error.variable == "ONSIDE_API_TOKEN_FILE")
        #expect(error.message.contains("ONSIDE_API_TOKEN"))
        #expect(!error.description.contains("env-token-0123456789"))
        #expect(!error.description.contains("file-token-0123456789"))

        environment["ONSIDE_API_TOKEN_FILE"] = nil
        #expect(try GatewayConfiguration.load(environment: environment).apiToken == "env-token-0123456789")
    }

    @Test(arguments: ["", "  \n", "line-one-0123456789\nline-two-0123456789\n"])
    func aTokenFileMustHoldOneLine(text: String) throws {
        let file = try Self.temporaryFile(text)
        var environment = Self.upstream
        environment["ONSIDE_API_TOKEN_FILE"] = file
        let error = try #require(Self.error(environment))
        #expect(error.variable == "ONSIDE_API_TOKEN_FILE")
        #expect(!error.description.contains("line-one"))
    }

    @Test func apiKeysComeFromTheListOrTheFileButNotBoth() throws {
        let file = try Self.temporaryFile("# the billing service\nkey-0123456789abcdef\n\n  key-fedcba9876543210  \n")
        #expect(try GatewayConfiguration.load(environment: ["GATEWAY_API_KEYS_FILE": file]).apiKeys == ["key-0123456789abcdef", "key-fedcba9876543210"])
        let both = try #require(Self.error(["GATEWAY_API_KEYS_FILE": file, "GATEWAY_API_KEYS": "key-0123456789abcdef"]))
        #expect(both.variable == "GATEWAY_API_KEYS_FILE")
        let empty = try Self.temporaryFile("# nothing here\n")
        #expect(Self.error(["GATEWAY_API_KEYS_FILE": empty])?.variable == "GATEWAY_API_KEYS_FILE")
    }

    @Test func aBadAPIKeyIsNeverEchoed() throws {
        let error = try #require(Self.error(["GATEWAY_API_KEYS": "key-0123456789abcdef,short-secret"]))
        #expect(error.variable == "GATEWAY_API_KEYS")
        #expect(error.message.contains("#2"))
        #expect(!error.description.contains("short-secret"))
        #expect(!error.description.contains("key-0123456789abcdef"))
    }

    @Test func theSummaryRedactsSecrets() throws {
        var environment = Self.upstream
        environment["ONSIDE_API_TOKEN"] = "env-token-0123456789"
        environment["GATEWAY_API_KEYS"] = "key-0123456789abcdef"
        environment["GATEWAY_REDIS_URL"] = "redis://:redis-secret-42@cache:6379/1"
        let summary = try GatewayConfiguration.load(environment: environment).redactedSummary
        let text = summary.map { "\($0.0)=\($0.1)" }.joined(separator: "\n")
        #expect(!text.contains("env-token-0123456789"))
        #expect(!text.contains("key-0123456789abcdef"))
        #expect(!text.contains("redis-secret-42"))
        #expect(text.contains("GATEWAY_REDIS_URL=redis://:<redacted>@cache:6379/1"))
        #expect(text.contains("ONSIDE_UPSTREAM_URL=https://products.onside.example:443"))
        #expect(Set(summary.map(\.0)) == Set(ConfigurationVariable.allCases.map(\.rawValue)).subtracting(["ONSIDE_API_TOKEN_FILE", "GATEWAY_API_KEYS_FILE", "GATEWAY_REDIS_PASSWORD_FILE"]))
    }

    @Test func theAdminListenerIsOptionalAndNeedsAPortOfItsOwn() throws {
        #expect(try GatewayConfiguration.load(environment: [:]).adminListen == nil)
        let set = try GatewayConfiguration.load(environment: ["GATEWAY_LISTEN": "0.0.0.0:8080", "GATEWAY_ADMIN_LISTEN": "0.0.0.0:9464"])
        #expect(set.adminListen == .init(host: "0.0.0.0", port: 9464))
        #expect(set.redactedSummary.contains { $0 == ("GATEWAY_ADMIN_LISTEN", "0.0.0.0:9464") })
        #expect(try GatewayConfiguration.load(environment: [:], overrides: [.adminListen: "[::1]:9091"]).adminListen == .init(host: "::1", port: 9091))
        #expect(Self.error(["GATEWAY_ADMIN_LISTEN": "9464"])?.variable == "GATEWAY_ADMIN_LISTEN")
        #expect(Self.error(["GATEWAY_ADMIN_LISTEN": "0.0.0.0:70000"])?.variable == "GATEWAY_ADMIN_LISTEN")
        // Both listeners use SO_REUSEPORT: one port would split the callers
        // between them.
        let same = try #require(Self.error(["GATEWAY_LISTEN": "127.0.0.1:8080", "GATEWAY_ADMIN_LISTEN": "0.0.0.0:8080"]))
        #expect(same.variable == "GATEWAY_ADMIN_LISTEN")
        #expect(same.message.contains("GATEWAY_LISTEN"))
    }

    @Test func everyVariableHasAFlag() {
        for variable in ConfigurationVariable.allCases {
            #expect(!variable.flag.isEmpty)
            #expect(ConfigurationError(variable: variable.rawValue, message: "x").description.contains("--\(variable.flag)"))
        }
    }
}

@Suite("Secrets in messages and text logs")
struct MessageHygieneTests {
    /// A URL that does not parse, or has no host, is quoted in the error
    /// without the `user:password@` in it.
    @Test(arguments: ["https://admin:s3cr3t@", "https://admin:s3cr3t@ bad host/x", "https://admin:s3cr3t@[::1/x"])
    func aBadUpstreamURLIsQuotedWithoutItsCredentials(url: String) throws {
        let error = try #require(GatewayConfigurationTests.error(["ONSIDE_UPSTREAM_URL": url, "ONSIDE_APP_ID": "demo"]))
        #expect(error.variable == "ONSIDE_UPSTREAM_URL")
        #expect(!error.description.contains("s3cr3t"), "\(error.description)")
        #expect(!error.description.contains("admin"), "\(error.description)")
    }

    /// Everything between `//` and the last `@` is taken for userinfo: a
    /// URL parser ends the authority at a `/`, `?` or `#` that a password
    /// may hold.
    @Test func userinfoIsRedactedUpToTheLastAt() {
        #expect(URLRedaction.redactingUserinfo("https://u:p@host:1/base@x") == "https://***@x")
        #expect(URLRedaction.redactingUserinfo("https://user:pa/ss@host") == "https://***@host")
        #expect(URLRedaction.redactingUserinfo("u:secret@host") == "***@host")
        #expect(URLRedaction.redactingUserinfo("https://host/a") == "https://host/a")
        #expect(URLRedaction.redactingUserinfo("no scheme") == "no scheme")
    }

    /// URLs written without `//` are redacted too: everything before the
    /// last `@` may be a scheme and a password (`redis:PASSWORD@host`), a
    /// user and a password (`redis:user:pass@host`) or a token read as a
    /// scheme (`TOKEN:x@host`).
    @Test func userinfoIsRedactedInURLsWrittenWithoutSlashes() {
        #expect(URLRedaction.quoted("redis:PASSWORD@host:6379", limit: 100) == "***@host:6379")
        #expect(URLRedaction.quoted("https:TOKEN@host", limit: 100) == "***@host")
        #expect(URLRedaction.quoted("redis:user:pass@host", limit: 100) == "***@host")
        #expect(URLRedaction.quoted("https:/TOKEN@host/base", limit: 100) == "***@host/base")
        #expect(URLRedaction.quoted("TOKEN:x-oauth-basic@host", limit: 100) == "***@host")
        #expect(URLRedaction.quoted("redis://:PASSWORD@host", limit: 100) == "redis://***@host")
        // Redacted before it is cut: a cut never leaves the part before
        // the `@` it no longer sees.
        #expect(URLRedaction.quoted("redis:PASSWORD@host", limit: 8) == "***@host")
        #expect(URLRedaction.quoted("0.0.0.0:9464", limit: 100) == "0.0.0.0:9464")
    }

    /// Values of the forms above, each with the secret `s3cr3t`.
    static let urlsWithoutSlashes = [
        "redis:PASS-s3cr3t@cache:6379",
        "https:TOKEN-s3cr3t@products.example",
        "redis:user:pass-s3cr3t@cache",
        "tokens3cr3t:x@cache:6379",
        "<redis:PASS-s3cr3t@cache>",
    ]

    /// Every variable whose bad value a message quotes, or that the
    /// start-up summary shows as given.
    static let variablesShowingTheirValue = [
        "GATEWAY_REDIS_URL", "ONSIDE_UPSTREAM_URL", "GATEWAY_LISTEN", "GATEWAY_ADMIN_LISTEN",
        "GATEWAY_MAX_IDS", "LOG_LEVEL", "GATEWAY_DEFAULT_COUNTRY", "ONSIDE_APP_ID",
        "ONSIDE_CA_FILE", "GATEWAY_CATALOG", "ONSIDE_API_TOKEN_FILE", "GATEWAY_API_KEYS_FILE",
    ]

    /// A URL pasted into any variable, written without `//`: a refusal
    /// names the variable and never quotes the secret; a value taken
    /// (`ONSIDE_APP_ID` is any visible text) is not shown with it either.
    @Test(arguments: urlsWithoutSlashes, variablesShowingTheirValue)
    func aURLWithoutSlashesNeverShowsItsSecret(url: String, variable: String) throws {
        var environment = [variable: url]
        if variable == "ONSIDE_UPSTREAM_URL" { environment["ONSIDE_APP_ID"] = "demo" }
        do {
            let configuration = try GatewayConfiguration.load(environment: environment)
            #expect(variable == "ONSIDE_APP_ID", "\(variable)=\(url) was taken")
            let summary = configuration.redactedSummary.map { "\($0.0)=\($0.1)" }.joined(separator: " ")
            #expect(!summary.contains("s3cr3t"), "\(summary)")
        } catch {
            #expect(error.variable == variable)
            #expect(!error.description.contains("s3cr3t"), "\(error.description)")
        }
    }

    /// A password holding `/`, `#` or `?` is never quoted, whichever of
    /// the URL's checks refuses it, in the error or the start-up summary.
    @Test(arguments: [
        "https://user:pa/ss-s3cr3t@products.example",
        "https://user:pa#ss-s3cr3t@products.example",
        "https://user:pa?ss-s3cr3t@products.example",
        "https://user:1/ss-s3cr3t@products.example",
        "https://products.example:1/ss-s3cr3t@x",
    ])
    func anUpstreamURLWithAPasswordOfAnyCharactersIsNeverQuoted(url: String) throws {
        let error = try #require(GatewayConfigurationTests.error(["ONSIDE_UPSTREAM_URL": url, "ONSIDE_APP_ID": "demo"]))
        #expect(error.variable == "ONSIDE_UPSTREAM_URL")
        #expect(!error.description.contains("s3cr3t"), "\(error.description)")
    }

    @Test(arguments: [
        "redis://:pa/ss-s3cr3t@",
        "redis://:pa#ss-s3cr3t@ bad host",
        "redis://:pa?ss-s3cr3t@cache:99999",
        "redis://someone:pa/ss-s3cr3t@cache",
        "redis://:1/ss-s3cr3t@cache/abc",
        "http://:pa/ss-s3cr3t@cache",
    ])
    func aRedisURLWithAPasswordOfAnyCharactersIsNeverQuoted(url: String) throws {
        let error = try #require(GatewayConfigurationTests.error(["GATEWAY_REDIS_URL": url]))
        #expect(error.variable == "GATEWAY_REDIS_URL")
        #expect(!error.description.contains("s3cr3t"), "\(error.description)")
    }

    /// Such a password is read whole, and the summary does not show it.
    @Test func aRedisPasswordHoldingSlashHashAndQuestionMarkIsReadWhole() throws {
        let configuration = try GatewayConfiguration.load(environment: ["GATEWAY_REDIS_URL": "redis://:pa/ss#s3?cr@t@cache:6380/2"])
        #expect(configuration.redis == .init(host: "cache", port: 6380, password: "pa/ss#s3?cr@t", database: 2, timeoutMS: 50, prefix: "onside-gw:"))
        #expect(!configuration.redactedSummary.contains { $0.1.contains("s3?cr") || $0.1.contains("pa/ss") })
    }

    /// A text line stays one line whatever a caller put in a method name.
    @Test func textLogsEscapeControlCharacters() {
        #expect(GatewayLogHandler.escaped("plain é") == "plain é")
        #expect(GatewayLogHandler.escaped("a\nb\r\tc") == #"a\nb\r\tc"#)
        #expect(GatewayLogHandler.escaped("x\u{1b}[31m\u{0}\u{7f}") == #"x\u{1b}[31m\u{0}\u{7f}"#)

        let lines = LockedLines()
        var handler = GatewayLogHandler(format: .text, level: .info, sink: { lines.append($0) })
        handler[metadataKey: "method"] = "fake\n2026-01-01T00:00:00.000Z INFO forged"
        handler.log(event: LogEvent(level: .info, message: "rpc call\u{1b}[2J", metadata: nil, source: "test", file: #fileID, function: #function, line: #line))
        let line = lines.all.joined()
        #expect(!line.contains("\n"))
        #expect(!line.contains("\u{1b}"))
        #expect(line.contains(#"method="fake\n2026-01-01T00:00:00.000Z INFO forged""#))
    }

    /// A text value holding a space, `=` or a quote is written quoted: a
    /// method name cannot plant fields of its own in the line.
    @Test func textLogValuesCannotPlantFields() {
        let lines = LockedLines()
        var handler = GatewayLogHandler(format: .text, level: .info, sink: { lines.append($0) })
        handler[metadataKey: "method"] = "x outcome=ok requestId=admin-4711"
        handler[metadataKey: "outcome"] = "invalidRequest"
        handler[metadataKey: "quote"] = #"a"b\c"#
        handler[metadataKey: "empty"] = ""
        handler.log(event: LogEvent(level: .info, message: "call", metadata: nil, source: "test", file: #fileID, function: #function, line: #line))
        let line = lines.all.joined()
        let fields = line.split(separator: " ", maxSplits: 3)[3]
        #expect(fields == #"empty="" method="x outcome=ok requestId=admin-4711" outcome=invalidRequest quote="a\"b\\c""#)
    }

    /// Numbers and flags given as such are JSON numbers and Booleans in
    /// JSON lines; text stays text.
    @Test func jsonLogsWriteNumbersAsNumbers() throws {
        let lines = LockedLines()
        var handler = GatewayLogHandler(format: .json, level: .info, sink: { lines.append($0) })
        handler[metadataKey: "durationMs"] = .stringConvertible(Int64(44))
        handler[metadataKey: "code"] = .stringConvertible(-32005)
        handler[metadataKey: "notification"] = .stringConvertible(true)
        handler[metadataKey: "method"] = "products.fetch"
        handler[metadataKey: "count"] = "12"
        handler.log(event: LogEvent(level: .info, message: "rpc call", metadata: nil, source: "test", file: #fileID, function: #function, line: #line))
        let line = try #require(lines.all.first)
        let tail = line[try #require(line.range(of: #""msg":"rpc call","#)).upperBound...]
        #expect(tail == #""code":-32005,"count":"12","durationMs":44,"method":"products.fetch","notification":true}"#)
    }
}

/// Lines a log sink received, from any thread.
final class LockedLines: @unchecked Sendable {
    // @unchecked: every access goes through `lock`.
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
