/// Why a catalog could not be loaded; each case says where the problem is.
public enum CatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be read.
    case unreadable(file: String, detail: String)
    /// The catalog is larger than `Catalog.maxBytes`.
    case tooLarge(byteCount: Int, limit: Int)
    /// The catalog is not valid JSON.
    case malformedJSON(detail: String)
    /// A value is missing or wrong; `path` is like `products[3].prices.DE.amount`.
    case invalid(path: String, problem: String)

    public var description: String {
        switch self {
        case .unreadable(let file, let detail):
            "catalog file \(file) cannot be read: \(detail)"
        case .tooLarge(let byteCount, let limit):
            "catalog is \(byteCount) bytes, more than the limit of \(limit) bytes"
        case .malformedJSON(let detail):
            "catalog is not valid JSON: \(detail)"
        case .invalid(let path, let problem):
            "catalog \(path): \(problem)"
        }
    }
}
