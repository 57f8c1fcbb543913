/// A configuration value that stops start-up. The message names the
/// variable (and its flag), so an operator knows what to fix.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The environment variable at fault, e.g. `GATEWAY_MAX_IDS`.
    public let variable: String
    /// What is wrong and what is expected.
    public let message: String

    public init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }

    public var description: String {
        let flag = ConfigurationVariable(rawValue: variable).map { " (--\($0.flag))" } ?? ""
        return "invalid \(variable)\(flag): \(message)"
    }
}
