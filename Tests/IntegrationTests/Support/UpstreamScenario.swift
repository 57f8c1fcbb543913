import Foundation
import JSONRPC
import Testing

/// Builds `products.fetch` bodies, runs a gateway against the TLS test
/// upstream, and reads answers and metrics, for the upstream error, TLS,
/// coalescing, cache and retry suites.
enum UpstreamScenario {
    /// The bearer token `RunningUpstream.gatewayEnvironment` configures.
    static let token = "test-upstream-token-0123456789"

    /// The JSON-RPC text of one `products.fetch` call.
    static func request(_ ids: [String], country: String? = "DE", language: String? = nil, id: Int = 1) -> String {
        var params = [#""productIdentifiers":[\#(ids.map { "\"\($0)\"" }.joined(separator: ","))]"#]
        if let country { params.append(#""countryCode":"\#(country)""#) }
        if let language { params.append(#""language":"\#(language)""#) }
        return #"{"jsonrpc":"2.0","id":\#(id),"method":"products.fetch","params":{\#(params.joined(separator: ","))}}"#
    }

    /// `count` identifiers the sample catalog does not know: they come back
    /// in `invalidProductIdentifiers`, and the mock counts them like any other.
    static func unknownIDs(_ count: Int, prefix: String = "unknown") -> [String] {
        (0..<count).map { String(format: "\(prefix)_%03d", $0) }
    }

    /// Polls `condition` until it holds; only used to know that an upstream
    /// request is in flight before starting an overlapping call (ordering,
    /// never timing). Fails after a generous limit.
    static func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestHTTPError("timed out waiting for \(what)") }
            // Polls for the event (`condition`), 20 s at most: the sleep is only the poll's interval.
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// ``waitFor(_:_:)`` for a condition that must ask the gateway.
    static func waitFor(_ what: String, _ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !(await condition()) {
            guard ContinuousClock.now < deadline else { throw TestHTTPError("timed out waiting for \(what)") }
            // Polls for the event (`condition`), 20 s at most: the sleep is only the poll's interval.
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Runs `body` against a fresh TLS upstream and a gateway pointed at it,
    /// and stops both afterwards, also when `body` throws.
    static func run(
        certificate: String? = nil,
        key: String? = nil,
        environment: [String: String] = [:],
        _ body: (RunningUpstream, RunningGateway) async throws -> Void
    ) async throws {
        let upstream = try RunningUpstream.start(certificate: certificate, key: key)
        let gateway: RunningGateway
        do {
            gateway = try RunningGateway.start(upstream.gatewayEnvironment(environment))
        } catch {
            upstream.stop()
            throw error
        }
        do {
            try await body(upstream, gateway)
        } catch {
            await gateway.stop()
            upstream.stop()
            throw error
        }
        await gateway.stop()
        upstream.stop()
    }
}

/// One parsed `products.fetch` answer.
struct FetchAnswer {
    let http: RawHTTPResponse
    let body: JSONValue

    init(_ http: RawHTTPResponse) throws {
        self.http = http
        self.body = try parseJSON(http.body)
    }

    var result: JSONValue? { body["result"] }
    var error: JSONValue? { body["error"] }
    var data: JSONValue? { body["error"]?["data"] }
    var code: Int? { error?["code"]?.intValue }
    var reason: String? { data?["reason"]?.stringValue }
    var message: String { error?["message"]?.stringValue ?? "" }

    /// `productIdentifier` of every product, in answer order.
    var productIDs: [String] {
        result?["products"]?.arrayValue?.compactMap { $0["productIdentifier"]?.stringValue } ?? []
    }

    var invalidIDs: [String] {
        result?["invalidProductIdentifiers"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// The keys of `error.data`, in any order.
    var dataKeys: Set<String> {
        Set(data?.objectValue.map { object in object.keys } ?? [])
    }
}

extension RunningGateway {
    /// One call, parsed.
    func fetchProducts(_ ids: [String], country: String? = "DE", language: String? = nil, headers: [(String, String)] = []) async throws -> FetchAnswer {
        try FetchAnswer(try await rpc(UpstreamScenario.request(ids, country: country, language: language), headers: headers))
    }

    /// The value of one series in `/metrics`, e.g. `gateway_cache_hits_total`
    /// or `gateway_upstream_requests_total{status="503"}`; nil when absent.
    func metricValue(_ series: String) async throws -> Double? {
        let text = try await metricsText()
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
