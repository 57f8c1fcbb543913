import SharedTier
import GatewayMetrics
import MemoryTier
import ProductsDomain

/// Every setting of the contract's configuration table. Each case's row in
/// ``setting`` holds everything about it: loading, `--help` and the
/// start-up summary all read it from there.
public enum ConfigurationVariable: CaseIterable, Hashable, Sendable {
    case listen, adminListen, workers
    case upstreamURL, appID, apiToken, apiTokenFile, caFile, catalog, defaultCountry
    case maxIDs, maxBatch, batchConcurrency, maxBodyBytes, maxAnswerBytes
    case requestTimeoutMS, readTimeoutMS, idleTimeoutMS, maxConnections
    case apiKeys, apiKeysFile
    case upstreamTimeoutMS, upstreamMaxIDs, mergeWindowUS, upstreamConcurrency, upstreamRetries, upstreamMaxBodyBytes
    case cacheMaxTTLSeconds, cacheMaxBytes, cacheMaxStaleSeconds
    case redisURL, redisPasswordFile, redisTimeoutMS, redisPrefix
    case shutdownGraceMS, logLevel, logFormat

    /// The settings table: one row per variable, in the summary's order.
    /// Each default is written here and nowhere else.
    public var setting: GatewaySetting {
        switch self {
        case .listen: GatewaySetting(
            "GATEWAY_LISTEN", flag: "listen", default: .value("127.0.0.1:8080"), allowed: .address,
            shown: .value { "\($0.listenHost):\($0.listenPort)" },
            "Address and port to serve on.")
        case .adminListen: GatewaySetting(
            "GATEWAY_ADMIN_LISTEN", flag: "admin-listen", default: .unset("unset: probes and metrics are served on GATEWAY_LISTEN only"), allowed: .address,
            shown: .value { $0.adminListen.map { "\($0.host):\($0.port)" } ?? "<unset>" },
            "A second address serving only /healthz, /readyz and /metrics, outside GATEWAY_MAX_CONNECTIONS (64 connections of its own); its port may not be GATEWAY_LISTEN's.")
        case .workers: GatewaySetting(
            "GATEWAY_WORKERS", flag: "workers", default: .processorCount, allowed: .integer(1...256),
            shown: .value { "\($0.workers)" },
            "Event-loop threads.")
        case .upstreamURL: GatewaySetting(
            "ONSIDE_UPSTREAM_URL", flag: "upstream-url", default: .unset("unset: serve the embedded catalog"),
            allowed: .text("https://host[:port][/base], without credentials, query or fragment"),
            shown: .value { $0.upstream.map { "https://\($0.host):\($0.port)\($0.basePath)" } ?? "<embedded catalog>" },
            "The Onside upstream.")
        case .appID: GatewaySetting(
            "ONSIDE_APP_ID", flag: "app-id", default: .value("demo", note: "with the embedded catalog; required with an upstream"), allowed: .visibleASCII(1...128),
            shown: .value { $0.appID },
            "The Onside app whose products are served.")
        case .apiToken: GatewaySetting(
            "ONSIDE_API_TOKEN", flag: "api-token", default: .unset("unset"), allowed: .text("any one line"),
            shown: .secret { $0.apiToken != nil },
            "Bearer token for the upstream (prefer the file form; flags show in process lists).")
        case .apiTokenFile: GatewaySetting(
            "ONSIDE_API_TOKEN_FILE", flag: "api-token-file", default: .unset("unset"), allowed: .file("a file holding the token on one line"),
            shown: .inLineOf(.apiToken),
            "File holding the upstream bearer token; not together with ONSIDE_API_TOKEN.")
        case .caFile: GatewaySetting(
            "ONSIDE_CA_FILE", flag: "ca-file", default: .unset("system trust store"), allowed: .file("a readable PEM file"),
            shown: .value { $0.caFile ?? "<system store>" },
            "PEM file of CA certificates to trust for the upstream.")
        case .catalog: GatewaySetting(
            "GATEWAY_CATALOG", flag: "catalog", default: .unset("built-in sample"), allowed: .file("a readable catalog file"),
            shown: .value { $0.catalogPath ?? ($0.upstream == nil ? "<built-in sample>" : "<unused>") },
            "Catalog file served when no upstream URL is set.")
        case .defaultCountry: GatewaySetting(
            "GATEWAY_DEFAULT_COUNTRY", flag: "default-country", default: .unset("unset"), allowed: .countryCode,
            shown: .value { $0.defaultCountry?.text ?? "<unset>" },
            "Default country assumption of calls that give no region.")
        case .maxIDs: GatewaySetting(
            "GATEWAY_MAX_IDS", flag: "max-ids", default: .value("100"), allowed: .integer(1...10_000),
            shown: .value { "\($0.maxIdentifiers)" },
            "Most identifiers in one call.")
        case .maxBatch: GatewaySetting(
            "GATEWAY_MAX_BATCH", flag: "max-batch", default: .value("50"), allowed: .integer(1...1_000),
            shown: .value { "\($0.maxBatch)" },
            "Most requests in one JSON-RPC batch.")
        case .batchConcurrency: GatewaySetting(
            "GATEWAY_BATCH_CONCURRENCY", flag: "batch-concurrency", default: .value("16"), allowed: .integer(1...10_000),
            shown: .value { "\($0.batchConcurrency)" },
            "Most batch requests answered at once, each until its answer is written; more wait their turn.")
        case .maxBodyBytes: GatewaySetting(
            "GATEWAY_MAX_BODY_BYTES", flag: "max-body-bytes", default: .value("65536"), allowed: .integer(256...(64 << 20)),
            shown: .value { "\($0.maxBodyBytes)" },
            "Largest request body, in bytes.")
        case .maxAnswerBytes: GatewaySetting(
            "GATEWAY_MAX_ANSWER_BYTES", flag: "max-answer-bytes", default: .value("8388608"), allowed: .integer((128 << 10)...(1 << 30)),
            shown: .value { "\($0.maxAnswerBytes)" },
            "Largest answer to one request, in bytes; a larger one is replaced by one -32600 error object that gives the limit.")
        case .requestTimeoutMS: GatewaySetting(
            "GATEWAY_REQUEST_TIMEOUT_MS", flag: "request-timeout-ms", default: .value("5000"), allowed: .integer(1...600_000),
            shown: .value { "\($0.requestTimeoutMS)" },
            "A call's own deadline, in milliseconds.")
        case .readTimeoutMS: GatewaySetting(
            "GATEWAY_READ_TIMEOUT_MS", flag: "read-timeout-ms", default: .value("10000"), allowed: .integer(1...3_600_000),
            shown: .value { "\($0.readTimeoutMS)" },
            "Time from a request's first byte to its last, header and body, in milliseconds; then 408 and close. Also the time a client has to read an answer, from its first write; then the connection is reset.")
        case .idleTimeoutMS: GatewaySetting(
            "GATEWAY_IDLE_TIMEOUT_MS", flag: "idle-timeout-ms", default: .value("60000"), allowed: .integer(1...3_600_000),
            shown: .value { "\($0.idleTimeoutMS)" },
            "Time a connection may wait with no request in progress, in milliseconds; then it is closed.")
        case .maxConnections: GatewaySetting(
            "GATEWAY_MAX_CONNECTIONS", flag: "max-connections", default: .value("1024"), allowed: .integer(1...1_000_000),
            shown: .value { "\($0.maxConnections)" },
            "Most client connections open at once; one more is told 503 and closed. The open-file limit is raised to fit.")
        case .apiKeys: GatewaySetting(
            "GATEWAY_API_KEYS", flag: "api-keys", default: .unset("unset: /rpc is open"),
            allowed: .text("comma-separated keys of 16 to 256 visible ASCII characters"),
            shown: .secrets { $0.apiKeys.count },
            "API keys; when set, /rpc needs Authorization: Bearer <key>.")
        case .apiKeysFile: GatewaySetting(
            "GATEWAY_API_KEYS_FILE", flag: "api-keys-file", default: .unset("unset: /rpc is open"), allowed: .file("a file of keys, one per line"),
            shown: .inLineOf(.apiKeys),
            "File of API keys; not together with GATEWAY_API_KEYS.")
        case .upstreamTimeoutMS: GatewaySetting(
            "UPSTREAM_TIMEOUT_MS", flag: "upstream-timeout-ms", default: .value("2000"), allowed: .integer(1...600_000),
            shown: .value { "\($0.upstreamTimeoutMS)" },
            "Deadline of one upstream attempt, in milliseconds.")
        case .upstreamMaxIDs: GatewaySetting(
            "UPSTREAM_MAX_IDS", flag: "upstream-max-ids", default: .value("50"), allowed: .integer(1...1_000),
            shown: .value { "\($0.upstreamMaxIDs)" },
            "Most identifiers in one upstream call; larger calls fan out.")
        case .mergeWindowUS: GatewaySetting(
            "GATEWAY_MERGE_WINDOW_US", flag: "merge-window-us", default: .value("0"), allowed: .integer(0...100_000),
            shown: .value { "\($0.mergeWindowUS)" },
            "How long a loop may hold a miss to merge it with others, in microseconds; 0 merges only what arrives in the same loop turn.")
        case .upstreamConcurrency: GatewaySetting(
            "UPSTREAM_CONCURRENCY", flag: "upstream-concurrency", default: .value("64"), allowed: .integer(1...10_000),
            shown: .value { "\($0.upstreamConcurrency)" },
            "Most upstream calls in flight at once; more wait their turn.")
        case .upstreamRetries: GatewaySetting(
            "UPSTREAM_RETRIES", flag: "upstream-retries", default: .value("2"), allowed: .integer(0...10),
            shown: .value { "\($0.upstreamRetries)" },
            "Extra attempts after a connection error, 502, 503 or 504.")
        case .upstreamMaxBodyBytes: GatewaySetting(
            "UPSTREAM_MAX_BODY_BYTES", flag: "upstream-max-body-bytes", default: .value("8388608"), allowed: .integer(1024...(1 << 30)),
            shown: .value { "\($0.upstreamMaxBodyBytes)" },
            "Largest upstream answer read, in bytes; a larger one is an internalError, not retried.")
        case .cacheMaxTTLSeconds: GatewaySetting(
            "GATEWAY_CACHE_MAX_TTL_S", flag: "cache-max-ttl-s", default: .value("60"), allowed: .integer(0...86_400),
            shown: .value { "\($0.cacheMaxTTLSeconds)" },
            "Cap on how long an upstream answer is reused, in seconds (0: never).")
        case .cacheMaxBytes: GatewaySetting(
            "GATEWAY_CACHE_MAX_BYTES", flag: "cache-max-bytes", default: .value("33554432"), allowed: .integer(0...(1 << 40)),
            shown: .value { "\($0.cacheMaxBytes)" },
            "Most bytes the memory cache holds, entries and keys; past it the least used are evicted (0: nothing is kept).")
        case .cacheMaxStaleSeconds: GatewaySetting(
            "GATEWAY_CACHE_MAX_STALE_S", flag: "cache-max-stale-s", default: .value("300"), allowed: .integer(0...604_800),
            shown: .value { "\($0.cacheMaxStaleSeconds)" },
            "Cap on how long past freshness an entry may answer under stale-if-error / stale-while-revalidate, in seconds (0: never).")
        case .redisURL: GatewaySetting(
            "GATEWAY_REDIS_URL", flag: "redis-url", default: .unset("unset: no shared tier"),
            allowed: .text("redis://[:password@]host[:port][/db], only the default user, no query or fragment"),
            shown: .redacted { $0.redis?.redactedURL ?? "<unset>" },
            "The shared tier's Redis (prefer the password file; flags show in process lists).")
        case .redisPasswordFile: GatewaySetting(
            "GATEWAY_REDIS_PASSWORD_FILE", flag: "redis-password-file", default: .unset("unset"), allowed: .file("a file holding the password on one line"),
            shown: .inLineOf(.redisURL),
            "File holding the Redis password; only with GATEWAY_REDIS_URL, and not with a password in it.")
        case .redisTimeoutMS: GatewaySetting(
            "GATEWAY_REDIS_TIMEOUT_MS", flag: "redis-timeout-ms", default: .value("50"), allowed: .integer(1...60_000),
            shown: .value { $0.redis.map { "\($0.timeoutMS)" } ?? "<unused>" },
            "A Redis round trip slower than this counts as a miss, in milliseconds.")
        case .redisPrefix: GatewaySetting(
            "GATEWAY_REDIS_PREFIX", flag: "redis-prefix", default: .value("onside-gw:"), allowed: .visibleASCII(1...64),
            shown: .value { $0.redis?.prefix ?? "<unused>" },
            "Prefix of every key the gateway writes in Redis.")
        case .shutdownGraceMS: GatewaySetting(
            "GATEWAY_SHUTDOWN_GRACE_MS", flag: "shutdown-grace-ms", default: .value("10000"), allowed: .integer(0...3_600_000),
            shown: .value { "\($0.shutdownGraceMS)" },
            "Time calls in flight get to finish after SIGTERM or SIGINT, in milliseconds.")
        case .logLevel: GatewaySetting(
            "LOG_LEVEL", flag: "log-level", default: .value("info"), allowed: .oneOf(["trace", "debug", "info", "notice", "warning", "error", "critical"]),
            shown: .value { $0.logLevel },
            "Least severe level written.")
        case .logFormat: GatewaySetting(
            "LOG_FORMAT", flag: "log-format", default: .value("json"), allowed: .oneOf(["json", "text"]),
            shown: .value { $0.logFormat.rawValue },
            "JSON lines for collectors, or text for people.")
        }
    }

    /// Every row of the table, in its order.
    public static var table: [GatewaySetting] { allCases.map(\.setting) }

    /// The environment variable, e.g. `GATEWAY_MAX_IDS`.
    public var rawValue: String { setting.name }

    /// The variable named `rawValue`, if it is one of the table's.
    public init?(rawValue: String) {
        guard let found = Self.allCases.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = found
    }

    /// The command-line flag of the same meaning, without the dashes.
    public var flag: String { setting.flag }

    /// The default, as `--help` words it.
    public var defaultDescription: String { setting.defaultValue.description }

    /// True for values that must never be logged or echoed.
    public var isSecret: Bool { setting.isSecret }
}
