import CGatewayShims
import Glibc

/// One listening socket per loop, all on the same port with
/// `SO_REUSEPORT`, so the kernel spreads connections over the loops.
package enum ListeningSockets {
    /// Opens `count` listeners on `host:port`; returns the bound port (the
    /// real one when `port` is 0) and the descriptors, or closes them all
    /// and throws.
    package static func open(host: String, port: Int, count: Int) throws(TransportError) -> (port: Int, fds: [Int32]) {
        var port = port
        if port != 0 {
            // SO_REUSEPORT would also let the listeners join another
            // process already serving the port.
            try requireAvailable(host: host, port: port)
        }
        var fds: [Int32] = []
        do {
            for _ in 0..<count {
                let fd = try listen(host: host, port: port)
                fds.append(fd)
                if port == 0 { port = Int(gw_socket_local_port(fd)) }
            }
        } catch {
            fds.forEach { _ = Glibc.close($0) }
            throw error
        }
        return (port, fds)
    }

    private static func requireAvailable(host: String, port: Int) throws(TransportError) {
        var message = [CChar](repeating: 0, count: 256)
        guard gw_tcp_port_available(host, Int32(port), &message, message.count) == 0 else {
            throw TransportError(call: "listen", message: text(message))
        }
    }

    private static func listen(host: String, port: Int) throws(TransportError) -> Int32 {
        var message = [CChar](repeating: 0, count: 256)
        let fd = gw_listen_tcp(host, Int32(port), 1024, &message, message.count)
        guard fd >= 0 else { throw TransportError(call: "listen", message: text(message)) }
        return fd
    }

    private static func text(_ message: [CChar]) -> String {
        String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
