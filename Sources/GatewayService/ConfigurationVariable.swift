/// Every setting of the contract's configuration table, with its flag and
/// default. One list, so `--help`, validation and the start-up log agree.
public enum ConfigurationVariable: String, CaseIterable, Sendable {
    case listen = "GATEWAY_LISTEN"
    case workers = "GATEWAY_WORKERS"
    case upstreamURL = "ONSIDE_UPSTREAM_URL"
    case appID = "ONSIDE_APP_ID"
    case apiToken = "ONSIDE_API_TOKEN"
    case apiTokenFile = "ONSIDE_API_TOKEN_FILE"
    case caFile = "ONSIDE_CA_FILE"
    case catalog = "GATEWAY_CATALOG"
    case defaultCountry = "GATEWAY_DEFAULT_COUNTRY"
    case maxIDs = "GATEWAY_MAX_IDS"
    case maxBatch = "GATEWAY_MAX_BATCH"
    case maxBodyBytes = "GATEWAY_MAX_BODY_BYTES"
    case requestTimeoutMS = "GATEWAY_REQUEST_TIMEOUT_MS"
    case apiKeys = "GATEWAY_API_KEYS"
    case apiKeysFile = "GATEWAY_API_KEYS_FILE"
    case upstreamTimeoutMS = "UPSTREAM_TIMEOUT_MS"
    case upstreamMaxIDs = "UPSTREAM_MAX_IDS"
    case upstreamConcurrency = "UPSTREAM_CONCURRENCY"
    case upstreamRetries = "UPSTREAM_RETRIES"
    case upstreamMaxBodyBytes = "UPSTREAM_MAX_BODY_BYTES"
    case cacheMaxTTLSeconds = "GATEWAY_CACHE_MAX_TTL_S"
    case cacheMaxBytes = "GATEWAY_CACHE_MAX_BYTES"
    case cacheMaxStaleSeconds = "GATEWAY_CACHE_MAX_STALE_S"
    case shutdownGraceMS = "GATEWAY_SHUTDOWN_GRACE_MS"
    case logLevel = "LOG_LEVEL"
    case logFormat = "LOG_FORMAT"

    /// The command-line flag of the same meaning, without the dashes.
    public var flag: String {
        switch self {
        case .listen: "listen"
        case .workers: "workers"
        case .upstreamURL: "upstream-url"
        case .appID: "app-id"
        case .apiToken: "api-token"
        case .apiTokenFile: "api-token-file"
        case .caFile: "ca-file"
        case .catalog: "catalog"
        case .defaultCountry: "default-country"
        case .maxIDs: "max-ids"
        case .maxBatch: "max-batch"
        case .maxBodyBytes: "max-body-bytes"
        case .requestTimeoutMS: "request-timeout-ms"
        case .apiKeys: "api-keys"
        case .apiKeysFile: "api-keys-file"
        case .upstreamTimeoutMS: "upstream-timeout-ms"
        case .upstreamMaxIDs: "upstream-max-ids"
        case .upstreamConcurrency: "upstream-concurrency"
        case .upstreamRetries: "upstream-retries"
        case .upstreamMaxBodyBytes: "upstream-max-body-bytes"
        case .cacheMaxTTLSeconds: "cache-max-ttl-s"
        case .cacheMaxBytes: "cache-max-bytes"
        case .cacheMaxStaleSeconds: "cache-max-stale-s"
        case .shutdownGraceMS: "shutdown-grace-ms"
        case .logLevel: "log-level"
        case .logFormat: "log-format"
        }
    }

    /// The default, as the contract words it.
    public var defaultDescription: String {
        switch self {
        case .listen: "127.0.0.1:8080"
        case .workers: "number of CPUs"
        case .upstreamURL: "unset: serve the embedded catalog"
        case .appID: "demo with the embedded catalog; required with an upstream"
        case .apiToken, .apiTokenFile: "unset"
        case .caFile: "system trust store"
        case .catalog: "built-in sample"
        case .defaultCountry: "unset"
        case .maxIDs: "100"
        case .maxBatch: "50"
        case .maxBodyBytes: "65536"
        case .requestTimeoutMS: "5000"
        case .apiKeys, .apiKeysFile: "unset: /rpc is open"
        case .upstreamTimeoutMS: "2000"
        case .upstreamMaxIDs: "50"
        case .upstreamConcurrency: "64"
        case .upstreamRetries: "2"
        case .upstreamMaxBodyBytes: "8388608"
        case .cacheMaxTTLSeconds: "60"
        case .cacheMaxBytes: "33554432"
        case .cacheMaxStaleSeconds: "300"
        case .shutdownGraceMS: "10000"
        case .logLevel: "info"
        case .logFormat: "json"
        }
    }

    /// True for values that must never be logged or echoed.
    public var isSecret: Bool { self == .apiToken || self == .apiKeys }
}
