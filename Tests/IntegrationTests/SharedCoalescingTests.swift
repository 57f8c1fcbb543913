import Foundation
import Testing

/// Coalescing across replicas against a real `redis-server`: N replicas
/// under a herd of identical calls cost the upstream one round of calls;
/// the outcome, success or failure, cacheable or not, reaches every
/// replica; a dead replica's claim lapses and is taken over; a wait never
/// outlives the call's deadline.
@Suite("Coalescing across replicas", .serialized)
struct SharedCoalescingTests {
    static let ids = ["premium_monthly", "coins_100", "unknown_herd"]
    /// Waiters patient for 10 s (UPSTREAM_TIMEOUT_MS; patience is at most
    /// half the call's deadline, GATEWAY_REQUEST_TIMEOUT_MS): for tests of
    /// sharing, not of patience, which a replica under ThreadSanitizer
    /// beside the whole suite ran out of at the default 2 s.
    static let patient = ["UPSTREAM_TIMEOUT_MS": "10000", "GATEWAY_REQUEST_TIMEOUT_MS": "30000"]

    /// `calls` identical calls spread over the replicas, all at once.
    static func herd(_ gateways: [RunningGateway], calls: Int, ids: [String] = ids) async throws -> [FetchAnswer] {
        try await withThrowingTaskGroup(of: FetchAnswer.self) { group in
            for index in 0..<calls {
                let gateway = gateways[index % gateways.count]
                group.addTask { try await gateway.fetchProducts(ids) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test(arguments: [2, 3])
    func replicasUnderAHerdCostOneUpstreamCall(replicas: Int) async throws {
        try await SharedTierScenario.run(replicas: replicas, environment: Self.patient) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            upstream.upstream.setStandingFault(.delay(milliseconds: 300))
            let answers = try await Self.herd(gateways, calls: 10 * replicas)
            #expect(upstream.upstream.requests.count == 1)
            #expect(answers.allSatisfy { $0.productIDs == ["premium_monthly", "coins_100"] && $0.invalidIDs == ["unknown_herd"] })
            #expect(Set(answers.map { $0.result?.serialized() ?? [] }).count == 1)
            // The claims are gone; every key left expires.
            try await UpstreamScenario.waitFor("the stores") { (try? redis.keys("test-gw:*").count) == 3 }
            for key in try redis.keys("test-gw:*") {
                #expect(key.hasPrefix("test-gw:v1:p:"))
                #expect((Int(try redis.cli("PTTL", key)) ?? -1) > 0, "\(key) has no expiry")
            }
        }
    }

    /// Redis killed, or stalled, while replicas wait on a claim: the waits
    /// end (the subscriber drops; a probe times out) and every call is
    /// still answered, each replica fetching for itself.
    @Test(.timeLimit(.minutes(2)), arguments: ["kill", "stall"])
    func losingRedisMidHerdStillAnswersEveryCall(how: String) async throws {
        try await SharedTierScenario.run(replicas: 2, environment: ["GATEWAY_REDIS_TIMEOUT_MS": "50"]) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            // The claimer's fetch is held by the upstream until Redis is lost.
            upstream.upstream.enqueue(.held)
            try redis.cli("CONFIG", "RESETSTAT")
            async let answers = Self.herd(gateways, calls: 10)
            try await UpstreamScenario.waitFor("the claimer's upstream call") { upstream.upstream.heldCount == 1 }
            // Every call is in: each replica's first (the claimer's fetch,
            // the other's wait on its claim) and the 8 that joined them in
            // process, 3 identifiers each.
            try await UpstreamScenario.waitFor("every other call joined") {
                var joined = 0.0
                for gateway in gateways { joined += (try? await gateway.metricValue("gateway_coalesced_identifiers_total")) ?? 0 }
                return joined == 24
            }
            // Both replicas' lookups have run in Redis (the script's `SET
            // ... NX GET`, one per identifier): the other replica found the
            // claim. Nothing is stored while the fetch is held.
            try await UpstreamScenario.waitFor("both replicas' lookups") { ((try? Self.commandCounts(redis)["set"]) ?? 0) >= 6 }
            var sleeper: ChildProcess?
            if how == "kill" {
                redis.kill()
            } else {
                sleeper = try redis.cliInBackground("DEBUG", "SLEEP", "8")
                try await redis.waitUntilAsleep()
            }
            #expect(upstream.upstream.answerHeld() == 1)
            let all = try await answers
            // Every call answered (none `cancelled` at its 5 s deadline),
            // and a stall did not hold them: Redis still sleeps.
            #expect(all.allSatisfy { $0.productIDs == ["premium_monthly", "coins_100"] })
            if let sleeper { #expect(sleeper.isRunning) }
            // (Killed with the server when the scenario ends.)
            // Coalescing within each replica still holds: the claimer's
            // fetch, and each replica's own fetch once it notices the loss;
            // a call released in a later wave than its replica's first may
            // fetch once more (seen: 3 of 10). One upstream call per call
            // would be 10.
            #expect(upstream.upstream.requests.count <= 4)
        }
    }

    /// No `max-age`: nothing is stored, yet the waiting replicas get the
    /// products from the published outcome.
    @Test func anUncacheableSuccessIsSharedToo() async throws {
        try await SharedTierScenario.run(replicas: 3, environment: Self.patient) { upstream, gateways, redis in
            upstream.upstream.setCacheControl(nil)
            // Long enough that every replica finds the claim: nothing is
            // stored for a latecomer to find.
            upstream.upstream.setStandingFault(.delay(milliseconds: 800))
            let answers = try await Self.herd(gateways, calls: 12)
            #expect(upstream.upstream.requests.count == 1)
            #expect(answers.allSatisfy { $0.productIDs == ["premium_monthly", "coins_100"] })
            // Nothing stored; the lease, in the entry key, is released when
            // the fetch ends (held a moment more while the outcome is
            // published to the replicas that waited).
            try await UpstreamScenario.waitFor("the leases released") { (try? redis.keys("test-gw:v1:[pc]:*").isEmpty) == true }
        }
    }

    /// The claimer's failure (after its retries) is every replica's answer;
    /// only the claimer asked the upstream.
    @Test func aFailureIsSharedAcrossReplicas() async throws {
        try await SharedTierScenario.run(replicas: 2, environment: ["UPSTREAM_RETRIES": "1"]) { upstream, gateways, redis in
            // Slow enough that every call of the herd arrives while the
            // claimer's fetch runs (a call after a failure asks again).
            upstream.upstream.setStandingFault(.slowStatus(503, milliseconds: 300))
            let answers = try await Self.herd(gateways, calls: 10)
            #expect(answers.allSatisfy { $0.reason == "serviceUnavailable" })
            #expect(upstream.upstream.requests.count == 2, "\(upstream.upstream.requests.map { ($0.identifiers, $0.headers["X-Request-Id"] ?? "") })")
            try await UpstreamScenario.waitFor("every key gone") { (try? redis.keys("test-gw:*").isEmpty) == true }
            // Failures are not kept: the next call asks again.
            upstream.upstream.setStandingFault(nil)
            #expect(try await gateways[1].fetchProducts(Self.ids).productIDs == ["premium_monthly", "coins_100"])
            #expect(upstream.upstream.requests.count == 3)
        }
    }

    /// A lease whose replica died (written here by hand into the entry key,
    /// never released) lapses; the waiting replica then claims and fetches
    /// itself.
    @Test func aDeadReplicasClaimLapsesAndIsTakenOver() async throws {
        // UPSTREAM_TIMEOUT_MS (2 s) is longer than a lease: the lapse comes first.
        try await SharedTierScenario.run(replicas: 1, environment: ["UPSTREAM_TIMEOUT_MS": "2000", "UPSTREAM_RETRIES": "0"]) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            try redis.cli("SET", "test-gw:v1:p:demo:DE:-:premium_monthly", "OGC1dead-replica", "PX", "1000")
            let started = ContinuousClock.now
            let answer = try await gateways[0].fetchProducts(["premium_monthly"])
            let took = ContinuousClock.now - started
            #expect(answer.productIDs == ["premium_monthly"])
            #expect(upstream.upstream.requests.count == 1)
            #expect(took >= .milliseconds(700), "took \(took)")
            #expect(try await gateways[0].metricValue("gateway_shared_waits_total{ended=\"takeover\"}") == 1)
        }
    }

    /// No lease can make a call fail: one that a writer keeps alive (here a
    /// lease of 1 s, longer than the wait allowed) is waited on for
    /// `UPSTREAM_TIMEOUT_MS` at most, then this replica fetches on its own;
    /// and a call whose time left is under `UPSTREAM_TIMEOUT_MS` does not
    /// wait at all.
    @Test(arguments: [(timeout: "300", request: "5000"), (timeout: "2000", request: "600")])
    func noLeaseMakesACallFail(upstreamTimeout: String, requestTimeout: String) async throws {
        try await SharedTierScenario.run(replicas: 1, environment: [
            "UPSTREAM_TIMEOUT_MS": upstreamTimeout, "GATEWAY_REQUEST_TIMEOUT_MS": requestTimeout,
        ]) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            // A lease another "replica" holds, longer than the call may wait.
            try redis.cli("SET", "test-gw:v1:p:demo:DE:-:coins_100", "OGC1live-replica", "PX", "1000")
            let answer = try await gateways[0].fetchProducts(["coins_100"])
            #expect(answer.productIDs == ["coins_100"], "\(answer.message)")
            #expect(upstream.upstream.requests.count == 1)
            // It fetched on its own before the lease lapsed, not by taking
            // the lapsed lease over.
            #expect(try await gateways[0].metricValue("gateway_shared_waits_total{ended=\"timeout\"}") == 1)
            #expect(try await gateways[0].metricValue("gateway_shared_waits_total{ended=\"takeover\"}") == 0)
        }
    }

    /// A fetch slower than a lease keeps its claim (renewed every 300 ms
    /// while it runs): another replica waits for it instead of fetching.
    /// The fetch is held by the upstream until the test has seen all it
    /// needs, so no margin depends on the machine's speed.
    @Test(.timeLimit(.minutes(1))) func aFetchSlowerThanALeaseKeepsItsClaim() async throws {
        // Attempts and calls outlast whatever the test waits for.
        let patient = ["UPSTREAM_TIMEOUT_MS": "30000", "GATEWAY_REQUEST_TIMEOUT_MS": "40000"]
        try await SharedTierScenario.run(replicas: 2, environment: patient) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            upstream.upstream.setStandingFault(.held)
            let key = "test-gw:v1:p:demo:DE:-:coins_100"
            async let first = gateways[0].fetchProducts(["coins_100"])
            try await UpstreamScenario.waitFor("the first fetch") { upstream.upstream.heldCount == 1 }
            // Renewed: the lease's time left goes back up (it only falls
            // without renewal, and the key is gone within a second).
            func timeLeft() -> Int { Int((try? redis.cli("PTTL", key)) ?? "") ?? -2 }
            var lowest = timeLeft()
            var renewals = 0
            // Four renewals (every 300 ms): past the first lease's second.
            try await UpstreamScenario.waitFor("four renewals of the lease") {
                let now = timeLeft()
                if now > lowest { renewals += 1 }
                lowest = now
                return renewals >= 4
            }
            // The claim still holds, a lease at most left.
            #expect(try redis.cli("GET", key).hasPrefix("OGC1"))
            let ttl = timeLeft()
            #expect(ttl > 0 && ttl <= 1000, "PTTL \(ttl)")
            // The other replica waits on it (its wait flag is set) ...
            async let second = gateways[1].fetchProducts(["coins_100"])
            try await UpstreamScenario.waitFor("the second replica waiting") {
                (try? redis.cli("EXISTS", "test-gw:v1:w:demo:DE:-:coins_100")) == "1"
            }
            #expect(upstream.upstream.requests.count == 1)
            // ... and gets the first's outcome when it ends.
            #expect(upstream.upstream.answerHeld() == 1)
            #expect(try await first.productIDs == ["coins_100"])
            #expect(try await second.productIDs == ["coins_100"])
            #expect(upstream.upstream.requests.count == 1)
            #expect(try await gateways[1].metricValue("gateway_shared_waits_total{ended=\"outcome\"}") == 1)
        }
    }

