import Testing

@Suite struct UpstreamSmokeTests {
    @Test func fetchesThroughVerifiedTLS() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let gateway = try RunningGateway.start(upstream.gatewayEnvironment())
        let response = try await gateway.rpc(#"{"jsonrpc":"2.0","id":7,"method":"products.fetch","params":{"productIdentifiers":["premium_monthly","nope"],"countryCode":"DE","language":"de"}}"#)
        await gateway.stop()
        #expect(response.status == 200)
        let body = try parseJSON(response.body)
        #expect(body["result"]?["products"]?[0]?["productIdentifier"] == "premium_monthly")
        #expect(body["result"]?["invalidProductIdentifiers"] == ["nope"])
        let seen = upstream.upstream.requests
        #expect(seen.count == 1)
        #expect(seen.first?.headers["Authorization"] == "Bearer test-upstream-token-0123456789")
        #expect(seen.first?.headers["Accept-Language"] == "de")
        #expect(seen.first?.country == "DE")
    }
}
