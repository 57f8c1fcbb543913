package import MemoryTier
import JSONRPC
package import ProductsDomain

/// What a replica publishes on the outcomes channel when its claimed fetch
/// ends, so that the replicas waiting for it answer at once: the products
/// (cacheable or not) or the failure, or "released" when it gave up without
/// an outcome. JSON, versioned (`"v":1`); a message that does not parse is
/// ignored.
package struct SharedOutcomeMessage: Sendable {
    package enum Kind: Sendable {
        case success(SourcePage)
        case failure(ProductsFetchFailure)
        case released
    }

    package var scope: FetchScope
    package var identifiers: [String]
    package var kind: Kind

    /// The largest message read: the contract's cap on anything read from Redis.
    package static let maxBytes = 1 << 20
    /// Ages and windows a message may carry, in seconds: 0 to 10 years.
    /// The gateway writes them clamped into this range; a message out of it
    /// is refused where it is decoded.
    package static let secondsRange = 0...315_360_000
    /// An upstream status a failure may carry.
    package static let statusRange = 100...599
    /// The longest failure detail read (the gateway clips its own at 200).
    package static let maxDetailBytes = 1024

    package var encoded: [UInt8] {
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
            object["maxAge"] = Self.seconds(page.maxAgeSeconds)
            object["staleIfError"] = Self.seconds(page.staleIfErrorSeconds)
            object["revalidate"] = Self.seconds(page.staleWhileRevalidateSeconds)
            var products = JSONObject()
            for identifier in identifiers {
                if let product = page.encodedProducts[identifier] { products[identifier] = .encoded(product) }
            }
            object["products"] = .object(products)
        case .failure(let failure):
            object["kind"] = .string("failure")
            object["reason"] = .string(failure.reason)
            object["status"] = failure.upstreamStatus.map(JSONValue.integer) ?? .null
            object["retryAfter"] = Self.seconds(failure.retryAfterSeconds)
            object["detail"] = failure.detail.map { .string(String($0.utf8.prefix(Self.maxDetailBytes)) ?? "") } ?? .null
        case .released:
            object["kind"] = .string("released")
        }
        return JSONValue.object(object).serialized()
    }

    /// Seconds clamped into ``secondsRange``, or null.
    private static func seconds(_ value: Int?) -> JSONValue {
        value.map { .integer(min(max($0, secondsRange.lowerBound), secondsRange.upperBound)) } ?? .null
    }

    package init(scope: FetchScope, identifiers: [String], kind: Kind) {
        self.scope = scope
        self.identifiers = identifiers
        self.kind = kind
    }

    /// Reads a message; nil for anything else: over ``maxBytes``, naming no
    /// identifier or more than `maxIdentifiers` (`UPSTREAM_MAX_IDS`: no
    /// fetch asks more), an identifier that is not one, a product for an
    /// identifier it does not name, a product over
    /// ``ProductAnswer/maxProductBytes``, or a number out of its range. Products
    /// are parsed and written again by the gateway's writer, and must answer
    /// their key.
    package init?(decoding bytes: [UInt8], maxIdentifiers: Int = 1_000) {
        guard bytes.count <= Self.maxBytes,
              let value = try? JSONParser.parse(bytes, limits: .init(maxDepth: 24)), let object = value.objectValue,
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
        guard (1...maxIdentifiers).contains(ids.count) else { return nil }
        var identifiers: [String] = []
        identifiers.reserveCapacity(ids.count)
        for id in ids {
            guard let text = id.stringValue, ProductIdentifier.isValid(text) else { return nil }
            identifiers.append(text)
        }
        scope = FetchScope(appID: app, country: country, language: language)
        self.identifiers = identifiers
        /// nil: present and not an integer in `range`; .some(nil): absent or null.
        func optionalInt(_ key: String, in range: ClosedRange<Int> = Self.secondsRange) -> Int?? {
            switch object[key] {
            case nil, .null?: return .some(nil)
            case let value?:
                guard let number = value.intValue, range.contains(number) else { return nil }
                return .some(number)
            }
        }
        switch kind {
        case "success":
            guard let products = object["products"]?.objectValue,
                  let maxAge = optionalInt("maxAge"), let staleIfError = optionalInt("staleIfError"), let revalidate = optionalInt("revalidate")
            else { return nil }
            var encoded: [String: EncodedJSON] = [:]
            let named = Set(identifiers)
            for (identifier, product) in products {
                guard named.contains(identifier) else { return nil }
                // Another replica's, or anyone's who can publish: only a
                // product of at most 64 KiB and of the public shape, for the
                // identifier it names.
                let bytes = EncodedJSON(product)
                guard bytes.bytes.count <= ProductAnswer.maxProductBytes, ProductSchema.admits(bytes.bytes, identifier: identifier) else { return nil }
                encoded[identifier] = bytes
            }
            self.kind = .success(SourcePage(encodedProducts: encoded, maxAgeSeconds: maxAge, staleIfErrorSeconds: staleIfError, staleWhileRevalidateSeconds: revalidate))
        case "failure":
            guard let reason = object["reason"]?.stringValue, let status = optionalInt("status", in: Self.statusRange),
                  let retryAfter = optionalInt("retryAfter") else { return nil }
            let detail = object["detail"]?.stringValue
            guard (detail?.utf8.count ?? 0) <= Self.maxDetailBytes else { return nil }
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
    package var detail: String? {
        switch self {
        case .connectionError(let detail), .cancelled(let detail), .internalError(_, let detail): detail
        case .invalidProductIdentifier(_, let detail): detail
        case .serviceUnavailable, .appNotRegistered: nil
        }
    }

    /// The failure another replica described; nil for a description that
    /// names no case or lacks what the case needs.
    package init?(reason: String, upstreamStatus: Int?, retryAfterSeconds: Int?, detail: String?) {
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
