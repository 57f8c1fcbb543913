import Testing

/// Requests that never reach `products.fetch` are still counted, and every
/// `products.fetch` error carries the request id.
@Suite struct RPCObservabilityTests {
    @Test func refusedRequestsAreCountedUnderOther() async throws {
        let gateway = try RunningGateway.start()
        _ = try await gateway.rpc("{not json")
        _ = try await gateway.rpc(#"{"jsonrpc":"2.0","id":1,"method":"products.list"}"#)
        _ = try await gateway.rpc(#"{"jsonrpc":"1.0","id":2,"method":"products.fetch"}"#)
        _ = try await gateway.rpc(#"{"jsonrpc":"2.0","id":3,"method":"products.fetch","params":{"productIdentifiers":["coins_100"],"countryCode":"DE"}}"#)
        let text = try await gateway.metricsText()
        let logs = gateway.logs.all
        await gateway.stop()
        let lines = Set(text.split(separator: "\n").map(String.init))
        #expect(lines.contains(#"gateway_rpc_requests_total{method="other",outcome="parseError"} 1"#))
        #expect(lines.contains(#"gateway_rpc_requests_total{method="other",outcome="methodNotFound"} 1"#))
        #expect(lines.contains(#"gateway_rpc_requests_total{method="other",outcome="invalidRequest"} 1"#))
        #expect(lines.contains(#"gateway_rpc_requests_total{method="products.fetch",outcome="ok"} 1"#))
        #expect(lines.contains(where: { $0.hasPrefix("process_resident_memory_bytes ") }))
        #expect(lines.contains(where: { $0.hasPrefix("process_open_fds ") }))
        #expect(logs.filter { $0.contains(#""msg":"rpc call""#) }.count == 4)
        #expect(logs.contains { $0.contains(#""method":"products.list""#) && $0.contains(#""outcome":"methodNotFound""#) })
    }

    @Test func invalidParamsCarryTheRequestId() async throws {
        let gateway = try RunningGateway.start()
        let response = try await gateway.rpc(
            #"{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":["coins_100"]}}"#,
            headers: [("X-Request-Id", "params-id-1")]
        )
        await gateway.stop()
        let data = try #require(try parseJSON(response.body)["error"]?["data"])
        #expect(data == ["param": "countryCode", "reason": "regionUnresolved", "requestId": "params-id-1"])
    }
}