    /// A "lease" longer than a lease, or with no expiry, was written by no
    /// replica (a forged key, an older format): it is not a lease, and the
    /// replica fetches at once instead of waiting on it.
    @Test(arguments: [["PX", "600000"], []])
    func aLeaseLongerThanALeaseIsIgnored(expiry: [String]) async throws {
        try await SharedTierScenario.run(replicas: 1) { upstream, gateways, redis in
            _ = try redis.cli(["SET", "test-gw:v1:p:demo:DE:-:coins_100", "OGC1forged"] + expiry)
            let started = ContinuousClock.now
            let answer = try await gateways[0].fetchProducts(["coins_100"])
            #expect(answer.productIDs == ["coins_100"])
            #expect(ContinuousClock.now - started < .milliseconds(1000))
            #expect(upstream.upstream.requests.count == 1)
            // Taken over, then released when the fetch ended (pipelined
            // after the answer; nothing is stored without max-age).
            try await UpstreamScenario.waitFor("the lease released") { (try? redis.keys("test-gw:v1:[pc]:*").isEmpty) == true }
        }
    }

    /// With PUBLISH refused (an ACL), no outcome message ever comes: the
    /// waiting replicas find the claimer's stored entries at their next look
    /// (every 250 ms), not at their deadline.
    @Test func withPublishRefusedWaitersAnswerWithinAPoll() async throws {
        try await SharedTierScenario.run(replicas: 2, environment: Self.patient) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            upstream.upstream.setStandingFault(.delay(milliseconds: 600))
            try redis.cli("ACL", "SETUSER", "default", "-publish")
            let started = ContinuousClock.now
            let answers = try await Self.herd(gateways, calls: 10)
            let took = ContinuousClock.now - started
            #expect(answers.allSatisfy { $0.productIDs == ["premium_monthly", "coins_100"] })
            #expect(upstream.upstream.requests.count == 1)
            // The fetch (600 ms), a poll (250 ms) and a wide margin; not the
            // waiters' patience (10 s), nor their deadline (30 s).
            #expect(took < .seconds(5), "took \(took)")
            // The refused PUBLISH is counted.
            let first = try await gateways[0].metricValue("gateway_shared_cache_errors_total") ?? 0
            let second = try await gateways[1].metricValue("gateway_shared_cache_errors_total") ?? 0
            #expect(first + second >= 1)
        }
    }

    /// A replica killed (SIGKILL) mid-fetch stops renewing its lease; the
    /// replica waiting on it takes over within the lease (1 s) and a poll,
    /// and answers inside its own deadline.
    @Test(.timeLimit(.minutes(2))) func aReplicaKilledMidFetchIsReplacedWithinALease() async throws {
        try await SharedTierScenario.run(replicas: 1) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            // The doomed replica's call hangs upstream.
            upstream.upstream.enqueue(.delay(milliseconds: 8000))
            var environment = upstream.gatewayEnvironment(["GATEWAY_REDIS_URL": redis.url(), "GATEWAY_REDIS_PREFIX": "test-gw:", "GATEWAY_REDIS_TIMEOUT_MS": "2000"])
            environment["GATEWAY_LISTEN"] = nil
            let doomed = try await GatewayProcess.start(environment)
            try await UpstreamScenario.waitFor("the doomed replica's tier") {
                (try? await TestHTTP.get(port: doomed.port, path: "/metrics").bodyText.contains("gateway_shared_tier_connections 2")) == true
            }
            let doomedCall = Task { try? await doomed.rpc(UpstreamScenario.request(["coins_100"], country: "DE", language: nil)) }
            try await UpstreamScenario.waitFor("the doomed replica's lease") {
                (try? redis.keys("test-gw:v1:p:*").count) == 1 && upstream.upstream.requests.count == 1
            }
            // Nothing else writes a key now: the doomed replica renews with
            // PEXPIRE and stores only once its fetch ends.
            try redis.cli("CONFIG", "RESETSTAT")
            async let waiting = gateways[0].fetchProducts(["coins_100"])
            // The waiting replica's lookup has run in Redis and found the
            // doomed replica's lease (the lookup script's `SET ... NX GET`).
            try await UpstreamScenario.waitFor("the waiting replica's lookup") { ((try? Self.commandCounts(redis)["set"]) ?? 0) >= 1 }
            let killed = ContinuousClock.now
            doomed.sendSignal(SIGKILL)
            let answer = try await waiting
            let afterKill = ContinuousClock.now - killed
            doomedCall.cancel()
            #expect(answer.productIDs == ["coins_100"], "\(answer.body)")
            #expect(upstream.upstream.requests.count == 2)
            // The lease lapses within 1 s of the kill; the next poll takes over.
            #expect(afterKill < .milliseconds(2000), "answered \(afterKill) after the kill")
            #expect(try await gateways[0].metricValue(#"gateway_shared_waits_total{ended="takeover"}"#) == 1)
        }
    }


    /// Redis's own count of the commands it ran (`INFO commandstats`), by
    /// command, since the last `CONFIG RESETSTAT`.
    static func commandCounts(_ redis: RedisServer) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for line in try redis.cli("INFO", "commandstats").split(whereSeparator: \.isNewline) where line.hasPrefix("cmdstat_") {
            let name = line.dropFirst("cmdstat_".count).prefix { $0 != ":" }
            let parts = line.split(separator: "calls=")
            guard parts.count > 1, let number = Int(parts[1].prefix(while: \.isNumber)) else { continue }
            counts[String(name)] = number
        }
        counts["config|resetstat"] = nil
        counts["info"] = nil
        return counts
    }

    /// Lookups a loop asks in one turn go out as one script: the
    /// calls of a batch start together. An identifier two calls ask is
    /// leased once, fetched once, and its lease released once.
    @Test func theLookupsOfOneLoopTurnShareOneScript() async throws {
        try await SharedTierScenario.run(replicas: 1) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            // The lookup and release scripts loaded first (EVALSHA,
            // NOSCRIPT, then EVAL, each).
            _ = try await gateways[0].fetchProducts(["premium_yearly"])
            try await UpstreamScenario.waitFor("the scripts loaded") { (try? Self.commandCounts(redis)["eval"]) == 2 }
            try redis.cli("CONFIG", "RESETSTAT")
            let call = { (id: Int, product: String) in
                #"{"jsonrpc":"2.0","id":\#(id),"method":"products.fetch","params":{"productIdentifiers":["\#(product)"],"countryCode":"DE"}}"#
            }
            let response = try await gateways[0].rpc("[" + [call(1, "premium_monthly"), call(2, "coins_100"), call(3, "premium_monthly")].joined(separator: ",") + "]")
            #expect(response.status == 200)
            #expect(response.bodyText.components(separatedBy: #""productIdentifier":"premium_monthly""#).count - 1 == 2)
            #expect(response.bodyText.contains(#""productIdentifier":"coins_100""#))
            #expect(upstream.upstream.requestCount(for: "premium_monthly") == 1)
            // Both fetches stored and released (pipelined after the answer;
            // together when their upstream answers came in one loop turn):
            // the entries replace the leases.
            try await UpstreamScenario.waitFor("the releases") {
                ["premium_monthly", "coins_100"].allSatisfy { (try? redis.cli("GET", "test-gw:v1:p:demo:DE:-:\($0)").hasPrefix("OGW1")) == true }
            }
            // One lookup script for the three calls: one SET NX GET per
            // distinct key (premium_monthly's second asking is answered
            // with the position of its first, and that call joins the
            // first's fetch). Then one or two release scripts (two
            // MGETs each: the leases, the wait flags), whose SETs store the
            // two entries over the leases: nothing is deleted.
            // (The GETs are this test's own, waiting for the entries.)
            let counts = try Self.commandCounts(redis).filter { $0.key != "get" }
            let releases = (counts["evalsha"] ?? 0) - 1
            #expect((1...2).contains(releases), "\(counts)")
            #expect(counts == ["set": 4, "evalsha": 1 + releases, "mget": 2 * releases], "\(counts)")
        }
    }

    /// Calls of one turn that ask for the same stored entry each get it from
    /// the one `SET NX GET` of the turn's script (the key asked again is
    /// answered with the position of its first): no second read, no fetch.
    @Test func callsOfOneTurnForOneEntryShareItsRead() async throws {
        try await SharedTierScenario.run(replicas: 2) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            _ = try await gateways[0].fetchProducts(["premium_monthly"])
            try await UpstreamScenario.waitFor("the entry stored") {
                (try? redis.cli("GET", "test-gw:v1:p:demo:DE:-:premium_monthly").hasPrefix("OGW1")) == true
            }
            try await UpstreamScenario.waitFor("the scripts loaded") { (try? Self.commandCounts(redis)["eval"]) == 2 }
            try redis.cli("CONFIG", "RESETSTAT")
            let call = { (id: Int) in
                #"{"jsonrpc":"2.0","id":\#(id),"method":"products.fetch","params":{"productIdentifiers":["premium_monthly"],"countryCode":"DE"}}"#
            }
            let response = try await gateways[1].rpc("[" + (1...3).map(call).joined(separator: ",") + "]")
            #expect(response.status == 200)
            #expect(response.bodyText.components(separatedBy: #""productIdentifier":"premium_monthly""#).count - 1 == 3)
            #expect(upstream.upstream.requests.count == 1)
            #expect(try await gateways[1].metricValue("gateway_shared_cache_hits_total") == 3)
            #expect(try Self.commandCounts(redis).filter { $0.key != "get" } == ["evalsha": 1, "set": 1])
        }
    }

    /// A miss costs one Redis round trip before the upstream: the lookup
    /// and the lease are one plain command per identifier (`SET entry-key
    /// lease NX PX 1000 GET`), in one script; after the fetch, the
    /// store and the release go out in one script, not waited for, and the
    /// outcome only when a replica waits. A shared-tier hit costs that one
    /// round trip and nothing else.
    @Test func aMissCostsOneRoundTripBeforeTheUpstreamAndAHitOneInAll() async throws {
        try await SharedTierScenario.run(replicas: 2) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            // A first miss has Redis load the lookup and release scripts
            // (EVALSHA, NOSCRIPT, then EVAL, each); from then on they go by
            // their SHA-1 alone.
            #expect(try await gateways[0].fetchProducts(["premium_monthly"]).productIDs == ["premium_monthly"])
            try await UpstreamScenario.waitFor("the scripts loaded") { (try? Self.commandCounts(redis)["eval"]) == 2 }
            try redis.cli("CONFIG", "RESETSTAT")
            #expect(try await gateways[0].fetchProducts(["coins_100"]).productIDs == ["coins_100"])
            try await UpstreamScenario.waitFor("the release") { (try? Self.commandCounts(redis)["evalsha"]) == 2 }
            let missCounts = try Self.commandCounts(redis)
            // Redis counts the commands its scripts run too: the lookup
            // script's SET NX GET (the lease); then one script for the release's two
            // MGETs (is the lease still ours? does anyone wait?) and the
            // store's SET, which replaces the lease. No second look before
            // the upstream, no DEL, and no PUBLISH: nobody waited.
            #expect(missCounts == ["set": 2, "evalsha": 2, "mget": 2], "\(missCounts)")
            #expect(try redis.cli("GET", "test-gw:v1:p:demo:DE:-:coins_100").hasPrefix("OGW1"))

            try redis.cli("CONFIG", "RESETSTAT")
            #expect(try await gateways[1].fetchProducts(["coins_100"]).productIDs == ["coins_100"])
            #expect(try await gateways[1].metricValue("gateway_shared_cache_hits_total") == 1)
            let hitCounts = try Self.commandCounts(redis)
            // One lookup script, whose SET NX GET found the fresh entry and
            // wrote nothing.
            #expect(hitCounts == ["evalsha": 1, "set": 1], "\(hitCounts)")
            #expect(upstream.upstream.requests.count == 2)
        }
    }

    /// Redis forgets its scripts (a restart, `SCRIPT FLUSH`): the next
    /// lookup and release get `NOSCRIPT`, go again with the script's text,
    /// and the miss is served, stored and released as before, with nothing
    /// counted as an error.
    @Test func scriptsForgottenByRedisAreSentAgainWithTheirText() async throws {
        try await SharedTierScenario.run(replicas: 1) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            #expect(try await gateways[0].fetchProducts(["premium_monthly"]).productIDs == ["premium_monthly"])
            try await UpstreamScenario.waitFor("the scripts loaded") { (try? Self.commandCounts(redis)["eval"]) == 2 }
            try redis.cli("SCRIPT", "FLUSH")
            try redis.cli("CONFIG", "RESETSTAT")
            #expect(try await gateways[0].fetchProducts(["coins_100"]).productIDs == ["coins_100"])
            try await UpstreamScenario.waitFor("the entry stored") {
                (try? redis.cli("GET", "test-gw:v1:p:demo:DE:-:coins_100").hasPrefix("OGW1")) == true
            }
            // Each script: its EVALSHA refused, then EVAL with its text.
            let counts = try Self.commandCounts(redis).filter { $0.key != "get" }
            #expect(counts["eval"] == 2, "\(counts)")
            #expect(counts["evalsha"] == 2, "\(counts)")
            #expect(try await gateways[0].metricValue("gateway_shared_cache_errors_total") ?? 0 == 0)
            #expect(upstream.upstream.requestCount(for: "coins_100") == 1)
        }
    }

    /// What the entry key holds that is neither an entry nor a lease (bytes
    /// of another writer, a key of another type) is taken over by the
    /// claim, fetched, and replaced by the entry; the replica stays up.
    @Test(arguments: ["bytes", "hash"])
    func whatIsNeitherEntryNorLeaseIsTakenOver(kind: String) async throws {
        try await SharedTierScenario.run(replicas: 1) { upstream, gateways, redis in
            upstream.upstream.setCacheControl("max-age=30")
            let key = "test-gw:v1:p:demo:DE:-:coins_100"
            if kind == "hash" { try redis.cli("HSET", key, "field", "value") } else { try redis.cli("SET", key, "not-an-entry") }
            #expect(try await gateways[0].fetchProducts(["coins_100"]).productIDs == ["coins_100"])
            #expect(upstream.upstream.requests.count == 1)
            try await UpstreamScenario.waitFor("the entry stored") { (try? redis.cli("GET", key).hasPrefix("OGW1")) == true }
            #expect(try await gateways[0].fetchProducts(["premium_monthly"]).productIDs == ["premium_monthly"])
        }
    }
}
