import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import GatewayService
import Logging
import ServiceLifecycle

/// `products-gateway serve` (the default): runs the gateway until SIGTERM or SIGINT.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the gateway (the default subcommand)."
    )

    @Option(name: .customLong(ConfigurationVariable.listen.flag), help: Self.help(.listen, "Address and port to serve on."))
    var listen: String?

    @Option(name: .customLong(ConfigurationVariable.adminListen.flag), help: Self.help(.adminListen, "A second address serving only /healthz, /readyz and /metrics, outside GATEWAY_MAX_CONNECTIONS (64 connections of its own)."))
    var adminListen: String?

    @Option(name: .customLong(ConfigurationVariable.workers.flag), help: Self.help(.workers, "Event-loop threads."))
    var workers: String?

    @Option(name: .customLong(ConfigurationVariable.upstreamURL.flag), help: Self.help(.upstreamURL, "https://host[:port][/base] of the Onside upstream; unset serves the embedded catalog."))
    var upstreamURL: String?

    @Option(name: .customLong(ConfigurationVariable.appID.flag), help: Self.help(.appID, "The Onside app whose products are served."))
    var appID: String?

    @Option(name: .customLong(ConfigurationVariable.apiToken.flag), help: Self.help(.apiToken, "Bearer token for the upstream (prefer the file form; flags show in process lists)."))
    var apiToken: String?

    @Option(name: .customLong(ConfigurationVariable.apiTokenFile.flag), help: Self.help(.apiTokenFile, "File holding the upstream bearer token."))
    var apiTokenFile: String?

    @Option(name: .customLong(ConfigurationVariable.caFile.flag), help: Self.help(.caFile, "PEM file of CA certificates to trust for the upstream."))
    var caFile: String?

    @Option(name: .customLong(ConfigurationVariable.catalog.flag), help: Self.help(.catalog, "Catalog file served when no upstream URL is set."))
    var catalog: String?

    @Option(name: .customLong(ConfigurationVariable.defaultCountry.flag), help: Self.help(.defaultCountry, "Default country assumption (ISO 3166-1 alpha-2)."))
    var defaultCountry: String?

    @Option(name: .customLong(ConfigurationVariable.maxIDs.flag), help: Self.help(.maxIDs, "Most identifiers in one call."))
    var maxIDs: String?

    @Option(name: .customLong(ConfigurationVariable.maxBatch.flag), help: Self.help(.maxBatch, "Most requests in one JSON-RPC batch."))
    var maxBatch: String?

    @Option(name: .customLong(ConfigurationVariable.batchConcurrency.flag), help: Self.help(.batchConcurrency, "Most batch requests answered at once, each until its answer is written; more wait their turn."))
    var batchConcurrency: String?

    @Option(name: .customLong(ConfigurationVariable.maxBodyBytes.flag), help: Self.help(.maxBodyBytes, "Largest request body."))
    var maxBodyBytes: String?

    @Option(name: .customLong(ConfigurationVariable.requestTimeoutMS.flag), help: Self.help(.requestTimeoutMS, "A call's own deadline, in milliseconds."))
    var requestTimeoutMS: String?

    @Option(name: .customLong(ConfigurationVariable.readTimeoutMS.flag), help: Self.help(.readTimeoutMS, "Time from a request's first byte to its last, header and body, in milliseconds; then 408 and close."))
    var readTimeoutMS: String?

    @Option(name: .customLong(ConfigurationVariable.idleTimeoutMS.flag), help: Self.help(.idleTimeoutMS, "Time a connection may wait with no request in progress, in milliseconds; then it is closed."))
    var idleTimeoutMS: String?

    @Option(name: .customLong(ConfigurationVariable.maxConnections.flag), help: Self.help(.maxConnections, "Most client connections open at once; one more is told 503 and closed. The open-file limit is raised to fit."))
    var maxConnections: String?

    @Option(name: .customLong(ConfigurationVariable.apiKeys.flag), help: Self.help(.apiKeys, "Comma-separated API keys; when set, /rpc needs Authorization: Bearer <key>."))
    var apiKeys: String?

    @Option(name: .customLong(ConfigurationVariable.apiKeysFile.flag), help: Self.help(.apiKeysFile, "File of API keys, one per line."))
    var apiKeysFile: String?

    @Option(name: .customLong(ConfigurationVariable.upstreamTimeoutMS.flag), help: Self.help(.upstreamTimeoutMS, "Deadline of one upstream attempt, in milliseconds."))
    var upstreamTimeoutMS: String?

    @Option(name: .customLong(ConfigurationVariable.upstreamMaxIDs.flag), help: Self.help(.upstreamMaxIDs, "Most identifiers in one upstream call."))
    var upstreamMaxIDs: String?

    @Option(name: .customLong(ConfigurationVariable.mergeWindowUS.flag), help: Self.help(.mergeWindowUS, "How long a loop may hold a miss to merge it with others into one upstream call, in microseconds (0: what arrives in the same loop turn)."))
    var mergeWindowUS: String?

    @Option(name: .customLong(ConfigurationVariable.upstreamConcurrency.flag), help: Self.help(.upstreamConcurrency, "Most upstream calls in flight at once."))
    var upstreamConcurrency: String?

    @Option(name: .customLong(ConfigurationVariable.upstreamRetries.flag), help: Self.help(.upstreamRetries, "Extra attempts after a connection error, 502, 503 or 504."))
    var upstreamRetries: String?

    @Option(name: .customLong(ConfigurationVariable.upstreamMaxBodyBytes.flag), help: Self.help(.upstreamMaxBodyBytes, "Largest upstream answer read; a larger one is an internalError, not retried."))
    var upstreamMaxBodyBytes: String?

    @Option(name: .customLong(ConfigurationVariable.cacheMaxTTLSeconds.flag), help: Self.help(.cacheMaxTTLSeconds, "Cap on how long an upstream answer is reused, in seconds (0: never)."))
    var cacheMaxTTLSeconds: String?

    @Option(name: .customLong(ConfigurationVariable.cacheMaxBytes.flag), help: Self.help(.cacheMaxBytes, "Most bytes the memory cache holds, entries and keys; past it the least used are evicted (0: nothing is kept)."))
    var cacheMaxBytes: String?

    @Option(name: .customLong(ConfigurationVariable.cacheMaxStaleSeconds.flag), help: Self.help(.cacheMaxStaleSeconds, "Cap on how long past freshness an entry may answer under stale-if-error / stale-while-revalidate, in seconds (0: never)."))
    var cacheMaxStaleSeconds: String?

    @Option(name: .customLong(ConfigurationVariable.redisURL.flag), help: Self.help(.redisURL, "redis://[:password@]host[:port][/db] of the shared tier (prefer the password file; flags show in process lists)."))
    var redisURL: String?

    @Option(name: .customLong(ConfigurationVariable.redisPasswordFile.flag), help: Self.help(.redisPasswordFile, "File holding the Redis password."))
    var redisPasswordFile: String?

    @Option(name: .customLong(ConfigurationVariable.redisTimeoutMS.flag), help: Self.help(.redisTimeoutMS, "A Redis round trip slower than this counts as a miss, in milliseconds."))
    var redisTimeoutMS: String?

    @Option(name: .customLong(ConfigurationVariable.redisPrefix.flag), help: Self.help(.redisPrefix, "Prefix of every key the gateway writes in Redis."))
    var redisPrefix: String?

    @Option(name: .customLong(ConfigurationVariable.shutdownGraceMS.flag), help: Self.help(.shutdownGraceMS, "Time calls in flight get to finish after SIGTERM or SIGINT, in milliseconds."))
    var shutdownGraceMS: String?

    @Option(name: .customLong(ConfigurationVariable.logLevel.flag), help: Self.help(.logLevel, "trace, debug, info, notice, warning, error or critical."))
    var logLevel: String?

    @Option(name: .customLong(ConfigurationVariable.logFormat.flag), help: Self.help(.logFormat, "json or text."))
    var logFormat: String?

    /// The flags that were given, keyed by their variable.
    var overrides: [ConfigurationVariable: String] {
        let pairs: [(ConfigurationVariable, String?)] = [
            (.listen, listen),
            (.adminListen, adminListen),
            (.workers, workers),
            (.upstreamURL, upstreamURL),
            (.appID, appID),
            (.apiToken, apiToken),
            (.apiTokenFile, apiTokenFile),
            (.caFile, caFile),
            (.catalog, catalog),
            (.defaultCountry, defaultCountry),
            (.maxIDs, maxIDs),
            (.maxBatch, maxBatch),
            (.batchConcurrency, batchConcurrency),
            (.maxBodyBytes, maxBodyBytes),
            (.requestTimeoutMS, requestTimeoutMS),
            (.readTimeoutMS, readTimeoutMS),
            (.idleTimeoutMS, idleTimeoutMS),
            (.maxConnections, maxConnections),
            (.apiKeys, apiKeys),
            (.apiKeysFile, apiKeysFile),
            (.upstreamTimeoutMS, upstreamTimeoutMS),
            (.upstreamMaxIDs, upstreamMaxIDs),
            (.mergeWindowUS, mergeWindowUS),
            (.upstreamConcurrency, upstreamConcurrency),
            (.upstreamRetries, upstreamRetries),
            (.upstreamMaxBodyBytes, upstreamMaxBodyBytes),
            (.cacheMaxTTLSeconds, cacheMaxTTLSeconds),
            (.cacheMaxBytes, cacheMaxBytes),
            (.cacheMaxStaleSeconds, cacheMaxStaleSeconds),
            (.redisURL, redisURL),
            (.redisPasswordFile, redisPasswordFile),
            (.redisTimeoutMS, redisTimeoutMS),
            (.redisPrefix, redisPrefix),
            (.shutdownGraceMS, shutdownGraceMS),
            (.logLevel, logLevel),
            (.logFormat, logFormat),
        ]
        var result: [ConfigurationVariable: String] = [:]
        for case let (variable, value?) in pairs { result[variable] = value }
        return result
    }

    static func help(_ variable: ConfigurationVariable, _ text: String) -> ArgumentHelp {
        ArgumentHelp("\(text) Env: \(variable.rawValue). Default: \(variable.defaultDescription).", valueName: "value")
    }

    func run() async throws {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(environment: ProcessInfo.processInfo.environment, overrides: overrides)
        } catch {
            _ = Array("products-gateway: \(error)\n".utf8).withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            throw ExitCode(2)
        }
        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        let format = configuration.logFormat
        LoggingSystem.bootstrap { _ in GatewayLogHandler(format: format, level: level) }
        let logger = Logger(label: "products-gateway")
        var summary: Logger.Metadata = [:]
        for (name, value) in configuration.redactedSummary { summary[name] = "\(value)" }
        logger.info("starting products-gateway", metadata: summary)

        // Trapped before anything serves: from here on SIGTERM and SIGINT
        // start the graceful shutdown instead of ending the process.
        let signals = await ShutdownSignals(graceMS: configuration.shutdownGraceMS, logger: logger)
        let application: GatewayApplication
        let port: Int
        // From here on standard error is the log: with LOG_FORMAT=json every
        // line must be one JSON object, so failures go through the logger only.
        do {
            application = try GatewayApplication(configuration: configuration, logger: logger)
            port = try application.start()
        } catch let error as ConfigurationError {
            logger.critical("cannot start: \(error)")
            throw ExitCode(2)
        } catch {
            // Not a setting at fault: the event loops (threads, epoll) or
            // another resource of the process could not be made.
            logger.critical("cannot start: \(error)")
            throw ExitCode(2)
        }
        logger.info("listening", metadata: ["address": "\(configuration.listenHost):\(port)", "port": .stringConvertible(port)])
        if let admin = configuration.adminListen, let adminPort = application.adminPort {
            logger.info("listening for probes and metrics", metadata: ["address": "\(admin.host):\(adminPort)", "port": .stringConvertible(adminPort), "setting": "GATEWAY_ADMIN_LISTEN"])
        }

        // The first signal shuts the application down gracefully: it drains,
        // within the grace. Past the grace the group cancels it, and it
        // answers what still waits with `cancelled` and returns.
        var services = ServiceGroupConfiguration(
            services: [.init(service: application, serviceName: "gateway")],
            logger: GatewayApplication.lifecycleLogger(logger)
        )
        services.maximumGracefulShutdownDuration = .milliseconds(configuration.shutdownGraceMS)
        let group = ServiceGroup(configuration: services)
        async let _: Void = signals.watch(group)
        try await group.run()
        logger.info("stopped")
    }
}
