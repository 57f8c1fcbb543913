import MockUpstream
import Testing

/// `UPSTREAM_RETRIES`: extra attempts after a connection error, 502, 503 or
/// 504 only, honouring `Retry-After` when it fits, never past the call's
/// deadline. Counts are exact: the mock sees every attempt.
@Suite("Upstream retries", .serialized)
struct RetryTests {
    @Test(arguments: [0, 1, 2, 3])
    func aStanding503IsTriedOncePlusTheRetries(retries: Int) async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "\(retries)"]) { upstream, gateway in
            upstream.upstream.setStandingFault(.status(503))
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.code == -32002)
            #expect(answer.reason == "serviceUnavailable")
            #expect(answer.data?["upstreamStatus"] == 503)
            #expect(upstream.upstream.requests.count == 1 + retries)
            #expect(upstream.upstream.requestCount(for: "premium_monthly") == 1 + retries)
            #expect(try await gateway.metricValue(#"gateway_upstream_requests_total{status="503"}"#) == Double(1 + retries))
        }
    }

    @Test(arguments: [502, 503, 504])
    func aGatewayErrorFollowedByAnAnswerSucceeds(status: Int) async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "2"]) { upstream, gateway in
            upstream.upstream.enqueue(.status(status))
            let answer = try await gateway.fetchProducts(["premium_monthly", "nope"])
            #expect(answer.error == nil)
            #expect(answer.productIDs == ["premium_monthly"])
            #expect(answer.invalidIDs == ["nope"])
            #expect(upstream.upstream.requests.count == 2)
        }
    }

    @Test func everyRetryableFailureCountsAgainstTheSameBudget() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "3"]) { upstream, gateway in
            upstream.upstream.enqueue(.status(502), .reset, .status(504))
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.productIDs == ["premium_monthly"])
            #expect(upstream.upstream.requests.count == 4)
        }
    }

    @Test(arguments: [
        MockUpstreamFault.status(500), .status(501), .status(429, retryAfterSeconds: 1), .status(404), .status(422),
        .status(401), .invalidJSON, .missingField,
    ])
    func otherFailuresAreNotRetried(fault: MockUpstreamFault) async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "2"]) { upstream, gateway in
            upstream.upstream.setStandingFault(fault)
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.error != nil)
            #expect(upstream.upstream.requests.count == 1)
        }
    }

    @Test func a500IsNotRetried() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "2"]) { upstream, gateway in
            upstream.upstream.enqueue(.status(500))
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.code == -32002)
            #expect(answer.data?["upstreamStatus"] == 500)
            #expect(answer.data?["retryable"] == true)
            #expect(upstream.upstream.requests.count == 1)
        }
    }

    @Test func aResetConnectionIsRetried() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "2"]) { upstream, gateway in
            upstream.upstream.enqueue(.reset)
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.productIDs == ["premium_monthly"])
            #expect(upstream.upstream.requests.count == 2)
        }
    }

    @Test func resetsUntilTheRetriesRunOutAreAConnectionError() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "2"]) { upstream, gateway in
            upstream.upstream.setStandingFault(.reset)
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.code == -32001)
            #expect(answer.reason == "connectionError")
            #expect(answer.data?["upstreamStatus"] == nil)
            #expect(upstream.upstream.requests.count == 3)
        }
    }

    @Test func aHangIsRetriedAfterTheAttemptTimesOut() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "1", "UPSTREAM_TIMEOUT_MS": "300"]) { upstream, gateway in
            upstream.upstream.enqueue(.hang)
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.productIDs == ["premium_monthly"])
            #expect(upstream.upstream.requests.count == 2)
        }
    }

    @Test func aRetryAfterThatFitsIsWaitedFor() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "1"]) { upstream, gateway in
            upstream.upstream.enqueue(.status(503, retryAfterSeconds: 1))
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.productIDs == ["premium_monthly"])
            #expect(upstream.upstream.requests.count == 2)
        }
    }

    @Test func aRetryAfterBeyondTheDeadlineIsNotWaitedFor() async throws {
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "2", "GATEWAY_REQUEST_TIMEOUT_MS": "2000"]) { upstream, gateway in
            upstream.upstream.enqueue(.status(503, retryAfterSeconds: 30))
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            // The real failure, with the upstream's advice, rather than `cancelled`.
            #expect(answer.code == -32002)
            #expect(answer.data?["upstreamStatus"] == 503)
            #expect(answer.data?["retryAfterSeconds"] == 30)
            #expect(upstream.upstream.requests.count == 1)
        }
    }

    @Test func retriesStopAtTheCallsDeadline() async throws {
        // Each attempt answers 503 with Retry-After: 1; ten retries would
        // take ten seconds, the deadline allows two or three attempts.
        try await UpstreamScenario.run(environment: ["UPSTREAM_RETRIES": "10", "GATEWAY_REQUEST_TIMEOUT_MS": "2500"]) { upstream, gateway in
            upstream.upstream.setStandingFault(.status(503, retryAfterSeconds: 1))
            let answer = try await gateway.fetchProducts(["premium_monthly"])
            #expect(answer.code == -32002)
            #expect(answer.data?["retryAfterSeconds"] == 1)
            #expect((1...3).contains(upstream.upstream.requests.count))
        }
    }
}
