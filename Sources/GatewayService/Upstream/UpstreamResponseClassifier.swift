import MemoryTier
import SharedTier
import EventTransport
import JSONRPC
import ProductsDomain

/// Maps one upstream exchange to the contract's error table, in one place.
enum UpstreamResponseClassifier {
    enum Verdict {
        case success(SourcePage)
        /// `retryable`: the contract retries connection errors, 502, 503 and 504 only.
        case failure(ProductsFetchFailure, retryable: Bool, retryAfterSeconds: Int?)
    }

    static func classify(_ outcome: Result<HTTPClientResponse, HTTPClientError>) -> Verdict {
        let response: HTTPClientResponse
        switch outcome {
        case .failure(let error) where error.kind == .responseTooLarge || error.kind == .malformedResponse:
            // Asking again would download as much again, or read the same
            // broken framing: not retried. The upstream answered something
            // unparseable, which the contract calls internalError.
            return .failure(.internalError(upstreamStatus: nil, detail: error.message), retryable: false, retryAfterSeconds: nil)
        case .failure(let error) where error.kind == .noLease:
            // The lease deadline is the deadline of the call that started
            // the fetch: it passed while the upstream was never asked.
            // Which of the call's own timer and this one the loop runs
            // first must not decide its answer.
            return .failure(.cancelled(detail: error.message), retryable: false, retryAfterSeconds: nil)
        case .failure(let error):
            return .failure(.connectionError(detail: error.message), retryable: true, retryAfterSeconds: nil)
        case .success(let received):
            response = received
        }
        let status = response.status
        let retryAfter = retryAfterSeconds(response.headers["Retry-After"])
        switch status {
        case 200:
            do {
                var products = try UpstreamProductsPage.encodedProducts(of: response.body)
                // A product over the cap is left out: its identifier is
                // then one the upstream did not answer, which the contract
                // reports as invalid (and it is cached and shared so).
                if products.values.contains(where: { $0.bytes.count > ProductAnswer.maxProductBytes }) {
                    products = products.filter { $0.value.bytes.count <= ProductAnswer.maxProductBytes }
                }
                let cacheControl = response.headers.values("Cache-Control")
                let stale = StaleAnswerDirectives.parse(cacheControl)
                return .success(SourcePage(
                    encodedProducts: products,
                    maxAgeSeconds: maxAge(cacheControl),
                    staleIfErrorSeconds: stale.staleIfErrorSeconds,
                    staleWhileRevalidateSeconds: stale.staleWhileRevalidateSeconds
                ))
            } catch {
                return .failure(.internalError(upstreamStatus: 200, detail: "the upstream answer could not be read: \(error.message)"), retryable: false, retryAfterSeconds: nil)
            }
        case 404:
            return .failure(.appNotRegistered(upstreamStatus: 404), retryable: false, retryAfterSeconds: nil)
        case 422:
            return .failure(.invalidProductIdentifier(upstreamStatus: 422, detail: nil), retryable: false, retryAfterSeconds: nil)
        case 429:
            return .failure(.serviceUnavailable(upstreamStatus: 429, retryAfterSeconds: retryAfter), retryable: false, retryAfterSeconds: retryAfter)
        case 500...599:
            let retryable = status == 502 || status == 503 || status == 504
            return .failure(.serviceUnavailable(upstreamStatus: status, retryAfterSeconds: retryAfter), retryable: retryable, retryAfterSeconds: retryAfter)
        case 401, 403:
            return .failure(.internalError(upstreamStatus: status, detail: "the upstream refused the gateway's credentials (HTTP \(status)); check ONSIDE_API_TOKEN"), retryable: false, retryAfterSeconds: nil)
        default:
            return .failure(.internalError(upstreamStatus: status, detail: "the upstream answered an unexpected HTTP \(status)"), retryable: false, retryAfterSeconds: nil)
        }
    }

    /// `Retry-After` in delta-seconds (the upstream's form); dates and
    /// nonsense are ignored. Capped at one day.
    static func retryAfterSeconds(_ value: String?) -> Int? {
        guard let value = value?.trimmingSpaces, !value.isEmpty, value.utf8.count <= 9,
              value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let seconds = Int(value) else { return nil }
        return min(seconds, 86_400)
    }

    /// `max-age=N` from `Cache-Control`, unless `no-store` or `no-cache` is
    /// present too.
    static func maxAge(_ values: [String]) -> Int? {
        var maxAge: Int?
        for directive in values.flatMap({ $0.split(separator: ",") }) {
            let parts = directive.split(separator: "=", maxSplits: 1).map { String($0).trimmingSpaces.lowercased() }
            switch parts.first {
            case "no-store", "no-cache":
                return nil
            case "max-age":
                if parts.count == 2, let seconds = Int(parts[1].trimming("\"")), seconds >= 0 {
                    maxAge = seconds
                }
            default:
                continue
            }
        }
        return maxAge
    }
}

extension String {
    var trimmingSpaces: String { trimming(" \t") }

    func trimming(_ set: String) -> String {
        let characters = Set(set)
        var slice = Substring(self)
        while let first = slice.first, characters.contains(first) { slice.removeFirst() }
        while let last = slice.last, characters.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
