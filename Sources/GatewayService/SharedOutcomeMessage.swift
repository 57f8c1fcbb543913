import JSONRPC
import ProductsDomain

/// What a replica publishes on the outcomes channel when its claimed fetch
/// ends, so that the replicas waiting for it answer at once: the products
/// (cacheable or not) or the failure, or "released" when it gave up without
/// an outcome. JSON, versioned (`"v":1`); a message that does not parse is
/// ignored.
struct SharedOutcomeMessage: Sendable {
    enum Kind: Sendable {
        case success(SourcePage)
        case failure(ProductsFetchFailure)
        case released
    }

    var scope: FetchScope
    var identifiers: [String]
    var kind: Kind

    var encoded: [UInt8] {
        var object: JSONObject = [
            "v": .integer(1),
            "app": .string(scope.appID),
            "country": .string(scope.country.text),
            "language": scope.language.map { .string($0.text) } ?? .null,
            "ids": .array(identifiers.map(JSONValue.string)),
        ]
        switch kind {
        case .success(let page):
            object["kind"] = .string("success")
            object["maxAge"] = page.maxAgeSeconds.map(JSONValue.integer) ?? .null
            object["staleIfError"] = page.staleIfErrorSeconds.map(JSONValue.integer) ?? .null
            object["revalidate"] = page.staleWhileRevalidateSeconds.map(JSONValue.integer) ?? .null
            var products = JSONObject()
            for identifier in identifiers {
                if let product = page.encodedProducts[identifier] { products[identifier] = .encoded(product) }
            }
            object["products"] = .object(products)
        case .failure(let failure):
            object["kind"] = .string("failure")
            object["reason"] = .string(failure.reason)
            object["status"] = failure.upstreamStatus.map(JSONValue.integer) ?? .null
            object["retryAfter"] = failure.retryAfterSeconds.map(JSONValue.integer) ?? .null
            object["detail"] = failure.detail.map(JSONValue.string) ?? .null
        case .released:
            object["kind"] = .string("released")
        }
        return JSONValue.object(object).serialized()
    }

    init(scope: FetchScope, identifiers: [String], kind: Kind) {
        self.scope = scope
        self.identifiers = identifiers
        self.kind = kind
    }

    /// Reads a message; nil for anything else. Products are parsed and
    /// written again by the gateway's writer, and must answer their key.
    init?(decoding bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes, limits: .init(maxDepth: 24)), let object = value.objectValue,
              object["v"]?.intValue == 1,
              let app = object["app"]?.stringValue,
              let countryText = object["country"]?.stringValue, let country = CountryCode(countryText),
              let ids = object["ids"]?.arrayValue, let kind = object["kind"]?.stringValue else { return nil }
        let language: LanguageTag?
        switch object["language"] {
        case nil, .null?: language = nil
        case .string(let text)?:
            guard let tag = LanguageTag(text) else { return nil }
            language = tag
        default: return nil
        }
        var identifiers: [String] = []
        for id in ids {
            guard let text = id.stringValue else { return nil }
            identifiers.append(text)
        }
        scope = FetchScope(appID: app, country: country, language: language)
        self.identifiers = identifiers
        func optionalInt(_ key: String) -> Int?? {
            switch object[key] {
            case nil, .null?: return .some(nil)
            case let value?: return value.intValue.map { .some($0) } ?? nil
            }
        }
        switch kind {
        case "success":
            guard let products = object["products"]?.objectValue,
                  let maxAge = optionalInt("maxAge"), let staleIfError = optionalInt("staleIfError"), let revalidate = optionalInt("revalidate")
            else { return nil }
            var encoded: [String: EncodedJSON] = [:]
            for (identifier, product) in products {
                guard product.objectValue?["productIdentifier"]?.stringValue == identifier else { return nil }
                encoded[identifier] = EncodedJSON(product)
            }
            self.kind = .success(SourcePage(encodedProducts: encoded, maxAgeSeconds: maxAge, staleIfErrorSeconds: staleIfError, staleWhileRevalidateSeconds: revalidate))
        case "failure":
            guard let reason = object["reason"]?.stringValue, let status = optionalInt("status"), let retryAfter = optionalInt("retryAfter") else { return nil }
            let detail = object["detail"]?.stringValue
            guard let failure = ProductsFetchFailure(reason: reason, upstreamStatus: status, retryAfterSeconds: retryAfter, detail: detail) else { return nil }
            self.kind = .failure(failure)
        case "released":
            self.kind = .released
        default:
            return nil
        }
    }
}

extension ProductsFetchFailure {
    /// The detail a case carries, for a message to another replica.
    var detail: String? {
        switch self {
        case .connectionError(let detail), .cancelled(let detail), .internalError(_, let detail): detail
        case .invalidProductIdentifier(_, let detail): detail
        case .serviceUnavailable, .appNotRegistered: nil
        }
    }

    /// The failure another replica described; nil for a description that
    /// names no case or lacks what the case needs.
    init?(reason: String, upstreamStatus: Int?, retryAfterSeconds: Int?, detail: String?) {
        switch reason {
        case "connectionError": self = .connectionError(detail: detail ?? "another replica could not reach the upstream")
        case "serviceUnavailable":
            guard let upstreamStatus else { return nil }
            self = .serviceUnavailable(upstreamStatus: upstreamStatus, retryAfterSeconds: retryAfterSeconds)
        case "appNotRegistered":
            guard let upstreamStatus else { return nil }
            self = .appNotRegistered(upstreamStatus: upstreamStatus)
        case "invalidProductIdentifier":
            guard let upstreamStatus else { return nil }
            self = .invalidProductIdentifier(upstreamStatus: upstreamStatus, detail: detail)
        case "cancelled": self = .cancelled(detail: detail ?? "another replica's fetch was cancelled")
        case "internalError": self = .internalError(upstreamStatus: upstreamStatus, detail: detail ?? "another replica could not use the upstream's answer")
        default: return nil
        }
    }
}
