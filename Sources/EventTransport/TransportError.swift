/// A failure of a libevent or OpenSSL call, named after the call that failed.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function (or step) that failed.
    public let call: String
    /// What went wrong, for a person.
    public let message: String

    public init(call: String, message: String) {
        self.call = call
        self.message = message
    }

    public var description: String { "\(call): \(message)" }
}

/// Sends every libevent return code through one place: `-1` and `NULL` become
/// a `TransportError` naming the call, so none is silently ignored.
enum Libevent {
    @discardableResult
    static func check(_ result: Int32, _ call: String) throws(TransportError) -> Int32 {
        if result < 0 { throw TransportError(call: call, message: "returned \(result)") }
        return result
    }

    static func check<T>(_ pointer: T?, _ call: String) throws(TransportError) -> T {
        guard let pointer else { throw TransportError(call: call, message: "returned NULL") }
        return pointer
    }
}
