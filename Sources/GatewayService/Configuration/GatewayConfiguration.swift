public import SharedTier
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
public import ProductsDomain

/// The effective configuration of one gateway process, validated.
public struct GatewayConfiguration: Sendable {
    /// Where the HTTPS upstream lives.
    public struct Upstream: Sendable, Equatable {
        public var host: String
        public var port: Int
        /// Path prefix before `/v1/...`, without a trailing slash (may be empty).
        public var basePath: String
    }

    public var listenHost: String
    public var listenPort: Int
    /// `GATEWAY_ADMIN_LISTEN`: where `/healthz`, `/readyz` and `/metrics`
    /// are also served, outside `GATEWAY_MAX_CONNECTIONS`; nil when unset.
    public var adminListen: ListenAddress?
    public var workers: Int
    /// `nil` serves the catalog.
    public var upstream: Upstream?
    public var appID: String
    public var apiToken: String?
    public var caFile: String?
    public var catalogPath: String?
    public var defaultCountry: CountryCode?
    public var maxIdentifiers: Int
    public var maxBatch: Int
    /// `GATEWAY_BATCH_CONCURRENCY`: batches answered at once (``BatchTurns``).
    public var batchConcurrency: Int
    public var maxBodyBytes: Int
    /// `GATEWAY_MAX_ANSWER_BYTES`: the largest answer to one request
    /// (``JSONRPCServer/maxAnswerBytes``).
    public var maxAnswerBytes: Int
    public var requestTimeoutMS: Int
    /// `GATEWAY_READ_TIMEOUT_MS`: from a request's first byte to its last.
    public var readTimeoutMS: Int
    /// `GATEWAY_IDLE_TIMEOUT_MS`: a connection with no request in progress.
    public var idleTimeoutMS: Int
    /// `GATEWAY_MAX_CONNECTIONS`: client connections open at once.
    public var maxConnections: Int
    public var apiKeys: [String]
    public var upstreamTimeoutMS: Int
    public var upstreamMaxIDs: Int
    /// `GATEWAY_MERGE_WINDOW_US`: how long a loop may hold a miss to merge
    /// it with others, in microseconds (0: only within one loop turn).
    public var mergeWindowUS: Int
    public var upstreamConcurrency: Int
    public var upstreamRetries: Int
    /// `UPSTREAM_MAX_BODY_BYTES`: the largest upstream answer read.
    public var upstreamMaxBodyBytes: Int
    public var cacheMaxTTLSeconds: Int
    /// Most bytes the memory cache holds (0: nothing is kept).
    public var cacheMaxBytes: Int
    /// `GATEWAY_CACHE_MAX_STALE_S`: cap on `stale-if-error` and
    /// `stale-while-revalidate` (0: never stale).
    public var cacheMaxStaleSeconds: Int
    /// The shared tier (`GATEWAY_REDIS_*`); nil without `GATEWAY_REDIS_URL`.
    public var redis: Redis?
    public var shutdownGraceMS: Int
    public var logLevel: String
    public var logFormat: LogFormat
    /// The process locale variables (`LC_ALL`, `LANG`), for region resolution.
    public var systemLocale: SystemLocale
    /// Trace export and sampling (the `OTEL_*` variables).
    public var tracing: TracingSettings

    public enum LogFormat: String, Sendable { case json, text }

    /// A host (or address) and port to bind.
    public struct ListenAddress: Sendable, Equatable {
        public var host: String
        public var port: Int
    }

    /// Where the shared tier's Redis is.
    /// `GATEWAY_REDIS_URL` and its settings, read.
    public typealias Redis = RedisSettings

