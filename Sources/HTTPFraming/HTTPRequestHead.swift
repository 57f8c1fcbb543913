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
        let utf8 = target.utf8
        var start = utf8.startIndex
        if utf8.first != UInt8(ascii: "/") {
            for scheme in ["http://", "https://"] where target.hasPrefix(scheme) {
                let authority = utf8.index(start, offsetBy: scheme.utf8.count)
                guard let slash = utf8[authority...].firstIndex(of: UInt8(ascii: "/")) else { return "/" }
                start = slash
            }
        }
        // Index arithmetic on the UTF-8 view: the common origin form
        // (`/rpc`) costs no allocation and no character breaking.
        let end = utf8[start...].firstIndex(of: UInt8(ascii: "?")) ?? utf8.endIndex
        return target[start..<end]
    }
}
