import ArgumentParser
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

    func run() async throws {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]) else {
            throw ValidationError("--listen must be host:port")
        }
        let tls = try TLSServerContext(certificateChainFile: certFile, privateKeyFile: keyFile)
        let upstream = try MockUpstream(host: String(listen[..<colon]), port: port, tls: tls)
        upstream.setCacheControl(cacheControl)
        let bound = try upstream.start()
        FileHandle.standardError.write(Data("mock-upstream listening on \(listen[..<colon]):\(bound)\n".utf8))
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}
