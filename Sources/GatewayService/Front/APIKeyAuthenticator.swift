import EventTransport
/// Checks `Authorization: Bearer <key>` against the configured keys in
/// constant time (per key length), so timing does not reveal a prefix, and
/// says which key asked, for the access log, without the key.
struct APIKeyAuthenticator: Sendable {
    private let keys: [[UInt8]]
    /// Each key's access-log note (its fingerprint), by position in
    /// ``keys``: made once, at start.
    private let notes: [AccessNote]

    /// Who sent a request, as far as API keys tell.
    enum Caller: Sendable, Equatable {
        /// No key is configured: every request is let in.
        case open
        /// A configured key, by its note (its fingerprint, ``fingerprint(of:)``).
        case key(AccessNote)
        /// No `Authorization` field.
        case missing
        /// An `Authorization` field holding no configured key (another
        /// scheme, an unknown key).
        case refused

        var isAuthorized: Bool {
            switch self {
            case .open, .key: true
            case .missing, .refused: false
            }
        }

        /// What the access log is told (``HTTPResponse/note``); nil when no
        /// key is configured. Made at start, never per request.
        var note: AccessNote? {
            switch self {
            case .open: nil
            case .key(let note): note
            case .missing: .missingKey
            case .refused: .unknownKey
            }
        }

        /// The access log's `apiKey`: the key's fingerprint, `none` or
        /// `unknown`; nil when no key is configured.
        var logValue: String? { note?.apiKey }

        static func == (lhs: Caller, rhs: Caller) -> Bool {
            switch (lhs, rhs) {
            case (.open, .open), (.missing, .missing), (.refused, .refused): true
            case (.key(let left), .key(let right)): left.apiKey == right.apiKey
            default: false
            }
        }
    }

    init(keys: [String]) {
        self.keys = keys.map { Array($0.utf8) }
        self.notes = keys.map { AccessNote(apiKey: Self.fingerprint(of: $0)) }
    }

    var isEnabled: Bool { !keys.isEmpty }

    /// A key's name in the logs: the first 12 hex digits of its SHA-256
    /// (`printf %s "$KEY" | sha256sum | cut -c1-12`). Not the key, and
    /// not a way back to it: the same for every replica and every restart,
    /// and unchanged when other keys are added or removed.
    static func fingerprint(of key: String) -> String {
        String(decoding: Digest.hex(.sha256, of: Array(key.utf8)).prefix(12), as: UTF8.self)
    }

    func isAuthorized(_ authorization: String?) -> Bool {
        identify(authorization).isAuthorized
    }

    /// Which configured key `authorization` holds, if any.
    func identify(_ authorization: String?) -> Caller {
        guard isEnabled else { return .open }
        guard let authorization else { return .missing }
        let prefix = "bearer "
        guard authorization.utf8.count > prefix.utf8.count,
              authorization.prefix(prefix.count).lowercased() == prefix else { return .refused }
        let presented = Array(authorization.utf8.dropFirst(prefix.utf8.count))
        var matched: Int?
        // Every key is compared, whatever matched before.
        for (index, key) in keys.enumerated() where Self.constantTimeEquals(presented, key) {
            matched = index
        }
        return matched.map { .key(notes[$0]) } ?? .refused
    }

    static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        // Not the low byte of `lhs.count ^ rhs.count`: lengths that differ by
        // a multiple of 256 would look equal, and zero padding would then match.
        var difference: UInt8 = lhs.count == rhs.count ? 0 : 1
        let count = max(lhs.count, rhs.count)
        for index in 0..<count {
            let left = index < lhs.count ? lhs[index] : 0
            let right = index < rhs.count ? rhs[index] : 0
            difference |= left ^ right
        }
        return difference == 0
    }
}
