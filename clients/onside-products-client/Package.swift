// swift-tools-version:6.1
import PackageDescription

/// A typed Swift client of the products gateway, generated at build time by
/// swift-openapi-generator from the gateway's own `openapi/openapi.yaml`
/// (the target holds a symbolic link to it, so there is one document).
///
/// It is a package of its own so that the gateway's package never depends on
/// the generator. Depend on it by path, from a checkout of the gateway; the
/// folder's name is the package's, so `package:` names it as SwiftPM expects:
///
///     .package(path: "<checkout>/clients/onside-products-client"),
///     .product(name: "OnsideProductsClient", package: "onside-products-client"),
///
/// CI builds it, runs its round-trip tests against a live gateway, builds and
/// runs the example that clients/README.md shows, and builds a package that
/// depends on it with those two lines, which must report no warning.

/// swift-openapi-generator writes the same `public import`s (OpenAPIRuntime,
/// Foundation's URL, Data and Date) at the top of each of the files it
/// generates, and most files use only some of them in public declarations, so
/// Swift 6.3 warns about each unused one: 147 warnings in every build of a
/// package that depends on this one. The generated files silence
/// them with `@diagnose(UnusedImportAccess, as: ignored)`, which only Swift 6.4
/// reads; before it, the warning belongs to no diagnostic group, so no
/// `-Wwarning`/`treatWarning` setting can name it, and the generator has no
/// option to leave the modifier off (an `internal` client would be of no use
/// outside this package). So, before Swift 6.4, this target, which holds the
/// generated code and the ten lines of Client+Gateway.swift, is compiled with
/// warnings suppressed. SwiftPM accepts the flag in a package depended on by
/// path (not in one depended on by version). CI still reads the generator's
/// own diagnostics (`.ci/clients`).
#if compiler(>=6.4)
let generatedCodeSettings: [SwiftSetting] = []
#else
let generatedCodeSettings: [SwiftSetting] = [.unsafeFlags(["-suppress-warnings"])]
#endif

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
            swiftSettings: generatedCodeSettings,
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

