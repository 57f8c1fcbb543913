import Foundation
import JSONRPC
import ServiceDescription
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The Kubernetes manifests as a cluster would run them: the Redis
/// container's command line, rendered from `deploy/kubernetes/redis.yaml`
/// with the Secret's bytes, starts a real `redis-server`, and a real gateway
/// given the same Secret as a file (`GATEWAY_REDIS_PASSWORD_FILE`) must get
/// in; the ConfigMap's placeholders must stop start-up.
@Suite("Kubernetes manifests", .serialized)
struct KubernetesManifestTests {
    static let manifests = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy/kubernetes")

    /// A password as the README's recipe writes it without `\n` removed
    /// (`openssl rand -base64 32 | tr -d '/+='`: one trailing newline), as
    /// `echo` writes it, with CR LF, and with none.
    @Test(arguments: ["Zq8vK3mW1xYp7RtL2nB6cD4fH9jS0aE5uG\n", "plain-password-1234\r\n", "no-newline-password-5678"])
    func redisAndTheGatewayReadTheSamePasswordFromTheSecret(_ secret: String) async throws {
        let container = try Self.redisContainer()
        let port = try GatewayProcess.freePort()
        // The Secret's key `password`, as Kubernetes puts it in the
        // environment (bytes unchanged) and in the mounted file.
        var environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
        for name in container.secretVariables { environment[name] = secret }
        // Without a `command`, the redis image's entrypoint hands
        // arguments that start with `-` to redis-server.
        let command = container.command.isEmpty ? ["redis-server"] : container.command
        let argv = Self.expand(command + container.args, environment)
            + ["--port", "\(port)", "--bind", "127.0.0.1", "--dir", NSTemporaryDirectory()]
        let redis = try ManifestProcess(argv, environment: environment)
        defer { redis.stop() }
        try await redis.waitForPort(port)

        // Redis asks for a password: the one without its newline.
        let bare = secret.hasSuffix("\r\n") ? String(secret.dropLast(1)) : (secret.hasSuffix("\n") ? String(secret.dropLast()) : secret)
        #expect(try Self.redisCLI(port: port, password: nil, "PING").hasPrefix("NOAUTH"))
        #expect(try Self.redisCLI(port: port, password: bare, "PING") == "PONG")

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("k8s-redis-password-\(UUID().uuidString)")
        try secret.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        // The tier is used in front of an upstream only.
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try RunningGateway.start(upstream.gatewayEnvironment([
            "GATEWAY_REDIS_URL": "redis://127.0.0.1:\(port)/0",
            "GATEWAY_REDIS_PASSWORD_FILE": file.path,
        ]))
        try await gateway.waitForSharedTier(connections: 2)
        #expect(try await gateway.metricValue("gateway_shared_tier_password_refused") == 0)
        #expect(!gateway.logs.all.contains { $0.contains(bare) })
        await gateway.stop()
    }

