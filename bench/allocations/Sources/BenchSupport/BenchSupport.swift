import EventTransport
import Foundation
import GatewayService
import MemoryTier
import GatewayMetrics
import JSONRPC
import Logging
import ProductsDomain

/// The sample catalog as an upstream would serve it, with or without
/// `Cache-Control: max-age`.
public struct CatalogSource: ProductSource {
    let catalog = Catalog.sample
    let maxAgeSeconds: Int?

    /// A source whose pages may be kept for `maxAgeSeconds`, or not at all.
    public init(maxAgeSeconds: Int?) {
        self.maxAgeSeconds = maxAgeSeconds
    }

    /// Answers on the loop's next turn, as a source over the network would.
    public func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
        let page = catalog.page(ids: request.identifiers, country: request.scope.country, language: request.scope.language)
        let outcome: Result<SourcePage, ProductsFetchFailure> = .success(SourcePage(page: page, maxAgeSeconds: maxAgeSeconds))
        _ = loop.execute { completion(outcome) }
    }
}

/// The engine and `products.fetch` wired as `GatewayApplication` wires them,
/// without the HTTP front and without the observer (its metrics and log
/// line are the application's, not the engine's or the service's).
public func makeServer(maxAgeSeconds: Int?) -> JSONRPCServer<RPCCallContext> {
    makeServer(source: CatalogSource(maxAgeSeconds: maxAgeSeconds))
}

/// ``makeServer(maxAgeSeconds:)`` with another source.
public func makeServer(source: some ProductSource) -> JSONRPCServer<RPCCallContext> {
    let service = ProductsFetchService(
        settings: .init(
            appID: "demo",
            limits: FetchProductsLimits(maxIdentifiers: 100),
            requestTimeout: .seconds(5),
            upstreamMaxIDs: 50,
            cacheMaxTTLSeconds: 60,
            regionResolver: RegionResolver(configuredDefault: nil, systemLocale: SystemLocale(environment: [:]))
        ),
        source: source,
        metrics: GatewayMetrics()
    )
    return JSONRPCServer<RPCCallContext>(maxBatchSize: 50, methods: ["products.fetch": GatewayApplication.productsFetchMethod(service: service)])
}

/// The loop every benchmarked call runs on, as the HTTP front runs a
/// request on the loop that read it.
public let benchLoop: EventLoop = {
    // Never shut down: it serves every benchmark of the process.
    let group = try! EventLoopGroup(count: 1, namePrefix: "bench-loop")
    return group.next()
}()

/// One body through the engine as the HTTP front drives it, on
/// ``benchLoop``: answered at once (a hit), or by the callback that
/// completes it (a miss, or a batch, without its turn). The hop onto the
/// loop and back (one `execute` and one continuation) is part of every
/// figure.
public func call(_ server: JSONRPCServer<RPCCallContext>, body: [UInt8]) async -> JSONRPCReply {
    await withCheckedContinuation { continuation in
        _ = benchLoop.execute {
            server.handle(body: body, context: requestContext) { continuation.resume(returning: $0) }
        }
    }
}

/// One call of five identifiers: four products (subscriptions with offers,
/// a one-time purchase) and one the catalog does not know.
public let requestBody = Array(#"""
{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["premium_monthly","coins_1200","family_monthly","remove_ads","retired_pack"],"countryCode":"de","language":"de-DE"}}
"""#.utf8)

/// The per-HTTP-request context, with a logger that drops everything.
public let requestContext = RPCCallContext(
    requestID: "bench-request-1",
    logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() },
    loop: benchLoop
)

/// The fixed 5-product `200` body the TLS upstream serves in `bench/run`
/// (`bench/lib/upstream-body.json`): two subscriptions, three one-time
/// purchases, no unknown ids.
public let upstreamBody: [UInt8] = {
    let path = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("lib/upstream-body.json").path
    guard let bytes = FileManager.default.contents(atPath: path) else {
        fatalError("upstream body not found at \(path)")
    }
    return Array(bytes)
}()

/// What the gateway does with an upstream `200` body before anything is
/// cached or answered: each product of the body normalised and encoded
/// once, transcoded from the body's bytes.
@inline(never)
public func sourcePage(fromUpstreamBody body: [UInt8]) -> SourcePage? {
    guard let products = try? UpstreamProductsPage.encodedProducts(of: body) else { return nil }
    return SourcePage(encodedProducts: products, maxAgeSeconds: nil)
}

/// The TLS upstream's body read on every fetch, as the gateway reads an
/// upstream `200` (without the HTTP exchange), and never kept: every call
/// parses, normalises and encodes the five products.
public struct UpstreamBodySource: ProductSource {
    public init() {}

    public func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
        let outcome: Result<SourcePage, ProductsFetchFailure>
        do {
            outcome = .success(SourcePage(encodedProducts: try UpstreamProductsPage.encodedProducts(of: upstreamBody), maxAgeSeconds: nil))
        } catch {
            outcome = .failure(.internalError(upstreamStatus: 200, detail: error.message))
        }
        _ = loop.execute { completion(outcome) }
    }
}

/// The call `bench/run` sends: the five products of ``upstreamBody``.
public let upstreamRequestBody = Array(#"""
{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["premium_monthly","premium_yearly","coins_100","coins_1200","remove_ads"],"countryCode":"DE"}}
"""#.utf8)
