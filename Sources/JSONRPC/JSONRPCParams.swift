/// The parameters of a request: by name or by position.
public enum JSONRPCParams: Sendable, Equatable {
    /// Named parameters.
    case object(JSONObject)
    /// Positional parameters.
    case array([JSONValue])

    /// The parameters as the JSON value they were read from.
    public var jsonValue: JSONValue {
        switch self {
        case .object(let object): .object(object)
        case .array(let elements): .array(elements)
        }
    }
}
