import ProductsDomain

extension ProductsFetchFailure {
    /// Whether a `stale-if-error` entry may answer in place of this failure:
    /// only when the upstream could not be reached or was unavailable
    /// (RFC 5861's "error": 5xx and connection failures, and 429 here).
    package var allowsStaleAnswer: Bool {
        switch self {
        case .connectionError, .serviceUnavailable: true
        case .appNotRegistered, .invalidProductIdentifier, .cancelled, .internalError: false
        }
    }
}
