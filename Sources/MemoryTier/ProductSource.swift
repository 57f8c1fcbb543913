public import EventTransport
public import JSONRPC
public import MonotonicTime
public import ProductsDomain
public import Tracing

/// What an upstream answer is valid for: the same identifier may have other
/// products in another app, country or language.
public struct FetchScope: Hashable, Sendable {
    public let appID: String
    public let country: CountryCode
    public let language: LanguageTag?

    public init(appID: String, country: CountryCode, language: LanguageTag?) {
        self.appID = appID
        self.country = country
        self.language = language
    }
}

/// One identifier in one scope: the key of the memory cache, of in-process
/// coalescing and of the replicas waiting on the shared tier. Its hash is
/// computed once, from the scope's hash (computed once per call) and the
/// identifier.
// One identifier of one scope, as the coalescer keys it: hashed once
/// when made (the scope's hash and the identifier's text), so that the
/// lookup, the claim and the release of an identifier hash an `Int`
/// instead of strings; equality still compares the whole scope and text.
package struct ScopedIdentifier: Hashable, Sendable {
    package let scope: FetchScope
    package let identifier: String
    private let precomputedHash: Int

    package init(scope: FetchScope, scopeHash: Int, identifier: String) {
        self.scope = scope
        self.identifier = identifier
        var hasher = Hasher()
        hasher.combine(scopeHash)
        hasher.combine(identifier)
        precomputedHash = hasher.finalize()
    }

    /// The keys of `identifiers` in `scope`, in order; the scope is hashed
    /// once for all of them.
    package static func keys(scope: FetchScope, identifiers: some Sequence<String>) -> [ScopedIdentifier] {
        let scopeHash = scope.hashValue
        return identifiers.map { ScopedIdentifier(scope: scope, scopeHash: scopeHash, identifier: $0) }
    }

    package static func == (lhs: ScopedIdentifier, rhs: ScopedIdentifier) -> Bool {
        lhs.precomputedHash == rhs.precomputedHash && lhs.identifier == rhs.identifier && lhs.scope == rhs.scope
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(precomputedHash)
    }
}

/// One upstream call's worth of identifiers.
public struct SourceRequest: Sendable {
    public let scope: FetchScope
    /// At most `UPSTREAM_MAX_IDS` identifiers.
    public let identifiers: [String]
    /// Sent upstream as `X-Request-Id`.
    public let requestID: String
    /// Retries stop here.
    public let deadline: MonotonicInstant
    /// Leases the shared tier's lookup already took for some of
    /// `identifiers`, which the fetch adopts.
    package var preclaim: SharedPreclaim?
    /// The trace of the call that started the fetch: every upstream
    /// attempt sends it on (`traceparent`, `tracestate`), under a span of
    /// its own whose parent is that call's span. Nil: each attempt starts
    /// a trace of its own.
    public var trace: PropagatedTrace?

    package init(scope: FetchScope, identifiers: [String], requestID: String, deadline: MonotonicInstant, preclaim: SharedPreclaim? = nil, trace: PropagatedTrace? = nil) {
        self.scope = scope
        self.identifiers = identifiers
        self.requestID = requestID
        self.deadline = deadline
        self.preclaim = preclaim
        self.trace = trace
    }
}

/// An upstream answer, its products encoded, with how long it may be reused.
public struct SourcePage: Sendable {
    /// From `Cache-Control: max-age`; `nil` when the answer must not be kept.
    public let maxAgeSeconds: Int?
    /// `Cache-Control: stale-if-error`, as the upstream sent it (RFC 5861).
    public let staleIfErrorSeconds: Int?
    /// `Cache-Control: stale-while-revalidate`, as the upstream sent it (RFC 5861).
    public let staleWhileRevalidateSeconds: Int?
    /// The products found, normalised and encoded once (``Product/encoded``),
    /// by identifier; when the upstream repeats an id the first item wins,
    /// as in ``UpstreamProductsPage/productsByID``. Every identifier asked
    /// for and not here is unknown. The cache and every call waiting on this
    /// page splice these bytes instead of encoding the products again.
    public let encodedProducts: [String: EncodedJSON]

    /// A page; its items are normalised and encoded here, once.
    public init(page: UpstreamProductsPage, maxAgeSeconds: Int?, staleIfErrorSeconds: Int? = nil, staleWhileRevalidateSeconds: Int? = nil) {
        self.init(
            encodedProducts: page.encodedProducts, maxAgeSeconds: maxAgeSeconds,
            staleIfErrorSeconds: staleIfErrorSeconds, staleWhileRevalidateSeconds: staleWhileRevalidateSeconds
        )
    }

    /// A page of products already encoded: an upstream body transcoded
    /// (``UpstreamProductsPage/encodedProducts(of:)``), the shared tier's
    /// entries, another replica's outcome.
    public init(encodedProducts: [String: EncodedJSON], maxAgeSeconds: Int?, staleIfErrorSeconds: Int? = nil, staleWhileRevalidateSeconds: Int? = nil) {
        self.maxAgeSeconds = maxAgeSeconds
        self.staleIfErrorSeconds = staleIfErrorSeconds
        self.staleWhileRevalidateSeconds = staleWhileRevalidateSeconds
        self.encodedProducts = encodedProducts
    }
}

