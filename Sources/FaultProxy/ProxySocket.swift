import Glibc

/// The few socket calls the proxy makes, on 127.0.0.1 only. Every socket is
/// non-blocking (the loop must never stall on one peer) and close-on-exec
/// (the tests launch the gateway and redis-server as child processes, which
/// must not inherit the proxy's sockets and keep them open).
enum ProxySocket {
    enum ConnectOutcome {
        case connected(Int32)
        case connecting(Int32)
        case failed
    }

    private static var streamType: Int32 {
        Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7f00_0001).bigEndian)
        return address
    }

    /// A listener on 127.0.0.1 on `port` (0: a port the kernel picks), and
    /// the port it got.
    static func listenOnLoopback(port: Int = 0) throws(FaultProxyError) -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, streamType, 0)
        guard fd >= 0 else { throw FaultProxyError(call: "socket", code: errno) }
        var address = loopback(port: port)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw failure("bind", closing: fd) }
        guard listen(fd, 128) == 0 else { throw failure("listen", closing: fd) }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw failure("getsockname", closing: fd) }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    private static func failure(_ call: String, closing fd: Int32) -> FaultProxyError {
        let error = FaultProxyError(call: call, code: errno)
        _ = Glibc.close(fd)
        return error
    }

    /// Starts a connection to 127.0.0.1:`port` without waiting for it.
    static func connectToLoopback(port: Int) -> ConnectOutcome {
        let fd = socket(AF_INET, streamType, 0)
        guard fd >= 0 else { return .failed }
        setNoDelay(fd)
        var address = loopback(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result == 0 { return .connected(fd) }
        if errno == EINPROGRESS || errno == EINTR { return .connecting(fd) }
        _ = Glibc.close(fd)
        return .failed
    }

    /// The outcome of a non-blocking connect (SO_ERROR): 0 when connected.
    static func pendingError(_ fd: Int32) -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return errno }
        return error
    }

    /// An accepted socket gets what `streamType` gives the others.
    static func prepareAccepted(_ fd: Int32) {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        setNoDelay(fd)
    }

    /// Small writes go out at once: Nagle's delay would add latency the
    /// test did not ask for.
    static func setNoDelay(_ fd: Int32) {
        var on: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Closes `fd` (if open) and marks it closed. With `reset`, SO_LINGER
    /// {1, 0} first, so the peer gets an RST rather than a FIN.
    static func close(_ fd: inout Int32, reset: Bool) {
        guard fd >= 0 else { return }
        if reset {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        _ = Glibc.close(fd)
        fd = -1
    }
}
