// swift-tools-version:6.1
import PackageDescription

/// Allocation and instruction counts of one `products.fetch` call through
/// the real in-process path (engine, params, region, cache or fetch,
/// result, response bytes). Kept out of the root package so that building
/// the gateway never builds the benchmark framework.
let package = Package(
    name: "allocations",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "products-gateway", path: "../.."),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // The wiring both executables share.
        .target(
            name: "BenchSupport",
            dependencies: [
                .product(name: "GatewayCore", package: "products-gateway"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // ordo-one/benchmark: `swift package benchmark` (malloc counts).
        .executableTarget(
            name: "GatewayAllocations",
            dependencies: [
                "BenchSupport",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/GatewayAllocations",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The same calls in a plain loop, for valgrind's callgrind.
        .executableTarget(
            name: "GatewayProfile",
            dependencies: [
                "BenchSupport",
                .product(name: "GatewayCore", package: "products-gateway"),
            ]
        ),
    ]
)
