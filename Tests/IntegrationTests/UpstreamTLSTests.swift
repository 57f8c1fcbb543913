import Foundation
import GatewayService
import Testing

/// The upstream is reached over verified TLS only: the chain against
/// `ONSIDE_CA_FILE` (or the system store), the host name, no switch to turn
/// it off, and no plain `http://`. A failed check is a `connectionError`
/// and no HTTP request ever reaches the upstream.
@Suite("Upstream TLS", .serialized)
struct UpstreamTLSTests {
    /// One call against an upstream presenting `certificate`; the upstream
    /// must see no request at all.
    static func expectRefused(
        certificate: String,
        key: String,
        environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> FetchAnswer {
        var result: FetchAnswer?
        try await UpstreamScenario.run(certificate: certificate, key: key, environment: environment) { upstream, gateway in
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.code == -32001, sourceLocation: sourceLocation)
            #expect(answer.reason == "connectionError", sourceLocation: sourceLocation)
            #expect(answer.data?["retryable"] == true, sourceLocation: sourceLocation)
            #expect(answer.data?["upstreamStatus"] == nil, sourceLocation: sourceLocation)
            #expect(answer.result == nil, sourceLocation: sourceLocation)
            #expect(upstream.upstream.requests.count == 0, "no HTTP request may reach an unverified upstream", sourceLocation: sourceLocation)
            #expect(try await gateway.metricValue(#"gateway_upstream_requests_total{status="connection_error"}"#) ?? 0 >= 1, sourceLocation: sourceLocation)
            result = answer
        }
        return try #require(result)
    }

    @Test func aCertificateFromAnotherCAIsRefused() async throws {
        let certificates = TestCertificates.shared
        let answer = try await Self.expectRefused(certificate: certificates.rogueLocalhostCert, key: certificates.rogueLocalhostKey)
        #expect(answer.message.contains("certificate verification"))
    }

    @Test func aCertificateForAnotherHostNameIsRefused() async throws {
        let certificates = TestCertificates.shared
        let answer = try await Self.expectRefused(certificate: certificates.otherHostCert, key: certificates.otherHostKey)
        #expect(answer.message.contains("certificate verification"))
        #expect(answer.message.contains("hostname mismatch"))
    }

    @Test func trustingOnlyAnotherCARefusesTheRealOne() async throws {
        let certificates = TestCertificates.shared
        let answer = try await Self.expectRefused(
            certificate: certificates.localhostCert, key: certificates.localhostKey,
            environment: ["ONSIDE_CA_FILE": certificates.rogueCAFile]
        )
        #expect(answer.message.contains("certificate verification"))
    }

    @Test func theSystemStoreDoesNotTrustTheTestCA() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        var environment = upstream.gatewayEnvironment(["UPSTREAM_RETRIES": "0"])
        environment["ONSIDE_CA_FILE"] = nil
        let gateway = try RunningGateway.start(environment)
        let answer = try await gateway.fetchProducts(["premium_monthly"])
        await gateway.stop()
        #expect(answer.reason == "connectionError")
        #expect(answer.message.contains("certificate verification"))
        #expect(upstream.upstream.requests.count == 0)
    }

    @Test func anIPAddressIsCheckedAgainstTheCertificatesAddresses() async throws {
        let certificates = TestCertificates.shared
        // The localhost certificate names 127.0.0.1 too.
        let good = try RunningUpstream.start()
        defer { good.stop() }
        let gateway = try RunningGateway.start(good.gatewayEnvironment(["ONSIDE_UPSTREAM_URL": "https://127.0.0.1:\(good.port)"]))
        let answer = try await gateway.fetchProducts(["premium_monthly"])
        await gateway.stop()
        #expect(answer.productIDs == ["premium_monthly"])
        #expect(good.upstream.requests.count == 1)

        // The other.example certificate does not.
        let other = try RunningUpstream.start(certificate: certificates.otherHostCert, key: certificates.otherHostKey)
        defer { other.stop() }
        let refused = try RunningGateway.start(other.gatewayEnvironment(["ONSIDE_UPSTREAM_URL": "https://127.0.0.1:\(other.port)", "UPSTREAM_RETRIES": "0"]))
        let refusedAnswer = try await refused.fetchProducts(["premium_monthly"])
        await refused.stop()
        #expect(refusedAnswer.reason == "connectionError")
        #expect(refusedAnswer.message.contains("certificate verification"))
        #expect(other.upstream.requests.count == 0)
    }

    @Test func plainHTTPIsRefusedAtStart() throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let environment = upstream.gatewayEnvironment(["ONSIDE_UPSTREAM_URL": "http://localhost:\(upstream.port)"])
        #expect {
            try RunningGateway.start(environment)
        } throws: { error in
            (error as? ConfigurationError)?.variable == "ONSIDE_UPSTREAM_URL"
        }
        #expect(upstream.upstream.requests.isEmpty)
    }

    @Test func aCAFileThatCannotBeReadOrUsedStopsStart() throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let missing = upstream.gatewayEnvironment(["ONSIDE_CA_FILE": NSTemporaryDirectory() + "no-such-ca-\(UUID().uuidString).pem"])
        #expect {
            try RunningGateway.start(missing)
        } throws: { error in
            (error as? ConfigurationError)?.variable == "ONSIDE_CA_FILE"
        }

        let notPEM = NSTemporaryDirectory() + "not-a-ca-\(UUID().uuidString).pem"
        try Data("this is not a certificate\n".utf8).write(to: URL(fileURLWithPath: notPEM))
        defer { try? FileManager.default.removeItem(atPath: notPEM) }
        #expect {
            try RunningGateway.start(upstream.gatewayEnvironment(["ONSIDE_CA_FILE": notPEM]))
        } throws: { error in
            (error as? ConfigurationError)?.variable == "ONSIDE_CA_FILE"
        }
    }

    @Test func keptAliveConnectionsServeCallAfterCall() async throws {
        try await UpstreamScenario.run(environment: ["GATEWAY_WORKERS": "1"]) { upstream, gateway in
            for id in ["premium_monthly", "coins_100", "remove_ads", "pro_lifetime", "coins_550"] {
                let answer = try await gateway.fetchProducts([id])
                #expect(answer.productIDs == [id])
            }
            #expect(upstream.upstream.requests.count == 5)
        }
    }
}
