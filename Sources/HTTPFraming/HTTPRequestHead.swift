/// The request line and header section of one request, checked against
/// RFC 9112.
public struct HTTPRequestHead: Sendable {
    /// `HTTP/1.0` or `HTTP/1.1` (a later 1.x minor is served as 1.1, as
    /// RFC 9110 section 6.2 asks).
    public enum Version: Sendable, Equatable {
        case http10
        case http11
    }

    /// How the body is delimited (RFC 9112 section 6.3).
    public enum BodyFraming: Sendable, Equatable {
        case none
        case length(Int)
        case chunked
    }

    /// The method token as sent (methods are case-sensitive).
    public var method: String
    /// The request target as sent: origin form (`/rpc?x=1`), absolute form
    /// or `*`.
    public var target: String
    public var version: Version
    /// The fields in order, names as sent.
    public var headers: HTTPHeaders
    public var bodyFraming: BodyFraming
    /// Whether the client asked for `100 Continue` before sending its body.
    public var expectsContinue: Bool
    /// Whether the client allows the connection to stay open after the answer.
    public var keepAlive: Bool

    /// The path of the target: for the absolute form, the part after the
    /// authority; the query is not included.
    public var path: Substring {
        var rest = Substring(target)
        if !rest.hasPrefix("/") {
            for scheme in ["http://", "https://"] where rest.hasPrefix(scheme) {
                rest = rest.dropFirst(scheme.count)
                rest = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
            }
        }
        return rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    }
}