    /// What the old manifest did (`--requirepass $(REDIS_PASSWORD)`, the
    /// newline kept) is what this suite exists to catch: the gateway is
    /// refused, and says so in a gauge and a warning.
    @Test func aPasswordRedisDoesNotShareIsShownByAGaugeAndAWarning() async throws {
        let redis = try await RedisServer.start(password: "with-newline\n")
        defer { redis.stop() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("k8s-redis-password-\(UUID().uuidString)")
        try "with-newline\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try RunningGateway.start(upstream.gatewayEnvironment([
            "GATEWAY_REDIS_URL": redis.url(withPassword: false),
            "GATEWAY_REDIS_PASSWORD_FILE": file.path,
        ]))
        try await UpstreamScenario.waitFor("the refused password to show") {
            (try? await gateway.metricValue("gateway_shared_tier_password_refused")) == 1
        }
        #expect(try await gateway.metricValue("gateway_shared_tier_connections") == 0)
        #expect(gateway.logs.all.contains { $0.contains("\"level\":\"warning\"") && $0.contains("Redis refused the password (AUTH WRONGPASS)") })
        // Still ready: Redis is never a single point of failure.
        #expect(try await TestHTTP.get(port: gateway.port, path: "/readyz").status == 200)
        await gateway.stop()
    }

    /// `configmap.yaml` applied as shipped: start-up stops, naming each
    /// placeholder's variable, until it is replaced.
    @Test func theConfigMapsPlaceholdersStopStartUp() async throws {
        let data = try Self.documents("configmap.yaml").first { $0["kind"]?.stringValue == "ConfigMap" }?["data"]?.objectValue
        let settings = try #require(data)
        var environment: [String: String] = [:]
        for key in settings.keys { environment[key] = settings[key]?.stringValue }
        #expect(environment["ONSIDE_APP_ID"] == "<your-onside-app-id>")
        #expect(environment["ONSIDE_UPSTREAM_URL"] == "<https://your-onside-upstream>")
        environment["GATEWAY_LISTEN"] = "127.0.0.1:0"
        environment["GATEWAY_REDIS_URL"] = nil

        let shipped = try await GatewayProcess.run(environment)
        #expect(shipped.status == 2)
        #expect(shipped.stderr.contains("invalid ONSIDE_UPSTREAM_URL (--upstream-url): still holds the placeholder '<https://your-onside-upstream>' of the example configuration; set your own value"))

        environment["ONSIDE_UPSTREAM_URL"] = "https://products.onside.example"
        let appPlaceholder = try await GatewayProcess.run(environment)
        #expect(appPlaceholder.status == 2)
        #expect(appPlaceholder.stderr.contains("invalid ONSIDE_APP_ID (--app-id): still holds the placeholder '<your-onside-app-id>'"))
    }

    /// The probes and the Prometheus scrape use the admin port, which is
    /// the ConfigMap's `GATEWAY_ADMIN_LISTEN`; the callers' Service does not
    /// expose it; a gateway run with the ConfigMap's settings answers the
    /// probes' paths there.
    @Test func probesAndTheScrapeUseTheAdminListener() async throws {
        let settings = try #require(try Self.documents("configmap.yaml").first { $0["kind"]?.stringValue == "ConfigMap" }?["data"]?.objectValue)
        let adminListen = try #require(settings["GATEWAY_ADMIN_LISTEN"]?.stringValue)
        #expect(adminListen == "0.0.0.0:9464")

        // `defaultMode: 0440` is an octal number, which has no JSON form.
        let deploymentText = try String(contentsOf: Self.manifests.appendingPathComponent("deployment.yaml"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.contains("defaultMode:") }.joined(separator: "\n")
        let deployment = try #require(try YAMLDocument.jsonValue(ofYAML: deploymentText).objectValue)
        #expect(deployment["kind"]?.stringValue == "Deployment")
        let template = try #require(deployment["spec"]?["template"]?.objectValue)
        let annotations = template["metadata"]?["annotations"]
        #expect(annotations?["prometheus.io/scrape"]?.stringValue == "true")
        #expect(annotations?["prometheus.io/port"]?.stringValue == "9464")
        #expect(annotations?["prometheus.io/path"]?.stringValue == "/metrics")
        let containers = template["spec"]?["containers"]?.arrayValue ?? []
        let gateway = try #require(containers.first { $0["name"]?.stringValue == "gateway" }?.objectValue)
        let ports = gateway["ports"]?.arrayValue ?? []
        let admin = try #require(ports.first { $0["name"]?.stringValue == "admin" })
        #expect(admin["containerPort"] == 9464)
        var probePaths: [String] = []
        for probe in ["livenessProbe", "readinessProbe"] {
            #expect(gateway[probe]?["httpGet"]?["port"]?.stringValue == "admin", "\(probe)")
            if let path = gateway[probe]?["httpGet"]?["path"]?.stringValue { probePaths.append(path) }
        }
        #expect(probePaths == ["/healthz", "/readyz"])

        let service = try #require(try Self.documents("service.yaml").first { $0["kind"]?.stringValue == "Service" })
        let servicePorts = service["spec"]?["ports"]?.arrayValue ?? []
        #expect(!servicePorts.contains { $0["targetPort"]?.stringValue == "admin" || $0["targetPort"] == 9464 })

        // The ConfigMap as shipped, its placeholders filled and the ports
        // made free ones.
        var environment: [String: String] = [:]
        for key in settings.keys { environment[key] = settings[key]?.stringValue }
        environment["ONSIDE_UPSTREAM_URL"] = "https://products.onside.example"
        environment["ONSIDE_APP_ID"] = "demo"
        environment["GATEWAY_REDIS_URL"] = nil
        environment["GATEWAY_REDIS_TIMEOUT_MS"] = nil
        environment["GATEWAY_REDIS_PREFIX"] = nil
        environment["GATEWAY_LISTEN"] = "127.0.0.1:0"
        environment["GATEWAY_ADMIN_LISTEN"] = "127.0.0.1:0"
        let running = try RunningGateway.start(environment)
        let adminPort = try #require(running.application.adminPort)
        var statuses: [Int] = []
        for path in probePaths + ["/metrics"] { statuses.append(try await TestHTTP.get(port: adminPort, path: path).status) }
        await running.stop()
        #expect(statuses == [200, 200, 200])
    }

    /// `networkpolicy.yaml`: it selects the gateway pods; callers reach the
    /// main port (`http`); the admin port (`admin`: probes and metrics)
    /// only from the namespace named `monitoring`; no rule admits every
    /// port or every source to it. Each rule's port is the Deployment's
    /// container port of that name, and kustomization.yaml applies it.
    @Test func theNetworkPolicyLetsOnlyMonitoringReachTheAdminPort() throws {
        let policy = try #require(try Self.documents("networkpolicy.yaml").first { $0["kind"]?.stringValue == "NetworkPolicy" })
        #expect(policy["apiVersion"]?.stringValue == "networking.k8s.io/v1")
        let spec = try #require(policy["spec"]?.objectValue)

        let deploymentText = try String(contentsOf: Self.manifests.appendingPathComponent("deployment.yaml"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.contains("defaultMode:") }.joined(separator: "\n")
        let deployment = try #require(try YAMLDocument.jsonValue(ofYAML: deploymentText).objectValue)
        let template = try #require(deployment["spec"]?["template"]?.objectValue)
        #expect(spec["podSelector"]?["matchLabels"] == template["metadata"]?["labels"])
        #expect(spec["policyTypes"] == ["Ingress"])
        let containers = template["spec"]?["containers"]?.arrayValue ?? []
        let ports = containers.first { $0["name"]?.stringValue == "gateway" }?["ports"]?.arrayValue ?? []
        let httpPort = try #require(ports.first { $0["name"]?.stringValue == "http" }?["containerPort"])
        let adminPort = try #require(ports.first { $0["name"]?.stringValue == "admin" }?["containerPort"])

        let rules = spec["ingress"]?.arrayValue ?? []
        #expect(rules.count == 2)
        for rule in rules {
            // A rule without ports admits every port; one without `from`
            // admits every source.
            #expect((rule["ports"]?.arrayValue?.count ?? 0) > 0)
            #expect((rule["from"]?.arrayValue?.count ?? 0) > 0)
        }
        func sources(to port: JSONValue) -> [JSONValue] {
            rules.filter { rule in (rule["ports"]?.arrayValue ?? []).contains { $0["port"] == port } }
                .flatMap { $0["from"]?.arrayValue ?? [] }
        }
        #expect(sources(to: httpPort) == [["podSelector": [:]]])
        #expect(sources(to: adminPort) == [["namespaceSelector": ["matchLabels": ["kubernetes.io/metadata.name": "monitoring"]]]])
        #expect(sources(to: "http").isEmpty && sources(to: "admin").isEmpty)

        let kustomization = try #require(try Self.documents("kustomization.yaml").first)
        #expect(kustomization["resources"]?.arrayValue?.contains("networkpolicy.yaml") == true)
    }

    // MARK: - Rendering

    struct Container {
        var command: [String]
        var args: [String]
        /// Variables set from a Secret's key (`valueFrom.secretKeyRef`).
        var secretVariables: [String]
    }

    static func documents(_ file: String) throws -> [JSONObject] {
        let text = try String(contentsOf: manifests.appendingPathComponent(file), encoding: .utf8)
        var documents: [JSONObject] = []
        for part in text.components(separatedBy: "\n---\n") {
            if let object = try? YAMLDocument.jsonValue(ofYAML: part).objectValue { documents.append(object) }
        }
        return documents
    }

    /// The `redis` container of redis.yaml's Deployment.
    static func redisContainer() throws -> Container {
        let deployment = try #require(try documents("redis.yaml").first { $0["kind"]?.stringValue == "Deployment" })
        let containers = deployment["spec"]?["template"]?["spec"]?["containers"]?.arrayValue ?? []
        let redis = try #require(containers.first { $0["name"]?.stringValue == "redis" }?.objectValue)
        let strings: (String) -> [String] = { key in redis[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        let secretVariables = (redis["env"]?.arrayValue ?? []).compactMap { variable -> String? in
            guard variable["valueFrom"]?["secretKeyRef"] != nil else { return nil }
            return variable["name"]?.stringValue
        }
        return Container(command: strings("command"), args: strings("args"), secretVariables: secretVariables)
    }

    /// Kubernetes' expansion of `$(NAME)` in a container's command and
    /// arguments (`$$` stands for `$`); an unknown name stays as written.
    static func expand(_ words: [String], _ environment: [String: String]) -> [String] {
        words.map { word in
            var result = ""
            var rest = Substring(word)
            while let dollar = rest.firstIndex(of: "$") {
                result += rest[..<dollar]
                let after = rest[rest.index(after: dollar)...]
                if after.hasPrefix("$") {
                    result += "$"
                    rest = after.dropFirst()
                } else if after.hasPrefix("("), let close = after.firstIndex(of: ")"),
                          let value = environment[String(after[after.index(after: after.startIndex)..<close])] {
                    result += value
                    rest = after[after.index(after: close)...]
                } else {
                    result += "$"
                    rest = after
                }
            }
            return result + rest
        }
    }

    static func redisCLI(port: Int, password: String?, _ arguments: String...) throws -> String {
        try RedisServer.cli(port: port, password: password, arguments)
    }
}

/// A process started from a manifest's argv (the first word looked up on
/// `PATH`), killed with SIGKILL when the test ends.
final class ManifestProcess: Sendable {
    private let child: ChildProcess

    init(_ argv: [String], environment: [String: String]) throws {
        child = try ChildProcess.spawn("/usr/bin/env", arguments: argv, environment: environment).0
    }

    func waitForPort(_ port: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while (try? KubernetesManifestTests.redisCLI(port: port, password: nil, "PING")).map({ $0.isEmpty }) ?? true {
            guard child.isRunning else { throw TestHTTPError("the manifest's redis-server exited at start") }
            guard ContinuousClock.now < deadline else { throw TestHTTPError("the manifest's redis-server did not start") }
            // Polls for the event (redis-server answering PING), the deadline at most: the sleep is only the poll's interval.
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func stop() {
        guard child.isRunning else { return }
        child.kill(SIGKILL)
        child.waitUntilExit()
    }
}
