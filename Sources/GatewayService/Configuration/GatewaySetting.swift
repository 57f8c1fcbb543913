/// One row of the settings table (``ConfigurationVariable/setting``):
/// the variable, its flag, its default, what it allows, how the start-up
/// summary shows it (and so whether it is a secret), and what it means.
///
/// `GatewayConfiguration.load` takes each default and range from here,
/// `products-gateway --help` words each flag from here, and the start-up
/// summary lists the settings in this order, as each row says.
public struct GatewaySetting: Sendable {
    /// The environment variable, e.g. `GATEWAY_MAX_IDS`.
    public let name: String
    /// The command-line flag of the same meaning, without the dashes. Not
    /// optional: the contract gives every variable a flag.
    public let flag: String
    /// What applies when neither the variable nor the flag is given.
    public let defaultValue: Default
    /// The values it takes.
    public let allowed: Form
    /// How the start-up summary shows the effective value.
    public let shown: Shown
    /// What it does, one line, for `--help`.
    public let meaning: String

    init(_ name: String, flag: String, default defaultValue: Default, allowed: Form, shown: Shown, _ meaning: String) {
        self.name = name
        self.flag = flag
        self.defaultValue = defaultValue
        self.allowed = allowed
        self.shown = shown
        self.meaning = meaning
    }

    /// True for a value that must never be logged or echoed.
    public var isSecret: Bool { shown.isSecret }

    /// The flag's help: its meaning, then its variable, default and range,
    /// all from this row.
    public var help: String {
        "\(meaning) Env: \(name). Default: \(defaultValue). Allowed: \(allowed).\(shown.secrecyNote.map { " \($0)" } ?? "")"
    }

    /// What applies when a setting is not given.
    public enum Default: Sendable, CustomStringConvertible {
        /// This value, read and checked as if it had been given; `note`
        /// says when it applies, where not always.
        case value(String, note: String? = nil)
        /// The number of CPUs the process may use.
        case processorCount
        /// Nothing: the text says what that means (`unset: serve the
        /// embedded catalog`).
        case unset(String)

        /// The text read in place of a value not given; nil when there is
        /// none to read.
        public var text: String? {
            guard case .value(let text, _) = self else { return nil }
            return text
        }

        /// As `--help` words it.
        public var description: String {
            switch self {
            case .value(let text, let note): note.map { "\(text) \($0)" } ?? text
            case .processorCount: "number of CPUs"
            case .unset(let meaning): meaning
            }
        }
    }

    /// The values a setting takes.
    public enum Form: Sendable, CustomStringConvertible {
        /// A decimal integer in this range.
        case integer(ClosedRange<Int>)
        /// One of these words, in any case.
        case oneOf([String])
        /// `host:port` or `[ipv6]:port`.
        case address
        /// Visible ASCII characters (no space), as many as this range allows.
        case visibleASCII(ClosedRange<Int>)
        /// An assigned ISO 3166-1 alpha-2 code, in any case.
        case countryCode
        /// The path of a readable file; the text says what it holds.
        case file(String)
        /// Anything else, as the text words it.
        case text(String)

        /// As `--help` words it.
        public var description: String {
            switch self {
            case .integer(let range): "\(range.lowerBound) to \(range.upperBound)"
            case .oneOf(let words): "\(words.dropLast().joined(separator: ", ")) or \(words.last ?? "") (any case)"
            case .address: "host:port or [ipv6]:port, port 0 to 65535"
            case .visibleASCII(let lengths): "\(lengths.lowerBound) to \(lengths.upperBound) visible ASCII characters"
            case .countryCode: "an assigned ISO 3166-1 alpha-2 code (any case)"
            case .file(let text), .text(let text): text
            }
        }
    }

    /// How the start-up summary shows a setting. The secret cases never
    /// hand the value to the summary: only whether it is set.
    public enum Shown: Sendable {
        /// The effective value, with anything that reads as a URL's
        /// userinfo redacted (a path or an app id holding `user:pw@`).
        case value(@Sendable (GatewayConfiguration) -> String)
        /// A secret: `<redacted>` when set, else `<unset>`.
        case secret(isSet: @Sendable (GatewayConfiguration) -> Bool)
        /// A list of secrets: how many (`<2 redacted>`), or `<unset>`.
        case secrets(count: @Sendable (GatewayConfiguration) -> Int)
        /// A value that may hold a secret (the password in a URL): shown
        /// with that part replaced by `<redacted>`.
        case redacted(@Sendable (GatewayConfiguration) -> String)
        /// No line of its own: a file form, whose content the named
        /// setting's line shows.
        case inLineOf(ConfigurationVariable)

        var isSecret: Bool {
            switch self {
            case .secret, .secrets, .redacted: true
            case .value, .inLineOf: false
            }
        }

        /// What `--help` says of a secret's logging; nil for the rest.
        var secrecyNote: String? {
            switch self {
            case .secret, .secrets: "Never logged."
            case .redacted: "Logged with its password redacted."
            case .value, .inLineOf: nil
            }
        }

        /// The summary's text for `configuration`; nil for no line.
        func text(for configuration: GatewayConfiguration) -> String? {
            switch self {
            case .value(let text):
                return URLRedaction.redactingUserinfo(text(configuration))
            case .redacted(let text):
                return text(configuration)
            case .secret(let isSet):
                return isSet(configuration) ? "<redacted>" : "<unset>"
            case .secrets(let count):
                let count = count(configuration)
                return count == 0 ? "<unset>" : "<\(count) redacted>"
            case .inLineOf:
                return nil
            }
        }
    }
}
