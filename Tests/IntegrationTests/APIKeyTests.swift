import Foundation
import Testing

/// The API-key matrix against the real process (contract section 3,
/// `GATEWAY_API_KEYS` / `GATEWAY_API_KEYS_FILE`).
@Suite struct APIKeyTests {
    static let keys = ["key-one-0123456789abcdef", "key-two-fedcba9876543210"]
    static let call = MetricsTests.fetch(["premium_monthly"])

    static func expectUnauthorized(_ response: RawHTTPResponse, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(response.status == 401, sourceLocation: sourceLocation)
        let challenge = response.header("WWW-Authenticate") ?? ""
        #expect(challenge.hasPrefix("Bearer"), "WWW-Authenticate: \(challenge)", sourceLocation: sourceLocation)
        #expect(response.header("Content-Type")?.hasPrefix("application/json") == true, sourceLocation: sourceLocation)
        #expect(response.header("X-Request-Id")?.isEmpty == false, sourceLocation: sourceLocation)
        let body = try parseJSON(response.body)
        #expect(body["error"]?["status"] == 401, sourceLocation: sourceLocation)
        #expect(body["error"]?["message"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
    }

    static func expectServed(_ response: RawHTTPResponse, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(response.status == 200, sourceLocation: sourceLocation)
        #expect(try parseJSON(response.body)["result"]?["products"]?[0]?["productIdentifier"] == "premium_monthly", sourceLocation: sourceLocation)
    }

    /// Both keys work; anything else is refused; the open routes stay open.
    static func checkMatrix(_ gateway: GatewayProcess) async throws {
        try expectUnauthorized(try await gateway.rpc(call))
        try expectUnauthorized(try await gateway.rpc(call, headers: [("Authorization", "Bearer key-three-000000000000")]))
        try expectUnauthorized(try await gateway.rpc(call, headers: [("Authorization", "Bearer \(keys[0])x")]))
        try expectUnauthorized(try await gateway.rpc(call, headers: [("Authorization", "Bearer \(keys[0].dropLast())")]))
        try expectUnauthorized(try await gateway.rpc(call, headers: [("Authorization", "Basic \(keys[0])")]))
        try expectUnauthorized(try await gateway.rpc(call, headers: [("Authorization", keys[0])]))
        try expectUnauthorized(try await gateway.rpc(call, headers: [("Authorization", "Bearer ")]))

        for key in keys {
            try expectServed(try await gateway.rpc(call, headers: [("Authorization", "Bearer \(key)")]))
        }
        // The scheme is case-insensitive (RFC 9110); the key is not.
        try expectServed(try await gateway.rpc(call, headers: [("Authorization", "bearer \(keys[0])")]))
        try expectServed(try await gateway.rpc(call, headers: [("Authorization", "BEARER \(keys[1])")]))
        try expectUnauthorized(try await gateway.rpc(call, headers: [("Authorization", "Bearer \(keys[0].uppercased())")]))

        for path in ["/healthz", "/readyz", "/metrics", "/openapi.yaml"] {
            #expect(try await gateway.get(path).status == 200, "\(path) needs no key")
        }
    }

    @Test func keysFromTheVariable() async throws {
        let gateway = try await GatewayProcess.start(["GATEWAY_API_KEYS": Self.keys.joined(separator: ",")])
        try await Self.checkMatrix(gateway)
    }

    @Test func keysFromAFileOnePerLine() async throws {
        let path = NSTemporaryDirectory() + "gateway-keys-\(UUID().uuidString)"
        try Data((Self.keys.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let gateway = try await GatewayProcess.start(["GATEWAY_API_KEYS_FILE": path])
        try await Self.checkMatrix(gateway)
    }

    @Test func keysFromTheFlag() async throws {
        let gateway = try await GatewayProcess.start(arguments: ["--api-keys", Self.keys.joined(separator: ",")])
        try await Self.checkMatrix(gateway)
    }

    @Test func withoutKeysRPCIsOpen() async throws {
        let gateway = try await GatewayProcess.start()
        try Self.expectServed(try await gateway.rpc(Self.call))
        // A key sent anyway does no harm.
        try Self.expectServed(try await gateway.rpc(Self.call, headers: [("Authorization", "Bearer whatever-0123456789")]))
    }

    /// A refused call never reaches the JSON-RPC layer, so it is not counted.
    @Test func refusedCallsAreNotCounted() async throws {
        let gateway = try await GatewayProcess.start(["GATEWAY_API_KEYS": Self.keys[0]])
        try Self.expectUnauthorized(try await gateway.rpc(Self.call))
        let metrics = try await gateway.get("/metrics").bodyText
        #expect(metrics.contains(#"gateway_rpc_requests_total{method="products.fetch",outcome="ok"} 0"#))
    }
}
