import EventTransport

/// How the process's open files are shared out. Every client connection
/// is a descriptor, and so is every upstream connection: if clients could
/// take them all, calls that need the upstream would fail while idle
/// sockets hold the gateway's descriptors. So descriptors for the upstream
/// pool and the gateway itself are kept aside, and client connections are
/// capped at what is left.
struct DescriptorBudget: Sendable {
    /// The soft `RLIMIT_NOFILE` after raising it as far as allowed.
    let openFileLimit: Int
    /// Kept for `UPSTREAM_CONCURRENCY` connections in use and as many kept
    /// idle (a share per loop, rounded up), the loops (epoll and
    /// wake-up descriptors), the listeners, standard streams, the name
    /// resolver and the files read at run time; with `GATEWAY_ADMIN_LISTEN`,
    /// also for its listeners and its 64 connections.
    let reserved: Int
    /// `GATEWAY_MAX_CONNECTIONS`, or less when the limit cannot hold it.
    let maxConnections: Int

    /// Raises the limit to fit the configuration.
    /// - Throws: ``ConfigurationError`` when the limit leaves no room for a
    ///   single client connection beside the reserve.
    init(configuration: GatewayConfiguration) throws(ConfigurationError) {
        let admin = configuration.adminListen == nil ? 0 : HTTPFront.adminMaxConnections + configuration.workers
        // Upstream connections in use, and those kept idle between calls
        // (each loop keeps its share of UPSTREAM_CONCURRENCY).
        let upstreamIdle = configuration.workers * HTTPSClientConfiguration.idleConnectionsPerLoop(
            maxConcurrentExchanges: configuration.upstreamConcurrency, loops: configuration.workers
        )
        reserved = configuration.upstreamConcurrency + upstreamIdle + 32 + 4 * configuration.workers + admin
        openFileLimit = OpenFileLimit.raise(toAtLeast: configuration.maxConnections + reserved)
        maxConnections = min(configuration.maxConnections, openFileLimit - reserved)
        guard maxConnections >= 1 else {
            throw ConfigurationError(
                variable: ConfigurationVariable.maxConnections.rawValue,
                message: "the open-file limit of \(openFileLimit) leaves no descriptor for client connections beside the \(reserved) kept for UPSTREAM_CONCURRENCY=\(configuration.upstreamConcurrency) upstream connections (in use and idle) and the gateway itself; raise the limit (ulimit -n) or lower UPSTREAM_CONCURRENCY"
            )
        }
    }
}