    /// Reads every variable from `environment`, with `overrides` (the
    /// command-line flags) taking precedence. Defaults and ranges are the
    /// settings table's (``ConfigurationVariable/setting``).
    public static func load(
        environment: [String: String],
        overrides: [ConfigurationVariable: String] = [:]
    ) throws(ConfigurationError) -> GatewayConfiguration {
        let source = SettingSource(environment: environment, overrides: overrides)
        try source.refusePlaceholders()
        let (host, port) = try source.listenAddress(.listen)
        let adminListen = try source.adminListenAddress(mainPort: port)
        let upstream = try source.upstream()
        let catalogPath = source.string(.catalog)
        if upstream != nil, catalogPath != nil {
            throw ConfigurationError(variable: ConfigurationVariable.catalog.rawValue, message: "is only used without ONSIDE_UPSTREAM_URL; unset one of them")
        }
        let appID = try source.appID(required: upstream != nil)
        let caFile = source.string(.caFile)
        if let caFile { try source.requireReadableFile(caFile, .caFile) }
        if let catalogPath { try source.requireReadableFile(catalogPath, .catalog) }
        let defaultCountry: CountryCode?
        if let text = source.string(.defaultCountry) {
            guard let code = CountryCode(text) else {
                throw ConfigurationError(variable: ConfigurationVariable.defaultCountry.rawValue, message: "'\(URLRedaction.quoted(text, limit: 40))' is not an assigned ISO 3166-1 alpha-2 country code")
            }
            defaultCountry = code
        } else {
            defaultCountry = nil
        }
        return GatewayConfiguration(
            listenHost: host,
            listenPort: port,
            adminListen: adminListen,
            workers: try source.integer(.workers),
            upstream: upstream,
            appID: appID,
            apiToken: try source.secret(value: .apiToken, file: .apiTokenFile),
            caFile: caFile,
            catalogPath: catalogPath,
            defaultCountry: defaultCountry,
            maxIdentifiers: try source.integer(.maxIDs),
            maxBatch: try source.integer(.maxBatch),
            batchConcurrency: try source.integer(.batchConcurrency),
            maxBodyBytes: try source.integer(.maxBodyBytes),
            maxAnswerBytes: try source.integer(.maxAnswerBytes),
            requestTimeoutMS: try source.integer(.requestTimeoutMS),
            readTimeoutMS: try source.integer(.readTimeoutMS),
            idleTimeoutMS: try source.integer(.idleTimeoutMS),
            maxConnections: try source.integer(.maxConnections),
            apiKeys: try source.apiKeys(),
            upstreamTimeoutMS: try source.integer(.upstreamTimeoutMS),
            upstreamMaxIDs: try source.integer(.upstreamMaxIDs),
            mergeWindowUS: try source.integer(.mergeWindowUS),
            upstreamConcurrency: try source.integer(.upstreamConcurrency),
            upstreamRetries: try source.integer(.upstreamRetries),
            upstreamMaxBodyBytes: try source.integer(.upstreamMaxBodyBytes),
            cacheMaxTTLSeconds: try source.integer(.cacheMaxTTLSeconds),
            cacheMaxBytes: try source.integer(.cacheMaxBytes),
            cacheMaxStaleSeconds: try source.integer(.cacheMaxStaleSeconds),
            redis: try source.redis(),
            shutdownGraceMS: try source.integer(.shutdownGraceMS),
            logLevel: try source.choice(.logLevel),
            logFormat: LogFormat(rawValue: try source.choice(.logFormat))!,
            systemLocale: SystemLocale(environment: environment),
            tracing: try TracingSettings.load(environment: environment)
        )
    }

    /// The configuration as `name=value` pairs for the start-up log, in
    /// the settings table's order and as each row shows it: a secret only
    /// as set or unset.
    public var redactedSummary: [(String, String)] {
        ConfigurationVariable.table.compactMap { setting in
            setting.shown.text(for: self).map { (setting.name, $0) }
        }
    }
}

/// Looks up one variable at a time and turns a bad value into an error that
/// names it.
private struct SettingSource {
    let environment: [String: String]
    let overrides: [ConfigurationVariable: String]

    /// The value, or nil when unset or empty (an empty variable means unset,
    /// as shells and container specs often leave them).
    func string(_ variable: ConfigurationVariable) -> String? {
        let value = overrides[variable] ?? environment[variable.rawValue]
        guard let value, !value.isEmpty else { return nil }
        return value
    }

    /// The value, else the table's default value (nil when the default is
    /// to be unset).
    func stringOrDefault(_ variable: ConfigurationVariable) -> String? {
        string(variable) ?? variable.setting.defaultValue.text
    }

    /// A value written `<like this>` is a placeholder of an example
    /// configuration (`deploy/kubernetes/configmap.yaml` marks what must be
    /// set so): starting with it would serve calls that all fail.
    func refusePlaceholders() throws(ConfigurationError) {
        for variable in ConfigurationVariable.allCases {
            guard let value = string(variable), value.hasPrefix("<"), value.hasSuffix(">") else { continue }
            let shown = variable.isSecret ? "" : " '\(URLRedaction.quoted(value, limit: 80))'"
            throw fail(variable, "still holds the placeholder\(shown) of the example configuration; set your own value")
        }
    }

    func fail(_ variable: ConfigurationVariable, _ message: String) -> ConfigurationError {
        ConfigurationError(variable: variable.rawValue, message: message)
    }

