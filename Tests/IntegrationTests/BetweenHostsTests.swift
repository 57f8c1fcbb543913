import FaultProxy
import Foundation
import Testing

/// The contract's "Between hosts" rules, with a fault-injecting TCP proxy
/// (`FaultProxy`) between the real `products-gateway` binary and a real
/// `redis-server`, or the TLS test upstream: latency, a partition (nothing
/// passes, nothing is closed), a reset of every connection, and a flow a
/// middlebox forgot.
@Suite("Between hosts: latency, partitions, dropped connections", .serialized)
struct BetweenHostsTests {
    /// The real binary against `upstream`, with Redis at `redisPort` (a
    /// proxy's, usually) and `extra` settings.
    static func gateway(_ upstream: RunningUpstream, redisPort: Int?, upstreamPort: Int? = nil, _ extra: [String: String] = [:]) async throws -> GatewayProcess {
        var environment = upstream.gatewayEnvironment(["GATEWAY_REDIS_PREFIX": "test-gw:"])
        if let redisPort { environment["GATEWAY_REDIS_URL"] = "redis://127.0.0.1:\(redisPort)" }
        // The upstream's certificate names localhost, whatever port it is
        // reached on (the proxy's).
        if let upstreamPort { environment["ONSIDE_UPSTREAM_URL"] = "https://localhost:\(upstreamPort)" }
        environment.merge(extra) { _, new in new }
        return try await GatewayProcess.start(environment)
    }

    /// Waits (bounded) until `gateway_shared_tier_up` is `value`.
    static func waitForTier(_ gateway: GatewayProcess, up value: Double) async throws {
        try await UpstreamScenario.waitFor("gateway_shared_tier_up \(value)") {
            (try? await gateway.metricValue("gateway_shared_tier_up")) == value
        }
    }

    /// A partition of Redis (every packet held, nothing closed) costs the
    /// replica one timeout, not one per call or per loop: after the first
    /// call that waits `GATEWAY_REDIS_TIMEOUT_MS`, calls go on without a
    /// Redis wait, the gauge says the tier is down, and the replica uses
    /// Redis again within 2 s of its answering (3 s allowed here, for a
    /// loaded test machine).
    @Test func aPartitionCostsOneTimeoutAndTheTierComesBackWhenItHeals() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let proxy = try FaultProxy(targetPort: redis.port)
        defer { proxy.close() }
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setCacheControl("max-age=30")
        let timeout = Duration.milliseconds(400)
        let gateway = try await Self.gateway(upstream, redisPort: proxy.port, ["GATEWAY_REDIS_TIMEOUT_MS": "\(timeout.milliseconds)", "GATEWAY_WORKERS": "2"])
        try await Self.waitForTier(gateway, up: 1)

        proxy.partition()
        // Calls one after the other (each a miss, on whichever loop takes
        // its connection) for 2.5 s of partition: without the circuit, each
        // loop paid a timeout, reconnected through the proxy at once, and
        // paid again (7 timeouts here). Counted by the gateway, not by the
        // calls' latency, which a loaded machine also stretches.
        var slow: [Duration] = []
        var calls = 0
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .milliseconds(2500) {
            let began = ContinuousClock.now
            let answer = try FetchAnswer(try await gateway.rpc(UpstreamScenario.request(["premium_monthly", "partition_\(calls)"])))
            let took = ContinuousClock.now - began
            #expect(answer.productIDs == ["premium_monthly"], "\(answer.message)")
            if took >= timeout { slow.append(took) }
            calls += 1
        }
        let timeouts = try await gateway.metricValue("gateway_shared_tier_timeouts_total")
        #expect(timeouts == 1, "\(timeouts ?? -1) timeouts in 2.5 s; \(slow.count) of \(calls) calls took over \(timeout): \(slow)")
        #expect(try await gateway.metricValue("gateway_shared_tier_up") == 0)
        // Tried again in the background at most once a second, each of
        // the replica's three connections (two loops, the subscriber).
        #expect(proxy.acceptedCount <= 3 + 3 * 3, "\(proxy.acceptedCount) connections through the proxy")

