import EventTransport
import Foundation
import GatewayService
import Logging
import MockUpstream
import ServiceLifecycle
import Synchronization

/// Collects log lines in memory (in-process gateways).
final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    func append(_ line: String) { lines.withLock { $0.append(line) } }
}

/// A real gateway listening on an ephemeral port inside the test process,
/// run by a `ServiceGroup` as `main` runs it, without signals.
struct RunningGateway: Sendable {
    let application: GatewayApplication
    let port: Int
    let logs: LogCapture
    private let services: ServiceGroup
    private let running: Task<Void, any Error>

    /// Starts a gateway; `environment` holds configuration variables
    /// (`GATEWAY_LISTEN` defaults to `127.0.0.1:0`, workers to 2).
    static func start(_ environment: [String: String] = [:]) throws -> RunningGateway {
        var settings = ["GATEWAY_LISTEN": "127.0.0.1:0", "GATEWAY_WORKERS": "2", "LANG": "C.UTF-8", "LC_ALL": ""]
        settings.merge(environment) { _, new in new }
        let configuration = try GatewayConfiguration.load(environment: settings)
        let logs = LogCapture()
        let logger = Logger(label: "test-gateway") { _ in
            GatewayLogHandler(format: .json, level: .debug) { logs.append($0) }
        }
        let application = try GatewayApplication(configuration: configuration, logger: logger)
        let port = try application.start()
        var group = ServiceGroupConfiguration(services: [application], logger: logger)
        group.maximumGracefulShutdownDuration = .seconds(2)
        let services = ServiceGroup(configuration: group)
        let running = Task { try await services.run() }
        return RunningGateway(application: application, port: port, logs: logs, services: services, running: running)
    }

    /// Shuts down gracefully (2 s of grace) and waits until the loops have stopped.
    func stop() async {
        await services.triggerGracefulShutdown()
        try? await running.value
    }

    /// POSTs a JSON-RPC body and returns the response.
    func rpc(_ json: String, headers: [(String, String)] = []) async throws -> RawHTTPResponse {
        try await TestHTTP.post(port: port, json: json, headers: headers)
    }

    /// The `/metrics` text.
    func metricsText() async throws -> String {
        try await TestHTTP.get(port: port, path: "/metrics").bodyText
    }
}

/// The TLS test upstream, started on an ephemeral port with the shared
/// test certificates (by default the `localhost` one signed by the test CA).
struct RunningUpstream: Sendable {
    let upstream: MockUpstream
    let port: Int
    let certificates: TestCertificates

    static func start(certificate: String? = nil, key: String? = nil) throws -> RunningUpstream {
        let certificates = TestCertificates.shared
        let tls = try TLSServerContext(
            certificateChainFile: certificate ?? certificates.localhostCert,
            privateKeyFile: key ?? certificates.localhostKey
        )
        let upstream = try MockUpstream(tls: tls)
        let port = try upstream.start()
        return RunningUpstream(upstream: upstream, port: port, certificates: certificates)
    }

    /// Gateway settings pointing at this upstream through `localhost`.
    func gatewayEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
        var environment = [
            "ONSIDE_UPSTREAM_URL": "https://localhost:\(port)",
            "ONSIDE_APP_ID": "demo",
            "ONSIDE_API_TOKEN": "test-upstream-token-0123456789",
            "ONSIDE_CA_FILE": certificates.caFile,
        ]
        environment.merge(extra) { _, new in new }
        return environment
    }

    func stop() { upstream.stop() }
}
