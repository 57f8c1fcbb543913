public import JSONRPC

/// Why a `products.fetch` call failed; the cases are OnsideKit's `OnsideProductsRequestError`.
///
/// This is the one place where failures become JSON-RPC errors (contract
/// section 1, "Errors of products.fetch"). Details are written into messages
/// for a person, so callers must never put credentials in them.
public enum ProductsFetchFailure: Error, Sendable, Equatable {
    /// The upstream could not be reached: refused, reset, DNS, TLS handshake or certificate failure, timeout.
    case connectionError(detail: String)
    /// The upstream answered 5xx or 429 after the allowed retries.
    case serviceUnavailable(upstreamStatus: Int, retryAfterSeconds: Int?)
    /// The upstream answered 404: the app is not known to Onside.
    case appNotRegistered(upstreamStatus: Int)
    /// The upstream answered 422: it rejected the request.
    case invalidProductIdentifier(upstreamStatus: Int, detail: String?)
    /// The call's own deadline passed, or the gateway is shutting down.
    case cancelled(detail: String)
    /// The upstream answered something unparseable or unexpected (bad JSON, missing fields, 401/403, other 4xx).
    case internalError(upstreamStatus: Int?, detail: String)

    /// The contract's `data.reason`: the case name.
    public var reason: String {
        switch self {
        case .connectionError: "connectionError"
        case .serviceUnavailable: "serviceUnavailable"
        case .appNotRegistered: "appNotRegistered"
        case .invalidProductIdentifier: "invalidProductIdentifier"
        case .cancelled: "cancelled"
        case .internalError: "internalError"
        }
    }

    /// The JSON-RPC error code, -32001 to -32006.
    public var code: Int {
        switch self {
        case .connectionError: -32001
        case .serviceUnavailable: -32002
        case .appNotRegistered: -32003
        case .invalidProductIdentifier: -32004
        case .cancelled: -32005
        case .internalError: -32006
        }
    }

    /// Whether the same call may succeed when tried again (`data.retryable`).
    public var isRetryable: Bool {
        switch self {
        case .connectionError, .serviceUnavailable, .cancelled: true
        case .appNotRegistered, .invalidProductIdentifier, .internalError: false
        }
    }

    /// The upstream's HTTP status, when it answered with one.
    public var upstreamStatus: Int? {
        switch self {
        case .connectionError, .cancelled: nil
        case .serviceUnavailable(let status, _), .appNotRegistered(let status), .invalidProductIdentifier(let status, _): status
        case .internalError(let status, _): status
        }
    }

    /// The upstream's `Retry-After`, in seconds, when it sent one.
    public var retryAfterSeconds: Int? {
        if case .serviceUnavailable(_, let seconds) = self { return seconds }
        return nil
    }

    /// The failure a call reports when its chunks failed differently.
    ///
    /// Precedence when chunks of one call fail differently: appNotRegistered,
    /// invalidProductIdentifier, internalError, serviceUnavailable,
    /// connectionError, cancelled (first wins). Among failures of the same case,
    /// the earliest in `failures` wins.
    /// - Returns: `nil` when `failures` is empty.
    public static func mostSevere(_ failures: [ProductsFetchFailure]) -> ProductsFetchFailure? {
        var best: ProductsFetchFailure?
        for failure in failures where best.map({ failure.severityRank < $0.severityRank }) ?? true {
            best = failure
        }
        return best
    }

    /// Position in the contract's precedence list; lower reports first.
    private var severityRank: Int {
        switch self {
        case .appNotRegistered: 0
        case .invalidProductIdentifier: 1
        case .internalError: 2
        case .serviceUnavailable: 3
        case .connectionError: 4
        case .cancelled: 5
        }
    }

    /// Longest detail copied into a message, in characters.
    static let maxDetailLength = 200

    /// A sentence for a person; it never holds more of a detail than `maxDetailLength` characters.
    public var message: String {
        switch self {
        case .connectionError(let detail):
            return "The products service could not be reached: \(Self.clipped(detail))"
        case .serviceUnavailable(let status, let seconds):
            let retry = seconds.map { "; retry after \($0) seconds" } ?? "; retry later"
            return "The products service is unavailable (upstream status \(status))\(retry)"
        case .appNotRegistered(let status):
            return "The app is not registered with Onside (upstream status \(status))"
        case .invalidProductIdentifier(let status, let detail):
            let suffix = detail.map { ": \(Self.clipped($0))" } ?? ""
            return "The products service rejected the request (upstream status \(status))\(suffix)"
        case .cancelled(let detail):
            return "The call was cancelled: \(Self.clipped(detail))"
        case .internalError(let status, let detail):
            let answered = status.map { " (upstream status \($0))" } ?? ""
            return "The products service gave an answer the gateway cannot use\(answered): \(Self.clipped(detail))"
        }
    }

    /// The JSON-RPC error for this failure.
    ///
    /// `data` holds, in this order, `reason`, `retryable`, `requestId`, then
    /// `upstreamStatus` and `retryAfterSeconds` when they are known.
    /// - Parameter requestID: The call's `X-Request-Id`.
    public func jsonRPCError(requestID: String) -> JSONRPCError {
        var data = JSONObject([
            ("reason", .string(reason)),
            ("retryable", .bool(isRetryable)),
            ("requestId", .string(requestID)),
        ])
        if let upstreamStatus { data["upstreamStatus"] = .integer(upstreamStatus) }
        if let retryAfterSeconds { data["retryAfterSeconds"] = .integer(retryAfterSeconds) }
        return JSONRPCError(code: code, message: message, data: .object(data), cause: self)
    }

    private static func clipped(_ detail: String) -> String {
        detail.count > maxDetailLength ? String(detail.prefix(maxDetailLength)) + "…" : detail
    }
}
