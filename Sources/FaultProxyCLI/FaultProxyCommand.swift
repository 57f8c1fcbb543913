import ArgumentParser
import FaultProxy
import Glibc

/// `fault-proxy`: one ``FaultProxy`` as a program, so that a benchmark can
/// put latency and partitions between processes (bench/hosts puts Redis and
/// the TLS upstream behind it, as if they were on other hosts).
///
/// It prints `listening on PORT` on stdout once it accepts connections, then
/// takes its commands as signals: SIGUSR1 partitions, SIGUSR2 heals (each
/// acknowledged by a line on stderr once in effect), SIGTERM or SIGINT
/// closes every connection and exits 0.
@main
struct FaultProxyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fault-proxy",
        abstract: "A TCP proxy on 127.0.0.1 adding latency per direction; SIGUSR1 partitions, SIGUSR2 heals (testing only)."
    )

    @Option(help: "Port to listen on, on 127.0.0.1 (0: a free port; printed as `listening on PORT`).")
    var listenPort = 0

    @Option(help: "Port of the peer on 127.0.0.1 that every accepted connection is forwarded to.")
    var targetPort: Int

    @Option(help: "Microseconds added to bytes going to the target.")
    var toServerUs = 0

    @Option(help: "Microseconds added to bytes coming back from the target.")
    var toClientUs = 0

    func validate() throws {
        guard (0...65535).contains(listenPort) else { throw ValidationError("--listen-port must be from 0 to 65535") }
        guard (1...65535).contains(targetPort) else { throw ValidationError("--target-port must be from 1 to 65535") }
        guard (0...60_000_000).contains(toServerUs), (0...60_000_000).contains(toClientUs) else {
            throw ValidationError("--to-server-us and --to-client-us must be from 0 to 60000000")
        }
    }

    func run() throws {
        // The commands come as signals, taken by sigwait() on this thread:
        // blocked here, before the proxy's thread exists (it inherits the
        // mask), so no thread ever runs a handler for them and the commands,
        // which take the proxy's lock, run on an ordinary thread. (A
        // DispatchSourceSignal under dispatchMain() caught the signals but
        // never ran its handler in the static release build.)
        let numbers: [Int32] = [Int32(SIGUSR1), Int32(SIGUSR2), Int32(SIGTERM), Int32(SIGINT)]
        var commands = sigset_t()
        sigemptyset(&commands)
        for number in numbers { sigaddset(&commands, number) }
        guard pthread_sigmask(SIG_BLOCK, &commands, nil) == 0 else {
            throw ValidationError("pthread_sigmask failed: the signals cannot be taken")
        }

        let proxy = try FaultProxy(targetPort: targetPort, listenPort: listenPort)
        proxy.setLatency(toServer: .microseconds(toServerUs), toClient: .microseconds(toClientUs))
        Self.say("listening on \(proxy.port)", to: STDOUT_FILENO)
        while true {
            var number: Int32 = 0
            guard sigwait(&commands, &number) == 0 else { continue }
            switch number {
            case Int32(SIGUSR1):
                proxy.partition()
                Self.say("fault-proxy: partitioned", to: STDERR_FILENO)
            case Int32(SIGUSR2):
                proxy.heal()
                Self.say("fault-proxy: healed", to: STDERR_FILENO)
            default:
                let accepted = proxy.acceptedCount
                proxy.close()
                Self.say("fault-proxy: closed after \(accepted) connections", to: STDERR_FILENO)
                return
            }
        }
    }

    /// One line, written at once (no stdio buffer between it and a reader
    /// waiting for it).
    private static func say(_ line: String, to fd: Int32) {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written > 0 { offset += written } else if written < 0 && errno == EINTR { continue } else { return }
        }
    }
}
