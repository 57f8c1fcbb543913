@testable import GatewayService
import Testing
import Tracing

/// The `OTEL_*` variables as the OpenTelemetry specification reads them.
@Suite("TracingSettings")
struct TracingSettingsTests {
    @Test func unsetMeansNoExportAndTheSpecificationsDefaults() throws {
        let settings = try TracingSettings.load(environment: [:])
        #expect(settings.endpoint == nil)
        #expect(settings.sampler == .parentBased(root: .alwaysOn))
        #expect(settings.exportProtocol == .protobuf)
        #expect(settings.serviceName == "products-gateway")
        #expect((settings.scheduleDelayMS, settings.maxQueueSize, settings.maxExportBatchSize, settings.exportTimeoutMS) == (5000, 2048, 512, 10000))
    }

    @Test func theBaseEndpointGetsV1TracesAndTheTracesEndpointIsUsedAsItIs() throws {
        let base = try #require(try TracingSettings.load(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"]).endpoint)
        #expect((base.isTLS, base.host, base.port, base.path) == (false, "collector", 4318, "/v1/traces"))
        let prefixed = try #require(try TracingSettings.load(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example.com/otel"]).endpoint)
        #expect((prefixed.isTLS, prefixed.port, prefixed.path) == (true, 443, "/otel/v1/traces"))
        let traces = try #require(try TracingSettings.load(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://[::1]:9999/custom",
        ]).endpoint)
        #expect((traces.host, traces.port, traces.path, traces.variable) == ("::1", 9999, "/custom", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        #expect(try TracingSettings.load(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"]).endpoint == nil)
    }

    @Test func headersAndResourceAttributesArePercentDecodedPairs() throws {
        let settings = try TracingSettings.load(environment: [
            "OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=abc%20def, api-key = k=v",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes,deployment.environment=prod",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        ])
        #expect(settings.headers == [.init(name: "x-honeycomb-team", value: "abc def"), .init(name: "api-key", value: "k=v")])
        #expect(settings.serviceName == "from-attributes")
        #expect(settings.resourceAttributes == [.init(name: "deployment.environment", value: "prod")])
        #expect(settings.sampler == .parentBased(root: .traceIDRatio(0.25)))
        #expect(settings.exportProtocol == .json)
        #expect(try TracingSettings.load(environment: ["OTEL_RESOURCE_ATTRIBUTES": "service.name=a", "OTEL_SERVICE_NAME": "b"]).serviceName == "b")
    }

    @Test(arguments: [
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"],
        ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://"],
        ["OTEL_EXPORTER_OTLP_HEADERS": "bad name=x"],
        ["OTEL_EXPORTER_OTLP_HEADERS": "a=%zz"],
        ["OTEL_EXPORTER_OTLP_HEADERS": "a=line%0Abreak"],
        ["OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "11"],
        ["OTEL_BSP_SCHEDULE_DELAY": "-1"],
        ["OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"],
    ])
    func badValuesNameTheirVariable(_ environment: [String: String]) {
        #expect(throws: ConfigurationError.self) { try TracingSettings.load(environment: environment) }
        do {
            _ = try TracingSettings.load(environment: environment)
        } catch {
            #expect(environment.keys.contains(error.variable), "\(error)")
            #expect(!error.description.contains("line%0A"))
        }
    }
}