    /// An integer setting: its range and default from the table.
    func integer(_ variable: ConfigurationVariable) throws(ConfigurationError) -> Int {
        let setting = variable.setting
        guard case .integer(let range) = setting.allowed else { preconditionFailure("\(setting.name) is not an integer setting") }
        if string(variable) == nil, case .processorCount = setting.defaultValue {
            return ProcessInfo.processInfo.activeProcessorCount
        }
        guard let text = stringOrDefault(variable) else { preconditionFailure("\(setting.name) has no default value") }
        guard let value = Int(text), range.contains(value) else {
            throw fail(variable, "expected an integer from \(range.lowerBound) to \(range.upperBound), got '\(URLRedaction.quoted(text, limit: 40))'")
        }
        return value
    }

    /// One of the table's words for `variable` (its default when not given), in lower case.
    func choice(_ variable: ConfigurationVariable) throws(ConfigurationError) -> String {
        let setting = variable.setting
        guard case .oneOf(let choices) = setting.allowed else { preconditionFailure("\(setting.name) is not a choice") }
        guard let text = stringOrDefault(variable) else { preconditionFailure("\(setting.name) has no default value") }
        guard choices.contains(text.lowercased()) else {
            throw fail(variable, "expected one of \(choices.joined(separator: ", ")), got '\(URLRedaction.quoted(text, limit: 40))'")
        }
        return text.lowercased()
    }

    /// `GATEWAY_ADMIN_LISTEN`, nil when unset. Its port may not be the main
    /// listener's: both are bound with `SO_REUSEPORT`, so the kernel would
    /// share the callers' connections between them.
    func adminListenAddress(mainPort: Int) throws(ConfigurationError) -> GatewayConfiguration.ListenAddress? {
        guard string(.adminListen) != nil else { return nil }
        let (host, port) = try listenAddress(.adminListen)
        if port != 0 && port == mainPort {
            throw fail(.adminListen, "port \(port) is GATEWAY_LISTEN's; probes and metrics need a port of their own")
        }
        return .init(host: host, port: port)
    }

