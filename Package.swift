// swift-tools-version:6.1
import PackageDescription

/// Settings every Swift target shares: Swift 6 language mode is the package
/// default; these add the upcoming features we want enforced from day one.
let strictSwift: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .unsafeFlags(["-cross-module-optimization"], .when(configuration: .release)),
]

/// Tests import what they use too, but member visibility is relaxed there:
/// a test reads values across several modules at once.
let testSwift: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

// Linux only: the C shims use eventfd, accept4 and SO_REUSEPORT's load
// balancing, and the transport is libevent's epoll backend. They stop a
// build elsewhere with an #error saying so (Sources/CGatewayShims/shims.c).
// The generated clients in clients/ build on macOS too.
let package = Package(
    name: "products-gateway",
    products: [
        .executable(name: "products-gateway", targets: ["ProductsGatewayCLI"]),
        .executable(name: "mock-upstream", targets: ["MockUpstreamCLI"]),
        // FaultProxy as a program: latency and partitions between processes
        // (bench/hosts puts Redis and the upstream behind it).
        .executable(name: "fault-proxy", targets: ["FaultProxyCLI"]),
        // The JSON-RPC engine, the domain and the service, in process: what
        // the allocation benchmark under bench/allocations drives.
        .library(name: "GatewayCore", targets: ["GatewayService", "MemoryTier", "GatewayMetrics", "JSONRPC", "ProductsDomain", "EventTransport"]),
        // The fuzz target of the JSON parser, writer and JSON-RPC engine (see
        // .ci/fuzz); a plain build makes it a program replaying inputs.
        .executable(name: "jsonrpc-fuzz", targets: ["JSONRPCFuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // MARK: C libraries and the shim that makes their macros callable.
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent_openssl",
            providers: [.apt(["libevent-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "CGatewayShims",
            dependencies: ["CLibevent", "COpenSSL"]
        ),
        // hiredis (Debian's 0.14) for the shared tier, and the one shim that
        // compiles its libevent adapter.
        .systemLibrary(
            name: "CHiredis",
            pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        // libyaml (Debian's 0.2) for reading the OpenAPI description. A C
        // parser rather than a Swift package built on Foundation: the
        // gateway then links FoundationEssentials only, without ICU's data.
        .systemLibrary(
            name: "CLibYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"]), .brew(["libyaml"])]
        ),
        .target(
            name: "CRedisShims",
            dependencies: ["CLibevent", "CHiredis"]
        ),

        // MARK: HTTP/1.1 framing (RFC 9112): pure, no I/O.
        .target(name: "HTTPFraming", swiftSettings: strictSwift),

        // MARK: The monotonic instant every deadline is measured on: pure.
        .target(name: "MonotonicTime", swiftSettings: strictSwift),

        // MARK: The one Swift layer that talks to C.
        .target(
            name: "EventTransport",
            dependencies: [
                "CLibevent", "COpenSSL", "CGatewayShims", "CHiredis", "CRedisShims", "HTTPFraming", "MonotonicTime",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: Pure logic, no I/O.
        .target(name: "JSONRPC", dependencies: ["MonotonicTime"], swiftSettings: strictSwift),
        .target(name: "ProductsDomain", dependencies: ["JSONRPC"], swiftSettings: strictSwift),
        // W3C Trace Context (traceparent, tracestate), trace and span ids,
        // sampling, spans and their OTLP encodings (protobuf, JSON): no I/O.
        .target(name: "Tracing", dependencies: ["JSONRPC"], swiftSettings: strictSwift),

        // MARK: The service description: OpenAPI (YAML) in, OpenRPC out.
        .target(
            name: "ServiceDescription",
            dependencies: ["JSONRPC", "CLibYAML"],
            swiftSettings: strictSwift
        ),

        // MARK: The gateway's metric families (Prometheus), one registry.
        .target(
            name: "GatewayMetrics",
            dependencies: [.product(name: "Prometheus", package: "swift-prometheus")],
            swiftSettings: strictSwift
        ),

        // MARK: The memory tier: sources, the memory cache and in-process
        // coalescing (one fetch per identifier in flight).
        .target(
            name: "MemoryTier",
            dependencies: ["EventTransport", "MonotonicTime", "JSONRPC", "ProductsDomain", "GatewayMetrics", "Tracing"],
            swiftSettings: strictSwift
        ),

        // MARK: The shared tier over Redis: keys, entries, messages, leases
        // and their drivers.
        .target(
            name: "SharedTier",
            dependencies: [
                "EventTransport", "MonotonicTime", "JSONRPC", "ProductsDomain", "GatewayMetrics", "MemoryTier",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: Composition: configuration, routes, the call, the upstream
        // source, logs.
        .target(
            name: "GatewayService",
            dependencies: [
                "EventTransport", "MonotonicTime", "JSONRPC", "ProductsDomain", "ServiceDescription", "GatewayMetrics", "MemoryTier", "SharedTier", "Tracing",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.embedInCode("Resources/openapi.yaml")],
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "ProductsGatewayCLI",
            dependencies: [
                "GatewayService",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSwift,
            // BuildCommit.swift: the commit `--version` prints.
            plugins: ["BuildCommit"]
        ),
        // Writes the commit the gateway is built from (git, or the
        // BUILD_COMMIT file the Dockerfile writes from its build argument).
        .plugin(name: "BuildCommit", capability: .buildTool()),

        // MARK: The TLS test upstream (tests, compose demo).
        // evhttp over TLS, for the test upstream's faults only: the gateway
        // never links it. It uses EventTransport's package-level loop and
        // C-check helpers, and is the one other place that calls libevent.
        .target(
            name: "EvhttpTestServer",
            dependencies: ["CLibevent", "COpenSSL", "CGatewayShims", "EventTransport", "HTTPFraming"],
            swiftSettings: strictSwift
        ),
        .target(
            name: "MockUpstream",
            dependencies: ["EventTransport", "EvhttpTestServer", "JSONRPC", "ProductsDomain"],
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "MockUpstreamCLI",
            dependencies: [
                "MockUpstream",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: Network faults for tests: a TCP proxy between the gateway and
        // Redis or the TLS upstream (latency, partitions, resets, forgotten
        // flows). Plain sockets and one thread; only test targets and the
        // fault-proxy program below link it, never the gateway.
        // ppoll (a timeout in nanoseconds, for sub-millisecond latency) is
        // declared only under _GNU_SOURCE: a C shim of its own, so the proxy
        // links no libevent or OpenSSL.
        .target(name: "CFaultProxyShims"),
        .target(name: "FaultProxy", dependencies: ["CFaultProxyShims"], swiftSettings: strictSwift),
        // The `fault-proxy` program: one FaultProxy, steered by signals
        // (bench/hosts).
        .executableTarget(
            name: "FaultProxyCLI",
            dependencies: [
                "FaultProxy",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: Fuzzing: libFuzzer's entry point over JSONRPC.
        // It also reads the input as what Redis may hold (the shared tier's
        // entries and messages), through GatewayService's package API, and
        // as traceparent and tracestate headers.
        .executableTarget(name: "JSONRPCFuzz", dependencies: ["JSONRPC", "ProductsDomain", "MemoryTier", "SharedTier", "Tracing"], swiftSettings: strictSwift),

        // MARK: Tests.
        // Manual time for tests (a clock that moves when the test says so,
        // firing the timers due by then): test targets only, never the gateway.
        .target(name: "ManualTime", dependencies: ["EventTransport", "MonotonicTime"], path: "Tests/ManualTime", swiftSettings: testSwift),
        .testTarget(
            name: "EventTransportTests",
            dependencies: ["EventTransport", "MonotonicTime", "HTTPFraming", "ManualTime", .product(name: "Logging", package: "swift-log")],
            swiftSettings: testSwift
        ),
        .testTarget(name: "MonotonicTimeTests", dependencies: ["MonotonicTime"], swiftSettings: testSwift),
        .testTarget(name: "HTTPFramingTests", dependencies: ["HTTPFraming"], swiftSettings: testSwift),
        .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC"], swiftSettings: testSwift),
        .testTarget(name: "TracingTests", dependencies: ["Tracing", "JSONRPC"], swiftSettings: testSwift),
        .testTarget(name: "ProductsDomainTests", dependencies: ["ProductsDomain", "JSONRPC"], swiftSettings: testSwift),
        .testTarget(name: "ServiceDescriptionTests", dependencies: ["ServiceDescription", "JSONRPC"], swiftSettings: testSwift),
        .testTarget(name: "FaultProxyTests", dependencies: ["FaultProxy"], swiftSettings: testSwift),
        .testTarget(name: "GatewayMetricsTests", dependencies: ["GatewayMetrics"], swiftSettings: testSwift),
        .testTarget(name: "MemoryTierTests", dependencies: ["ManualTime", "MonotonicTime", "MemoryTier", "GatewayMetrics", "EventTransport", "ProductsDomain", "JSONRPC"], swiftSettings: testSwift),
        .testTarget(name: "SharedTierTests", dependencies: ["ManualTime", "MonotonicTime", "SharedTier", "MemoryTier", "GatewayMetrics", "EventTransport", "ProductsDomain", "JSONRPC"], swiftSettings: testSwift),
        .testTarget(name: "GatewayServiceTests", dependencies: ["ManualTime", "MonotonicTime", "GatewayService", "MemoryTier", "SharedTier", "GatewayMetrics", "ProductsDomain", "JSONRPC", "Tracing"], swiftSettings: testSwift),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "GatewayService", "MemoryTier", "SharedTier", "GatewayMetrics", "MockUpstream", "EventTransport", "JSONRPC", "ProductsDomain", "ProductsGatewayCLI", "MockUpstreamCLI", "ServiceDescription", "FaultProxy", "Tracing", "EvhttpTestServer", "MonotonicTime",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: testSwift
        ),
    ]
)