extension SourcePage {
    /// This page with only the products of `identifiers`, each matched
    /// byte for byte. An item the fetch did not ask for is dropped (the
    /// contract's rule), so it can never fill a slot another fetch is
    /// answering; so is one whose id differs from an asked one only by
    /// Unicode equivalence (`\u{212A}ey` for `Key`), which `String`
    /// compares and hashes as equal. Returns the page itself, with no copy,
    /// when nothing is dropped.
    package func restricted(to identifiers: [String]) -> SourcePage {
        var exact = 0
        for identifier in identifiers {
            guard let index = encodedProducts.index(forKey: identifier) else { continue }
            if encodedProducts[index].key.utf8.elementsEqual(identifier.utf8) { exact += 1 }
        }
        // Asked identifiers are distinct, so `exact` counts distinct keys.
        if exact == encodedProducts.count { return self }
        var kept: [String: EncodedJSON] = [:]
        kept.reserveCapacity(exact)
        for identifier in identifiers {
            guard let index = encodedProducts.index(forKey: identifier) else { continue }
            let (key, product) = encodedProducts[index]
            if key.utf8.elementsEqual(identifier.utf8) { kept[identifier] = product }
        }
        return SourcePage(
            encodedProducts: kept, maxAgeSeconds: maxAgeSeconds,
            staleIfErrorSeconds: staleIfErrorSeconds, staleWhileRevalidateSeconds: staleWhileRevalidateSeconds
        )
    }
}

/// Where products come from: the Onside upstream over HTTPS, or the
/// embedded catalog. Both feed the same pipeline (coalescing, caching,
/// normalisation, errors), by callback on the call's loop, with no task.
public protocol ProductSource: Sendable {
    /// Fetches `request` on `loop`, called there (the loop of the call that
    /// started the fetch, passed explicitly): `completion` gets the outcome
    /// once, after this returns, on `loop`, always (or, once `loop` has
    /// stopped for good, on the thread that ends the fetch). A source that
    /// hears its answer on another thread brings it back to `loop` itself,
    /// so a caller never hops: what it keeps for the fetch is loop-bound.
    func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void)
}

/// Serves a catalog as if it were the upstream.
public struct CatalogProductSource: ProductSource {
    private let catalog: Catalog

    public init(catalog: Catalog) {
        self.catalog = catalog
    }

    /// Answers on `loop`'s next turn: never before `fetch` returns, as a
    /// source over the network would not.
    public func fetch(_ request: SourceRequest, on loop: EventLoop, completion: @escaping @Sendable (Result<SourcePage, ProductsFetchFailure>) -> Void) {
        let page = catalog.page(ids: request.identifiers, country: request.scope.country, language: request.scope.language)
        let outcome: Result<SourcePage, ProductsFetchFailure> = .success(SourcePage(page: page, maxAgeSeconds: nil))
        if !loop.execute({ completion(outcome) }) {
            completion(.failure(.cancelled(detail: "the gateway is shutting down")))
        }
    }
}

/// Leases a lookup took (``SharedTier/lookup(scope:identifiers:completion:)``)
/// for the fetches its call starts: each fetch adopts those of its
/// identifiers (``restricted(to:)``), and what none adopts is released.
package struct SharedPreclaim: Sendable {
    package let token: String
    package let scope: FetchScope
    /// Which leases it holds: every identifier of a list (the usual miss,
    /// kept as the call's own array, with nothing hashed), or a set.
    private var leases: Leases

    private enum Leases: Sendable {
        case exactly([String])
        case some(Set<String>)
    }

    /// Leases on `won`.
    package init(token: String, scope: FetchScope, won: Set<String> = []) {
        self.token = token
        self.scope = scope
        self.leases = .some(won)
    }

    /// Leases on every one of `identifiers` (distinct).
    package init(token: String, scope: FetchScope, wonAllOf identifiers: [String]) {
        self.token = token
        self.scope = scope
        self.leases = .exactly(identifiers)
    }

    /// Leases this token holds.
    package var won: Set<String> {
        get {
            switch leases {
            case .exactly(let identifiers): Set(identifiers)
            case .some(let won): won
            }
        }
        set { leases = .some(newValue) }
    }

    /// How many leases it holds.
    package var wonCount: Int {
        switch leases {
        case .exactly(let identifiers): identifiers.count
        case .some(let won): won.count
        }
    }

    /// The identifiers it holds leases on.
    package var wonIdentifiers: [String] {
        switch leases {
        case .exactly(let identifiers): identifiers
        case .some(let won): Array(won)
        }
    }

    /// Whether these are leases won on exactly `identifiers` (distinct),
    /// none held elsewhere: the fetch owns every identifier it asks.
    package func ownsAll(of identifiers: [String]) -> Bool {
        switch leases {
        case .exactly(let all):
            // The usual miss: the fetch asks the lookup's own list (the
            // same strings, compared by their storage first).
            guard all.count == identifiers.count else { return false }
            return all == identifiers || identifiers.allSatisfy(Set(all).contains)
        case .some(let won):
            return won.count == identifiers.count && identifiers.allSatisfy(won.contains)
        }
    }

    /// The part of these leases that `identifiers` adopt.
    package func restricted(to identifiers: [String]) -> SharedPreclaim? {
        // The usual miss: one fetch adopts every lease its lookup won.
        if ownsAll(of: identifiers) { return self }
        let won = self.won
        var part = SharedPreclaim(token: token, scope: scope)
        var adopted: Set<String> = []
        for identifier in identifiers where won.contains(identifier) { adopted.insert(identifier) }
        part.leases = .some(adopted)
        return adopted.isEmpty ? nil : part
    }
}