    /// `host:port` or `[ipv6]:port`, given or the table's default.
    func listenAddress(_ variable: ConfigurationVariable) throws(ConfigurationError) -> (String, Int) {
        guard let text = stringOrDefault(variable) else { preconditionFailure("\(variable.rawValue) is unset and has no default") }
        let shown = URLRedaction.quoted(text, limit: 60)
        // No host to bind holds an `@`: such a value is a URL pasted into
        // the wrong variable, and what precedes the `@` may be a password
        // (`redis:PASSWORD@host:6379` would otherwise pass as a host name
        // and be logged whole, and quoted again when it fails to resolve).
        guard !text.contains("@") else {
            throw fail(variable, "expected host:port or [ipv6]:port, got '\(shown)'")
        }
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw fail(variable, "expected host:port or [ipv6]:port, got '\(shown)'")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw fail(variable, "expected host:port, got '\(shown)'")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw fail(variable, "the host is empty in '\(shown)'") }
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw fail(variable, "the port must be 0 to 65535, got '\(URLRedaction.quoted(portText, limit: 20))'")
        }
        return (String(host), port)
    }

    func upstream() throws(ConfigurationError) -> GatewayConfiguration.Upstream? {
        guard let text = string(.upstreamURL) else { return nil }
        let shown = URLRedaction.quoted(text, limit: 100)
        // Any `@` after the `//` is taken for credentials, even where a URL
        // parser would see a path (`https://user:1/pa@ss`): refused, and the
        // URL is not quoted.
        if URLRedaction.splittingUserinfo(text).userinfo != nil {
            throw fail(.upstreamURL, "credentials in the URL are not allowed; use ONSIDE_API_TOKEN or ONSIDE_API_TOKEN_FILE")
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw fail(.upstreamURL, "expected https://host[:port][/base], got '\(shown)'")
        }
        // The value is quoted redacted, not its scheme: without `//`
        // (`TOKEN:secret@host`) a URL parser reads the token as the scheme.
        guard scheme == "https" else {
            throw fail(.upstreamURL, "only https:// is allowed (the upstream is reached over verified TLS), got '\(shown)'")
        }
        guard let host = components.host, !host.isEmpty else {
            throw fail(.upstreamURL, "the URL has no host: '\(shown)'")
        }
        guard components.user == nil, components.password == nil else {
            throw fail(.upstreamURL, "credentials in the URL are not allowed; use ONSIDE_API_TOKEN or ONSIDE_API_TOKEN_FILE")
        }
        guard components.query == nil, components.fragment == nil else {
            throw fail(.upstreamURL, "the URL must not have a query or fragment")
        }
        var base = components.percentEncodedPath
        while base.hasSuffix("/") { base.removeLast() }
        return .init(host: host, port: components.port ?? 443, basePath: base)
    }

    /// `ONSIDE_APP_ID`: given, else the table's default without an
    /// upstream; with one it is required.
    func appID(required: Bool) throws(ConfigurationError) -> String {
        if required, string(.appID) == nil { throw fail(.appID, "is required when ONSIDE_UPSTREAM_URL is set") }
        return try visibleASCII(.appID)
    }

    /// A setting of visible ASCII characters, as many as the table allows,
    /// given or the table's default.
    func visibleASCII(_ variable: ConfigurationVariable) throws(ConfigurationError) -> String {
        let setting = variable.setting
        guard case .visibleASCII(let lengths) = setting.allowed else { preconditionFailure("\(setting.name) is not visible ASCII") }
        guard let text = stringOrDefault(variable) else { preconditionFailure("\(setting.name) has no default value") }
        guard lengths.contains(text.utf8.count), text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw fail(variable, "expected \(lengths.lowerBound) to \(lengths.upperBound) visible ASCII characters")
        }
        return text
    }

    func requireReadableFile(_ path: String, _ variable: ConfigurationVariable) throws(ConfigurationError) {
        try ConfigurationFile.requireReadable(path, for: variable)
    }

    /// A file's text, UTF-8.
    func fileText(_ path: String, _ variable: ConfigurationVariable) throws(ConfigurationError) -> String {
        let bytes = try ConfigurationFile.read(path, for: variable)
        guard let text = String(validating: bytes, as: UTF8.self) else { throw fail(variable, "file '\(URLRedaction.redactingUserinfo(path))' is not UTF-8 text") }
        return text
    }

    /// A secret from a variable or from a file named by a second variable
    /// (the container-secret form); setting both is an error.
    func secret(value: ConfigurationVariable, file: ConfigurationVariable) throws(ConfigurationError) -> String? {
        let direct = string(value)
        guard let path = string(file) else { return direct }
        if direct != nil { throw fail(file, "set either \(value.rawValue) or \(file.rawValue), not both") }
        let text = try fileText(path, file)
        let secret = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !secret.isEmpty else { throw fail(file, "file '\(URLRedaction.redactingUserinfo(path))' is empty") }
        guard !secret.contains(where: { $0.isNewline }) else { throw fail(file, "file '\(URLRedaction.redactingUserinfo(path))' must hold one line") }
        return secret
    }

    /// `GATEWAY_REDIS_URL` (`redis://[:password@]host[:port][/db]`) with
    /// `GATEWAY_REDIS_PASSWORD_FILE`, `GATEWAY_REDIS_TIMEOUT_MS` and
    /// `GATEWAY_REDIS_PREFIX`. No message ever repeats the password.
    func redis() throws(ConfigurationError) -> GatewayConfiguration.Redis? {
        // Checked with or without a URL: a bad value is a mistake either way.
        let timeoutMS = try integer(.redisTimeoutMS)
        let prefix = try visibleASCII(.redisPrefix)
        guard let text = string(.redisURL) else {
            if string(.redisPasswordFile) != nil { throw fail(.redisPasswordFile, "is only used with GATEWAY_REDIS_URL") }
            return nil
        }
        let shown = URLRedaction.quoted(text, limit: 100)
        // The userinfo is split off at the last `@` before the URL is
        // parsed, so a password holding `/`, `?` or `#` is read whole, and
        // nothing after this quotes any of it.
        let (withoutUserinfo, userinfo) = URLRedaction.splittingUserinfo(text)
        guard let components = URLComponents(string: withoutUserinfo), let scheme = components.scheme?.lowercased() else {
            throw fail(.redisURL, "expected redis://[:password@]host[:port][/db], got '\(shown)'")
        }
        // The value is quoted redacted, not its scheme (see `upstream()`).
        guard scheme == "redis" else {
            throw fail(.redisURL, "only redis:// is supported (keep the Redis on a private network), got '\(shown)'")
        }
        guard let host = components.host, !host.isEmpty else { throw fail(.redisURL, "the URL has no host: '\(shown)'") }
        var urlPassword: String?
        if let userinfo {
            let colon = userinfo.firstIndex(of: ":")
            let user = colon.map { userinfo[..<$0] } ?? userinfo
            if !user.isEmpty, user != "default" {
                throw fail(.redisURL, "only the default user is supported: use redis://:password@host")
            }
            if let colon {
                let raw = String(userinfo[userinfo.index(after: colon)...])
                urlPassword = raw.removingPercentEncoding ?? raw
            }
        }
        guard components.query == nil, components.fragment == nil else {
            throw fail(.redisURL, "the URL must not have a query or fragment")
        }
        let port = components.port ?? 6379
        guard (1...65535).contains(port) else { throw fail(.redisURL, "the port must be 1 to 65535") }
        var path = components.path
        while path.hasPrefix("/") { path.removeFirst() }
        let database: Int
        if path.isEmpty {
            database = 0
        } else {
            guard let number = Int(path), (0...15_999).contains(number) else {
                throw fail(.redisURL, "the path must be a database number, got '/\(URLRedaction.quoted(path, limit: 20))'")
            }
            database = number
        }
        var password = urlPassword.flatMap { $0.isEmpty ? nil : $0 }
        if let path = string(.redisPasswordFile) {
            if password != nil { throw fail(.redisPasswordFile, "set the password either in GATEWAY_REDIS_URL or in GATEWAY_REDIS_PASSWORD_FILE, not both") }
            let text = try fileText(path, .redisPasswordFile)
            var secret = Substring(text)
            // One trailing newline, as `echo` and Kubernetes Secrets write it.
            // ("\r\n" is one Character in Swift.)
            if secret.last == "\n" || secret.last == "\r\n" { secret.removeLast() }
            guard !secret.isEmpty else { throw fail(.redisPasswordFile, "file '\(URLRedaction.redactingUserinfo(path))' is empty") }
            guard !secret.contains(where: { $0.isNewline }) else { throw fail(.redisPasswordFile, "file '\(URLRedaction.redactingUserinfo(path))' must hold one line") }
            password = String(secret)
        }
        return GatewayConfiguration.Redis(host: host, port: port, password: password, database: database, timeoutMS: timeoutMS, prefix: prefix)
    }

    func apiKeys() throws(ConfigurationError) -> [String] {
        let direct = string(.apiKeys)
        let keys: [String]
        let variable: ConfigurationVariable
        if let path = string(.apiKeysFile) {
            if direct != nil { throw fail(.apiKeysFile, "set either GATEWAY_API_KEYS or GATEWAY_API_KEYS_FILE, not both") }
            let text = try fileText(path, .apiKeysFile)
            keys = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty && !$0.hasPrefix("#") }
            variable = .apiKeysFile
        } else if let direct {
            keys = direct.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            variable = .apiKeys
        } else {
            return []
        }
        guard !keys.isEmpty else { throw fail(variable, "holds no key") }
        for (index, key) in keys.enumerated() {
            guard key.utf8.count >= 16, key.utf8.count <= 256, key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                // Never echo the key itself.
                throw fail(variable, "key #\(index + 1) must be 16 to 256 visible ASCII characters")
            }
        }
        return keys
    }
}

