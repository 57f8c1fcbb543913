// swift-tools-version:6.1
import PackageDescription

/// A typed Swift client of the products gateway, generated at build time by
/// swift-openapi-generator from the gateway's own `openapi/openapi.yaml`
/// (the target holds a symbolic link to it, so there is one document).
///
/// It is a package of its own so that the gateway's package never depends on
/// the generator. CI builds it, runs its round-trip tests against a live
/// gateway, and builds the README's example.
let package = Package(
    name: "onside-products-client",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "OnsideProductsClient", targets: ["OnsideProductsClient"]),
        .executable(name: "products-client-example", targets: ["ProductsClientExample"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator", exact: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
        // Tests only: the round-trip tests read the examples of openapi.yaml
        // and rewrite requests on their way out.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
    ],
    targets: [
        .target(
            name: "OnsideProductsClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
            ],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        .executableTarget(
            name: "ProductsClientExample",
            dependencies: ["OnsideProductsClient"]
        ),
        .testTarget(
            name: "OnsideProductsClientTests",
            dependencies: [
                "OnsideProductsClient",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Yams", package: "Yams"),
            ]
        ),
    ]
)
