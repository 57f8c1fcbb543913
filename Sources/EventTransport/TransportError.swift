import Glibc

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

/// The one place C return codes are judged, for each convention the
/// transport meets, so none is silently ignored: a failure becomes a
/// `TransportError` naming the call (and, for OpenSSL, its error queue).
package enum CCheck {
    /// libevent: `0` (or more) is success, `-1` failure.
    @discardableResult
    package static func libevent(_ result: Int32, _ call: String) throws(TransportError) -> Int32 {
        if result < 0 { throw TransportError(call: call, message: "returned \(result)") }
        return result
    }

    /// A constructor: `NULL` is failure.
    package static func pointer<T>(_ pointer: T?, _ call: String) throws(TransportError) -> T {
        guard let pointer else { throw TransportError(call: call, message: "returned NULL") }
        return pointer
    }

    /// OpenSSL: `1` is success; anything else failure, explained by the
    /// thread's error queue (drained, so no stale error is blamed later).
    package static func openSSL(_ result: Int32, _ call: String) throws(TransportError) {
        guard result == 1 else { throw OpenSSLErrors.error(call) }
    }

    /// The shims' system calls: a result, or `-errno`.
    @discardableResult
    package static func posix(_ result: Int, _ call: String) throws(TransportError) -> Int {
        if result < 0 { throw TransportError(call: call, message: String(cString: strerror(Int32(-result)))) }
        return result
    }
}
