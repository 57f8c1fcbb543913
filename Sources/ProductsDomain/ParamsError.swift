public import JSONRPC

/// Why the params of a call were refused; always answered as `-32602`.
public struct ParamsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The param at fault, when one is (sent as `data.param`).
    public let param: String?
    /// A machine-readable reason for callers to branch on (sent as `data.reason`);
    /// only set where the contract names one, such as `regionUnresolved`.
    public let reason: String?
    /// A sentence for a person; it names the param.
    public let message: String

    /// - Parameters:
    ///   - param: The param at fault, if any.
    ///   - reason: The contract's `data.reason`, if it defines one for this case.
    ///   - message: Text for a person, without the `Invalid params: ` prefix.
    public init(param: String?, reason: String? = nil, message: String) {
        self.param = param
        self.reason = reason
        self.message = message
    }

    /// The reason given when no step of region resolution yields a country.
    public static let regionUnresolvedReason = "regionUnresolved"

    /// The JSON-RPC error: `-32602`, message `Invalid params: <message>`, and
    /// `data` holding `param` and `reason` when they are known (no `data` otherwise).
    public var jsonRPCError: JSONRPCError {
        var data = JSONObject()
        if let param { data["param"] = .string(param) }
        if let reason { data["reason"] = .string(reason) }
        var error = JSONRPCError.invalidParams(message, data: data.count == 0 ? nil : .object(data))
        error.cause = self
        return error
    }

    public var description: String { message }
}
