/// Why an upstream `200` body could not be used; the gateway answers it as `internalError`.
public struct UpstreamBodyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, starting with the path of the offending value
    /// (`items[2].price.amount: expected a decimal string, got a number`).
    public let message: String

    /// - Parameter message: What is wrong, starting with the path.
    public init(message: String) {
        self.message = message
    }

    public var description: String { message }
}
