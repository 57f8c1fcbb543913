import GatewayService
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

    public func fetch(_ request: SourceRequest) async -> Result<SourcePage, ProductsFetchFailure> {
        let page = catalog.page(ids: request.identifiers, country: request.scope.country, language: request.scope.language)
        return .success(SourcePage(page: page, maxAgeSeconds: maxAgeSeconds))
    }
}

/// The engine and `products.fetch` wired as `GatewayApplication` wires them,
/// without the HTTP front and without the observer (its metrics and log
/// line are the application's, not the engine's or the service's).
public func makeServer(maxAgeSeconds: Int?) -> JSONRPCServer<RPCCallContext> {
    let service = ProductsFetchService(
        settings: .init(
            appID: "demo",
            limits: FetchProductsLimits(maxIdentifiers: 100),
            requestTimeout: .seconds(5),
            upstreamMaxIDs: 50,
            cacheMaxTTLSeconds: 60,
            regionResolver: RegionResolver(configuredDefault: nil, systemLocale: SystemLocale(environment: [:]))
        ),
        source: CatalogSource(maxAgeSeconds: maxAgeSeconds),
        metrics: GatewayMetrics()
    )
    return JSONRPCServer<RPCCallContext>(
        maxBatchSize: 50,
        methods: [
            "products.fetch": { request, context in
                await service.fetch(params: request.params, requestID: context.requestID, logger: context.logger)
            },
        ]
    )
}

/// One call of five identifiers: four products (subscriptions with offers,
/// a one-time purchase) and one the catalog does not know.
public let requestBody = Array(#"""
{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["premium_monthly","coins_1200","family_monthly","remove_ads","retired_pack"],"countryCode":"de","language":"de-DE"}}
"""#.utf8)

/// The per-HTTP-request context, with a logger that drops everything.
public let requestContext = RPCCallContext(
    requestID: "bench-request-1",
    logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
)