        proxy.heal()
        let healed = ContinuousClock.now
        try await Self.waitForTier(gateway, up: 1)
        let back = ContinuousClock.now - healed
        #expect(back < .seconds(3), "the tier came back \(back) after Redis answered")
        // And it is used: what a call fetches now is stored in Redis.
        _ = try await gateway.rpc(UpstreamScenario.request(["coins_100"]))
        try await UpstreamScenario.waitFor("the entry stored") { (try? redis.cli("EXISTS", "test-gw:v1:p:demo:DE:-:coins_100")) == "1" }
        await gateway.stop()
    }

    /// Latency does not break sharing: Redis 1 ms away from each replica and
    /// the upstream 40 ms away, a herd over two replicas costs one upstream
    /// call; a reset of every Redis connection mid-herd costs at most one
    /// more, and every call is answered.
    @Test(arguments: [false, true])
    func aHerdAcrossReplicasBetweenHostsCostsOneUpstreamCall(resetMidHerd: Bool) async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setCacheControl("max-age=30")
        upstream.upstream.setStandingFault(.delay(milliseconds: 300))
        let upstreamProxy = try FaultProxy(targetPort: upstream.port)
        defer { upstreamProxy.close() }
        upstreamProxy.setLatency(toServer: .milliseconds(40), toClient: .milliseconds(40))
        var redisProxies: [FaultProxy] = []
        var gateways: [GatewayProcess] = []
        for _ in 0..<2 {
            let proxy = try FaultProxy(targetPort: redis.port)
            proxy.setLatency(toServer: .milliseconds(1), toClient: .milliseconds(1))
            redisProxies.append(proxy)
            // Round trips and waits far above what the latency costs: what
            // is tested is sharing across latency, not a timeout, which a
            // replica slowed by a loaded machine (or a sanitizer) reached
            // with the default 50 ms and then rightly went on alone.
            gateways.append(try await Self.gateway(upstream, redisPort: proxy.port, upstreamPort: upstreamProxy.port, [
                "GATEWAY_REDIS_TIMEOUT_MS": "2000", "UPSTREAM_TIMEOUT_MS": "10000", "GATEWAY_REQUEST_TIMEOUT_MS": "30000",
            ]))
        }
        defer { for proxy in redisProxies { proxy.close() } }
        for gateway in gateways { try await Self.waitForTier(gateway, up: 1) }
        try await UpstreamScenario.waitFor("every replica subscribed") {
            let reply = (try? redis.cli("PUBSUB", "NUMSUB", "test-gw:v1:outcomes")) ?? ""
            return reply.split(whereSeparator: \.isNewline).last.map(String.init) == "2"
        }

        let ids = ["premium_monthly", "coins_100", "unknown_herd"]
        let replicas = gateways
        async let answers = withThrowingTaskGroup(of: FetchAnswer.self) { group in
            for index in 0..<20 {
                let gateway = replicas[index % 2]
                group.addTask { try FetchAnswer(try await gateway.rpc(UpstreamScenario.request(ids))) }
            }
            return try await group.reduce(into: [FetchAnswer]()) { $0.append($1) }
        }
        if resetMidHerd {
            try await UpstreamScenario.waitFor("the claimer's upstream call") { upstream.upstream.requests.count == 1 }
            for proxy in redisProxies { proxy.resetAll() }
        }
        let all = try await answers
        #expect(all.count == 20)
        #expect(all.allSatisfy { $0.productIDs == ["premium_monthly", "coins_100"] && $0.invalidIDs == ["unknown_herd"] })
        var timeouts: [Double] = []
        for gateway in gateways { timeouts.append(try await gateway.metricValue("gateway_shared_tier_timeouts_total") ?? -1) }
        #expect(upstream.upstream.requests.count <= (resetMidHerd ? 2 : 1), "\(upstream.upstream.requests.count) upstream calls; Redis timeouts per replica: \(timeouts)")
        for gateway in gateways { await gateway.stop() }
    }

    /// Round trips to Redis right at `GATEWAY_REDIS_TIMEOUT_MS`, on two
    /// replicas: replies that come after their round trip gave up are never
    /// read as a later command's. Every answer holds exactly what its call
    /// asked, and every entry in Redis holds its own identifier's product.
    @Test func lateRepliesAreNeverAnotherCommands() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        upstream.upstream.setCacheControl("max-age=30")
        var proxies: [FaultProxy] = []
        var gateways: [GatewayProcess] = []
        for _ in 0..<2 {
            let proxy = try FaultProxy(targetPort: redis.port)
            proxies.append(proxy)
            gateways.append(try await Self.gateway(upstream, redisPort: proxy.port, ["GATEWAY_REDIS_TIMEOUT_MS": "60"]))
        }
        defer { for proxy in proxies { proxy.close() } }
        for gateway in gateways { try await Self.waitForTier(gateway, up: 1) }
        // 30 ms each way: a round trip of about the timeout, some just
        // under (answered), some just over (given up, the reply late).
        for proxy in proxies { proxy.setLatency(toServer: .milliseconds(30), toClient: .milliseconds(30)) }
        let catalog = ["premium_monthly", "premium_yearly", "coins_100", "coins_1200", "remove_ads"]
        let answers = try await withThrowingTaskGroup(of: (asked: [String], answer: FetchAnswer).self) { group in
            for index in 0..<60 {
                let gateway = gateways[index % 2]
                // Each call asks two known products and an unknown one, in
                // an order of its own.
                let asked = [catalog[index % 5], catalog[(index + 2) % 5], "late_\(index % 7)"]
                group.addTask { (asked, try FetchAnswer(try await gateway.rpc(UpstreamScenario.request(asked)))) }
            }
            return try await group.reduce(into: [(asked: [String], answer: FetchAnswer)]()) { $0.append($1) }
        }
        for (asked, answer) in answers {
            #expect(answer.productIDs == Array(asked.prefix(2)), "asked \(asked), answered \(answer.productIDs) \(answer.message)")
            #expect(answer.invalidIDs == [asked[2]])
            // Every product carries the title the catalog gives its own identifier.
            for product in answer.result?["products"]?.arrayValue ?? [] {
                let id = product["productIdentifier"]?.stringValue ?? ""
                #expect(product["localizedTitle"]?.stringValue == Self.titles[id], "\(id)")
            }
        }
        for key in try redis.keys("test-gw:v1:p:*") {
            let value = try redis.cli("GET", key)
            guard value.hasPrefix("OGW1") else { continue }
            let id = String(key.split(separator: ":").last ?? "")
            if id.hasPrefix("late_") {
                #expect(!value.contains("productIdentifier"), "\(key) holds a product")
            } else {
                #expect(value.contains("\"productIdentifier\":\"\(id)\""), "\(key) holds another product")
                for other in catalog where other != id { #expect(!value.contains("\"\(other)\""), "\(key) holds \(other)") }
            }
        }
        for gateway in gateways { await gateway.stop() }
    }

    /// The catalog's English titles (the mock upstream serves the sample catalog).
    static let titles = [
        "premium_monthly": "Premium", "premium_yearly": "Premium Yearly", "coins_100": "100 Coins",
        "coins_1200": "1200 Coins", "remove_ads": "Remove Ads",
    ]

    /// A keep-alive connection to the upstream that a middlebox forgot (the
    /// server side gone, the gateway told nothing until it sends, then a
    /// reset): the request is sent once more on a new connection, even with
    /// `UPSTREAM_RETRIES=0`, and the call succeeds.
    @Test func aForgottenKeepAliveConnectionIsNotAFailedCall() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let proxy = try FaultProxy(targetPort: upstream.port)
        defer { proxy.close() }
        let gateway = try await Self.gateway(upstream, redisPort: nil, upstreamPort: proxy.port, ["UPSTREAM_RETRIES": "0", "GATEWAY_WORKERS": "1"])
        let first = try FetchAnswer(try await gateway.rpc(UpstreamScenario.request(["premium_monthly"])))
        #expect(first.productIDs == ["premium_monthly"])
        #expect(proxy.acceptedCount == 1)
        proxy.forgetAll()
        let second = try FetchAnswer(try await gateway.rpc(UpstreamScenario.request(["coins_100"])))
        #expect(second.productIDs == ["coins_100"], "\(second.message)")
        // The request reached the upstream on a second connection.
        #expect(proxy.acceptedCount == 2)
        #expect(upstream.upstream.requests.count == 2)
        await gateway.stop()
    }

    /// An upstream that accepts connections and never answers: each call
    /// ends after its attempt's `UPSTREAM_TIMEOUT_MS`, within its deadline;
    /// no more than `UPSTREAM_CONCURRENCY` connections are ever open to it;
    /// and once it answers again, the next call succeeds.
    @Test func anUpstreamThatNeverAnswersIsBounded() async throws {
        let upstream = try RunningUpstream.start()
        defer { upstream.stop() }
        let proxy = try FaultProxy(targetPort: upstream.port)
        defer { proxy.close() }
        let gateway = try await Self.gateway(upstream, redisPort: nil, upstreamPort: proxy.port, [
            "UPSTREAM_RETRIES": "0", "UPSTREAM_TIMEOUT_MS": "300", "UPSTREAM_CONCURRENCY": "3", "UPSTREAM_MAX_IDS": "1",
        ])
        upstream.upstream.setStandingFault(.hang)
        // 12 calls of 2 identifiers each: 24 upstream calls of one identifier
        // wanted at once, 3 allowed.
        let answers = try await withThrowingTaskGroup(of: (FetchAnswer, Duration).self) { group in
            for index in 0..<12 {
                group.addTask {
                    let began = ContinuousClock.now
                    let answer = try FetchAnswer(try await gateway.rpc(UpstreamScenario.request(["hang_a_\(index)", "hang_b_\(index)"])))
                    return (answer, ContinuousClock.now - began)
                }
            }
            return try await group.reduce(into: [(FetchAnswer, Duration)]()) { $0.append($1) }
        }
        for (answer, _) in answers {
            #expect(["connectionError", "cancelled"].contains(answer.reason ?? ""), "\(answer.reason ?? "answered") \(answer.message)")
        }
        #expect(proxy.peakOpenCount <= 3, "\(proxy.peakOpenCount) connections open at once")
        upstream.upstream.setStandingFault(nil)
        let next = try FetchAnswer(try await gateway.rpc(UpstreamScenario.request(["premium_monthly"])))
        #expect(next.productIDs == ["premium_monthly"], "\(next.message)")
        await gateway.stop()
    }
}

extension GatewayProcess {
    /// SIGTERM, and the exit (a gateway still running after 10 s is killed).
    func stop() async {
        sendSignal(SIGTERM)
        _ = await waitForExit(killingAfter: .seconds(10))
    }

    /// The value of one series in `/metrics`; nil when absent.
    func metricValue(_ series: String) async throws -> Double? {
        let text = try await get("/metrics").bodyText
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
