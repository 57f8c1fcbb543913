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

    @Option(name: Self.name(.listen), help: Self.help(.listen))
    var listen: String?

    @Option(name: Self.name(.adminListen), help: Self.help(.adminListen))
    var adminListen: String?

    @Option(name: Self.name(.workers), help: Self.help(.workers))
    var workers: String?

    @Option(name: Self.name(.upstreamURL), help: Self.help(.upstreamURL))
    var upstreamURL: String?

    @Option(name: Self.name(.appID), help: Self.help(.appID))
    var appID: String?

    @Option(name: Self.name(.apiToken), help: Self.help(.apiToken))
    var apiToken: String?

    @Option(name: Self.name(.apiTokenFile), help: Self.help(.apiTokenFile))
    var apiTokenFile: String?

    @Option(name: Self.name(.caFile), help: Self.help(.caFile))
    var caFile: String?

    @Option(name: Self.name(.catalog), help: Self.help(.catalog))
    var catalog: String?

    @Option(name: Self.name(.defaultCountry), help: Self.help(.defaultCountry))
    var defaultCountry: String?

    @Option(name: Self.name(.maxIDs), help: Self.help(.maxIDs))
    var maxIDs: String?

    @Option(name: Self.name(.maxBatch), help: Self.help(.maxBatch))
    var maxBatch: String?

    @Option(name: Self.name(.batchConcurrency), help: Self.help(.batchConcurrency))
    var batchConcurrency: String?

    @Option(name: Self.name(.maxBodyBytes), help: Self.help(.maxBodyBytes))
    var maxBodyBytes: String?

    @Option(name: Self.name(.maxAnswerBytes), help: Self.help(.maxAnswerBytes))
    var maxAnswerBytes: String?

    @Option(name: Self.name(.requestTimeoutMS), help: Self.help(.requestTimeoutMS))
    var requestTimeoutMS: String?

    @Option(name: Self.name(.readTimeoutMS), help: Self.help(.readTimeoutMS))
    var readTimeoutMS: String?

    @Option(name: Self.name(.idleTimeoutMS), help: Self.help(.idleTimeoutMS))
    var idleTimeoutMS: String?

    @Option(name: Self.name(.maxConnections), help: Self.help(.maxConnections))
    var maxConnections: String?

    @Option(name: Self.name(.apiKeys), help: Self.help(.apiKeys))
    var apiKeys: String?

    @Option(name: Self.name(.apiKeysFile), help: Self.help(.apiKeysFile))
    var apiKeysFile: String?

    @Option(name: Self.name(.upstreamTimeoutMS), help: Self.help(.upstreamTimeoutMS))
    var upstreamTimeoutMS: String?

    @Option(name: Self.name(.upstreamMaxIDs), help: Self.help(.upstreamMaxIDs))
    var upstreamMaxIDs: String?

    @Option(name: Self.name(.mergeWindowUS), help: Self.help(.mergeWindowUS))
    var mergeWindowUS: String?

    @Option(name: Self.name(.upstreamConcurrency), help: Self.help(.upstreamConcurrency))
    var upstreamConcurrency: String?

    @Option(name: Self.name(.upstreamRetries), help: Self.help(.upstreamRetries))
    var upstreamRetries: String?

    @Option(name: Self.name(.upstreamMaxBodyBytes), help: Self.help(.upstreamMaxBodyBytes))
    var upstreamMaxBodyBytes: String?

    @Option(name: Self.name(.cacheMaxTTLSeconds), help: Self.help(.cacheMaxTTLSeconds))
    var cacheMaxTTLSeconds: String?

    @Option(name: Self.name(.cacheMaxBytes), help: Self.help(.cacheMaxBytes))
    var cacheMaxBytes: String?

    @Option(name: Self.name(.cacheMaxStaleSeconds), help: Self.help(.cacheMaxStaleSeconds))
    var cacheMaxStaleSeconds: String?

    @Option(name: Self.name(.redisURL), help: Self.help(.redisURL))
    var redisURL: String?

    @Option(name: Self.name(.redisPasswordFile), help: Self.help(.redisPasswordFile))
    var redisPasswordFile: String?

    @Option(name: Self.name(.redisTimeoutMS), help: Self.help(.redisTimeoutMS))
    var redisTimeoutMS: String?

    @Option(name: Self.name(.redisPrefix), help: Self.help(.redisPrefix))
    var redisPrefix: String?

    @Option(name: Self.name(.shutdownGraceMS), help: Self.help(.shutdownGraceMS))
    var shutdownGraceMS: String?

    @Option(name: Self.name(.logLevel), help: Self.help(.logLevel))
    var logLevel: String?

    @Option(name: Self.name(.logFormat), help: Self.help(.logFormat))
    var logFormat: String?

    /// The flags that were given, keyed by their variable. (The
    /// integration tests give each flag of the table a refused value and
    /// expect its variable named: a flag left out here fails them.)
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
            (.maxAnswerBytes, maxAnswerBytes),
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

    /// The flag of `variable`, from the settings table.
    static func name(_ variable: ConfigurationVariable) -> NameSpecification {
        .customLong(variable.flag)
    }

    /// The help of `variable`'s flag: its meaning, variable, default and
    /// range, all from the settings table.
    static func help(_ variable: ConfigurationVariable) -> ArgumentHelp {
        ArgumentHelp(variable.setting.help, valueName: "value")
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