/// Keeps credentials out of messages about URLs, and out of every message
/// that quotes a configuration value: a URL pasted into another variable
/// (`GATEWAY_MAX_IDS`, `GATEWAY_ADMIN_LISTEN`, a file path) carries its
/// password just the same.
enum URLRedaction {
    /// `text` as a message may quote it: its userinfo redacted
    /// (``redactingUserinfo(_:)``, in every form: `redis://:pw@host`,
    /// `redis:pw@host`, `https:user:token@host`), then cut to `limit`
    /// characters. Redacted first, so a cut cannot leave half a password
    /// behind a missing `@`.
    static func quoted(_ text: some StringProtocol, limit: Int) -> String {
        String(redactingUserinfo(String(text)).prefix(limit))
    }

    /// `text` with everything between `//` and the last `@` replaced by
    /// `***` (everything before the last `@` when there is no `//` before
    /// it): a message about a URL must not carry the `user:password@`
    /// someone put in it.
    ///
    /// Conservative on purpose: URL parsers end the authority at the first
    /// `/`, `?` or `#`, so a password holding one of them
    /// (`https://user:pa/ss@host`) would otherwise be read as a host, a
    /// path or a fragment and quoted. An `@` later in a path costs that
    /// path's start in the message, never a secret.
    static func redactingUserinfo(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        guard let slashes = text.range(of: "//"), slashes.upperBound <= at else { return "***" + String(text[at...]) }
        return String(text[..<slashes.upperBound]) + "***" + String(text[at...])
    }

    /// Splits `scheme://userinfo@rest` at the last `@` after the `//`:
    /// the URL without its userinfo, and the userinfo (nil without an `@`).
    /// So a password may hold `/`, `?`, `#` or `@` as typed.
    static func splittingUserinfo(_ text: String) -> (url: String, userinfo: Substring?) {
        guard let slashes = text.range(of: "//"), let at = text[slashes.upperBound...].lastIndex(of: "@") else { return (text, nil) }
        return (String(text[..<slashes.upperBound]) + String(text[text.index(after: at)...]), text[slashes.upperBound..<at])
    }
}
