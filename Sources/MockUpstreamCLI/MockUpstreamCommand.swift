import ArgumentParser
import Dispatch
import EventTransport
import Foundation
import MockUpstream

/// `mock-upstream`: the TLS test upstream, for the compose demo and manual runs.
@main
struct MockUpstreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-upstream",
        abstract: "Serves the Onside upstream products API over HTTPS from the embedded sample catalog (testing only)."
    )

    @Option(help: "host:port to listen on.")
    var listen = "127.0.0.1:8443"

    @Option(help: "PEM certificate chain file.")
    var certFile: String

    @Option(help: "PEM private key file.")
    var keyFile: String

    @Option(help: "Cache-Control sent with each 200 (e.g. max-age=30).")
    var cacheControl: String?

    @Option(help: "Answer every request this many milliseconds late (0: at once).")
    var delayMs = 0

    @Option(help: "An app id that exists (repeatable); other apps get 404.")
    var knownApp: [String] = ["demo"]

    func validate() throws {
        guard (0...600_000).contains(delayMs) else { throw ValidationError("--delay-ms must be from 0 to 600000") }
    }

    func run() async throws {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]) else {
            throw ValidationError("--listen must be host:port")
        }
        let tls = try TLSServerContext(certificateChainFile: certFile, privateKeyFile: keyFile)
        let upstream = try MockUpstream(host: String(listen[..<colon]), port: port, tls: tls, knownApps: Set(knownApp))
        upstream.setCacheControl(cacheControl)
        if delayMs > 0 { upstream.setStandingFault(.delay(milliseconds: delayMs)) }
        let bound = try upstream.start()
        FileHandle.standardError.write(Data("mock-upstream listening on \(listen[..<colon]):\(bound)\n".utf8))
        let signals = Self.reportRequestsOnExit(upstream)
        defer { withExtendedLifetime(signals) {} }
        while true { try await Task.sleep(for: .seconds(3600)) }
    }

    /// On SIGTERM or SIGINT, tells how many requests were served (a benchmark
    /// counts upstream calls this way), then exits 0.
    private static func reportRequestsOnExit(_ upstream: MockUpstream) -> [any DispatchSourceSignal] {
        let queue = DispatchQueue(label: "mock-upstream-signals")
        return [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                FileHandle.standardError.write(Data("mock-upstream served \(upstream.requests.count) requests\n".utf8))
                Foundation.exit(0)
            }
            source.resume()
            return source
        }
    }
}
