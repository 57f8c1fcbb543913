import Foundation
import MockUpstream
import Testing

/// No log line of the real process ever holds the upstream token or an API
/// key, after calls that succeed and calls that fail, at the most verbose
/// level and in both formats (contract section 4).
@Suite struct SecretsTests {
    /// Distinctive values, so a hit cannot be a coincidence.
    static let token = "upstream-SECRET-tok-7f3a9c1e5b2d4680"
    static let keys = ["apikey-ALPHA-5c8e1f0a9b7d3e21", "apikey-BRAVO-e2b4d6f8a0c1e3f5"]
    static let wrongKey = "apikey-WRONG-0d1e2f3a4b5c6d7e"

    enum TokenSource: String, CaseIterable { case variable, file }

    @Test(arguments: TokenSource.allCases, ["json", "text"])
    func noSecretInAnyLine(tokenSource: TokenSource, format: String) async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        var environment = upstream.gatewayEnvironment([
            "GATEWAY_API_KEYS": Self.keys.joined(separator: ","),
            "LOG_LEVEL": "trace",
            "LOG_FORMAT": format,
            "UPSTREAM_RETRIES": "1",
        ])
        var tokenFile: String?
        switch tokenSource {
        case .variable:
            environment["ONSIDE_API_TOKEN"] = Self.token
        case .file:
            let path = NSTemporaryDirectory() + "gateway-token-\(UUID().uuidString)"
            try Data((Self.token + "\n").utf8).write(to: URL(fileURLWithPath: path))
            tokenFile = path
            environment["ONSIDE_API_TOKEN"] = nil
            environment["ONSIDE_API_TOKEN_FILE"] = path
        }
        defer { if let tokenFile { try? FileManager.default.removeItem(atPath: tokenFile) } }

        let gateway = try await GatewayProcess.start(environment)
        var bodies: [String] = []
        func call(_ json: String, key: String?) async throws -> RawHTTPResponse {
            let headers = key.map { [("Authorization", "Bearer \($0)")] } ?? []
            let response = try await gateway.rpc(json, headers: headers)
            bodies.append(response.bodyText)
            return response
        }

        // Successes, with each key.
        for key in Self.keys {
            let response = try await call(MetricsTests.fetch(["premium_monthly"]), key: key)
            #expect(try parseJSON(response.body)["result"] != nil)
        }
        // The upstream refuses the token, fails, is retried, answers garbage.
        for fault: MockUpstreamFault in [.status(401), .status(403), .status(500), .invalidJSON] {
            upstream.upstream.enqueue(fault)
            let response = try await call(MetricsTests.fetch(["coins_100"]), key: Self.keys[0])
            #expect(try parseJSON(response.body)["error"] != nil, "\(fault)")
        }
        upstream.upstream.enqueue(.status(503), .status(503))
        _ = try await call(MetricsTests.fetch(["coins_100"]), key: Self.keys[1])
        // The caller's own mistakes: a wrong key, no key, a key in the wrong scheme, bad params.
        #expect(try await call(MetricsTests.fetch(["coins_100"]), key: Self.wrongKey).status == 401)
        #expect(try await call(MetricsTests.fetch(["coins_100"]), key: nil).status == 401)
        let basic = try await gateway.rpc(MetricsTests.fetch(["coins_100"]), headers: [("Authorization", "Basic \(Self.keys[0])")])
        #expect(basic.status == 401)
        let badParams = try await call(#"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":[""],"country":"DE"}}"#, key: Self.keys[1])
        #expect(try parseJSON(badParams.body)["error"]?["code"] == -32602)

        // Every call reached the upstream with the token; none echoed it back.
        #expect(upstream.upstream.requests.allSatisfy { $0.headers["Authorization"] == "Bearer \(Self.token)" })
        gateway.sendSignal(SIGTERM)
        #expect(await gateway.waitForExit() == 0)

        let lines = gateway.stderrLines
        #expect(lines.count > 5)
        let secrets = [Self.token] + Self.keys + [Self.wrongKey]
        for line in lines {
            for secret in secrets {
                #expect(!line.contains(secret), "a log line holds a secret: \(line)")
            }
        }
        for body in bodies {
            for secret in secrets {
                #expect(!body.contains(secret), "a response holds a secret: \(body)")
            }
        }

        // The start-up summary says the secrets are set, without them.
        let summary = try #require(lines.first { $0.contains("starting products-gateway") })
        if format == "json" {
            let object = try #require(GatewayProcess.jsonObject(summary))
            #expect(object["ONSIDE_API_TOKEN"] == "<redacted>")
            #expect(object["GATEWAY_API_KEYS"]?.stringValue?.contains("redacted") == true)
        } else {
            #expect(summary.contains("ONSIDE_API_TOKEN=<redacted>"))
            #expect(summary.contains(#"GATEWAY_API_KEYS="<2 redacted>""#))
        }
    }

    /// A bad secret setting names the variable, never the value.
    @Test func configurationErrorsDoNotEchoSecrets() async throws {
        let shortKey = "tooShort-Key1"
        let result = try await GatewayProcess.run(["GATEWAY_API_KEYS": "\(Self.keys[0]),\(shortKey)"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("GATEWAY_API_KEYS"))
        #expect(!result.stderr.contains(shortKey))
        #expect(!result.stderr.contains(Self.keys[0]))
    }

    /// A URL written without `//`, in the variable it belongs to or pasted
    /// into another: the real process stops with status 2, names the
    /// variable, and nothing it writes (the start-up summary included)
    /// holds the secret.
    @Test(arguments: [
        ("GATEWAY_REDIS_URL", "redis:PASSWORD-s3cr3t@cache:6379"),
        ("GATEWAY_REDIS_URL", "redis:user:pass-s3cr3t@cache"),
        ("ONSIDE_UPSTREAM_URL", "https:TOKEN-s3cr3t@products.example"),
        ("ONSIDE_UPSTREAM_URL", "tokens3cr3t:x@products.example"),
        ("GATEWAY_LISTEN", "redis:PASSWORD-s3cr3t@127.0.0.1:6379"),
        ("GATEWAY_ADMIN_LISTEN", "https:TOKEN-s3cr3t@127.0.0.1"),
        ("GATEWAY_MAX_IDS", "redis:PASSWORD-s3cr3t@cache:6379"),
    ])
    func aURLWithoutSlashesStopsStartUpWithoutItsSecret(variable: String, url: String) async throws {
        var environment = [variable: url]
        if variable == "ONSIDE_UPSTREAM_URL" { environment["ONSIDE_APP_ID"] = "demo" }
        if variable != "GATEWAY_LISTEN" { environment["GATEWAY_LISTEN"] = "127.0.0.1:0" }
        let result = try await GatewayProcess.run(environment)
        #expect(result.status == 2)
        #expect(result.stderr.contains("invalid \(variable) "), "\(result.stderr)")
        #expect(!result.stderr.contains("s3cr3t"), "\(result.stderr)")
        #expect(!result.stdout.contains("s3cr3t"))
    }
}
