#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
public import Tracing

/// Trace export, as OpenTelemetry's standard variables set it (`OTEL_*`,
/// contract section "Tracing"). Read from the environment only: these are
/// the names every OpenTelemetry SDK and operator already uses, so they
/// have no flags of the gateway's own. A bad value stops start-up with a
/// message naming its variable, as every other setting's does.
public struct TracingSettings: Sendable, Equatable {
    /// Where spans go: `{OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces`, or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is.
    public struct Endpoint: Sendable, Equatable {
        /// `https://` (verified as the upstream is), else plain `http://`.
        public var isTLS: Bool
        public var host: String
        public var port: Int
        /// The path and query the request is sent to.
        public var path: String
        /// The variable it was read from, for messages.
        public var variable: String

        /// As logs show it (there are never credentials in it).
        public var url: String {
            let shownHost = host.contains(":") ? "[\(host)]" : host
            return "\(isTLS ? "https" : "http")://\(shownHost):\(port)\(path)"
        }
    }

    /// `OTEL_EXPORTER_OTLP_PROTOCOL`: the body's encoding.
    public enum ExportProtocol: String, Sendable, Equatable {
        case protobuf = "http/protobuf"
        case json = "http/json"

        public var contentType: String { self == .protobuf ? "application/x-protobuf" : "application/json" }
    }

    /// Nil: nothing is exported (`OTEL_SDK_DISABLED=true`, or no endpoint).
    public var endpoint: Endpoint?
    public var exportProtocol: ExportProtocol = .protobuf
    /// `OTEL_EXPORTER_OTLP_HEADERS`: sent with every export; may hold a
    /// collector's key, so never logged.
    public var headers: [Header] = []
    public var sampler: Sampler = .parentBased(root: .alwaysOn)
    /// `OTEL_SERVICE_NAME`, else `service.name` of `OTEL_RESOURCE_ATTRIBUTES`.
    public var serviceName = "products-gateway"
    /// The gateway's version (`service.version`), set by the program.
    public var serviceVersion = "0.1.0"
    /// The rest of `OTEL_RESOURCE_ATTRIBUTES`.
    public var resourceAttributes: [Header] = []
    /// `OTEL_BSP_SCHEDULE_DELAY` (ms).
    public var scheduleDelayMS = 5000
    /// `OTEL_BSP_MAX_QUEUE_SIZE`.
    public var maxQueueSize = 2048
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`.
    public var maxExportBatchSize = 512
    /// `OTEL_BSP_EXPORT_TIMEOUT` (ms), bounded by `OTEL_EXPORTER_OTLP_TIMEOUT`
    /// (ms, default 10000) when that is shorter: one export's whole time.
    public var exportTimeoutMS = 10000
    /// `OTEL_SDK_DISABLED=true`.
    public var disabled = false
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`: PEM file of the CAs an `https://`
    /// collector is verified against; nil: the system trust store.
    public var caFile: String?

    /// A `name=value` pair of a W3C-baggage-like list.
    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
    }

    public init() {}

    /// Reads the `OTEL_*` variables of `environment`.
    public static func load(environment: [String: String]) throws(ConfigurationError) -> TracingSettings {
        var settings = TracingSettings()
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
            return text
        }
        func fail(_ name: String, _ message: String) -> ConfigurationError {
            ConfigurationError(variable: name, message: message)
        }
        func integer(_ name: String, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
            guard let text = value(name) else { return nil }
            guard let number = Int(text), range.contains(number) else {
                throw fail(name, "expected an integer from \(range.lowerBound) to \(range.upperBound), got '\(URLRedaction.quoted(text, limit: 40))'")
            }
            return number
        }

        if let text = value("OTEL_SDK_DISABLED") {
            switch text.lowercased() {
            case "true": settings.disabled = true
            case "false": settings.disabled = false
            default: throw fail("OTEL_SDK_DISABLED", "expected true or false, got '\(URLRedaction.quoted(text, limit: 40))'")
            }
        }
        if let name = value("OTEL_TRACES_SAMPLER")?.lowercased() {
            var ratio = 1.0
            if let text = value("OTEL_TRACES_SAMPLER_ARG"), name.hasSuffix("traceidratio") {
                guard let number = Double(text), number >= 0, number <= 1 else {
                    throw fail("OTEL_TRACES_SAMPLER_ARG", "expected a ratio from 0 to 1 for \(name), got '\(URLRedaction.quoted(text, limit: 40))'")
                }
                ratio = number
            }
            guard let sampler = Sampler(name: name, ratio: ratio) else {
                throw fail("OTEL_TRACES_SAMPLER", "expected one of \(Sampler.names.joined(separator: ", ")), got '\(URLRedaction.quoted(name, limit: 40))'")
            }
            settings.sampler = sampler
        }
        for protocolVariable in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
            guard let text = value(protocolVariable) else { continue }
            guard let chosen = ExportProtocol(rawValue: text.lowercased()) else {
                throw fail(protocolVariable, "expected http/protobuf or http/json (grpc is not supported), got '\(URLRedaction.quoted(text, limit: 40))'")
            }
            settings.exportProtocol = chosen
        }
        for headersVariable in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            guard let text = value(headersVariable) else { continue }
            // A secret: the message never quotes the value.
            settings.headers += try pairs(text, isHeader: true) { message throws(ConfigurationError) in throw fail(headersVariable, message) }
        }
        if let text = value("OTEL_RESOURCE_ATTRIBUTES") {
            for pair in try pairs(text, isHeader: false, { message throws(ConfigurationError) in throw fail("OTEL_RESOURCE_ATTRIBUTES", message) }) {
                if pair.name == "service.name" {
                    settings.serviceName = pair.value
                } else if !["service.version", "service.instance.id"].contains(pair.name) {
                    settings.resourceAttributes.append(pair)
                }
            }
        }
        if let name = value("OTEL_SERVICE_NAME") { settings.serviceName = name }
        for caVariable in ["OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"] {
            guard let path = value(caVariable) else { continue }
            guard access(path, R_OK) == 0 else { throw fail(caVariable, "cannot read '\(URLRedaction.quoted(path, limit: 200))'") }
            settings.caFile = path
        }
        settings.scheduleDelayMS = try integer("OTEL_BSP_SCHEDULE_DELAY", 1...3_600_000) ?? settings.scheduleDelayMS
        settings.maxQueueSize = try integer("OTEL_BSP_MAX_QUEUE_SIZE", 1...1_000_000) ?? settings.maxQueueSize
        settings.maxExportBatchSize = try integer("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1...1_000_000) ?? min(settings.maxExportBatchSize, settings.maxQueueSize)
        guard settings.maxExportBatchSize <= settings.maxQueueSize else {
            throw fail("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "must not exceed OTEL_BSP_MAX_QUEUE_SIZE (\(settings.maxQueueSize))")
        }
        let batchTimeout = try integer("OTEL_BSP_EXPORT_TIMEOUT", 1...3_600_000) ?? 30000
        var exporterTimeout = try integer("OTEL_EXPORTER_OTLP_TIMEOUT", 1...3_600_000) ?? 10000
        exporterTimeout = try integer("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 1...3_600_000) ?? exporterTimeout
        settings.exportTimeoutMS = min(batchTimeout, exporterTimeout)

        if let text = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            settings.endpoint = try endpoint(text, variable: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", appendingTracesPath: false)
        } else if let text = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            settings.endpoint = try endpoint(text, variable: "OTEL_EXPORTER_OTLP_ENDPOINT", appendingTracesPath: true)
        }
        if settings.disabled { settings.endpoint = nil }
        return settings
    }

    /// `http[s]://host[:port][/path]`, without credentials: the base's
    /// path gets `/v1/traces`, the traces variable's is used as it is
    /// (`/` when it has none).
    static func endpoint(_ text: String, variable: String, appendingTracesPath: Bool) throws(ConfigurationError) -> Endpoint {
        let shown = URLRedaction.quoted(text, limit: 100)
        if URLRedaction.splittingUserinfo(text).userinfo != nil {
            throw ConfigurationError(variable: variable, message: "credentials in the URL are not allowed; send them with OTEL_EXPORTER_OTLP_HEADERS")
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw ConfigurationError(variable: variable, message: "expected http://host[:port][/path] or https://..., got '\(shown)'")
        }
        guard let host = components.host, !host.isEmpty else {
            throw ConfigurationError(variable: variable, message: "the URL has no host: '\(shown)'")
        }
        guard components.fragment == nil else {
            throw ConfigurationError(variable: variable, message: "the URL must not have a fragment: '\(shown)'")
        }
        var path = components.percentEncodedPath
        if appendingTracesPath {
            while path.hasSuffix("/") { path.removeLast() }
            path += "/v1/traces"
        } else if path.isEmpty {
            path = "/"
        }
        if let query = components.percentEncodedQuery { path += "?" + query }
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return Endpoint(isTLS: scheme == "https", host: bareHost, port: components.port ?? (scheme == "https" ? 443 : 80), path: path, variable: variable)
    }

    /// `key1=value1,key2=value2`, values percent-decoded (the W3C Baggage
    /// form the OpenTelemetry specification uses for these variables).
    /// Header names are HTTP tokens; no value may hold CR, LF or NUL.
    static func pairs(_ text: String, isHeader: Bool, _ fail: (String) throws(ConfigurationError) -> Never) throws(ConfigurationError) -> [Header] {
        var result: [Header] = []
        for (index, member) in text.split(separator: ",", omittingEmptySubsequences: true).enumerated() {
            guard let equals = member.firstIndex(of: "=") else { try fail("entry \(index + 1) is not key=value") }
            let name = member[..<equals].trimmingCharacters(in: .whitespaces)
            let raw = member[member.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard let decoded = raw.removingPercentEncoding else { try fail("entry \(index + 1) has a bad percent-encoding") }
            guard !name.isEmpty, !isHeader || name.utf8.allSatisfy(isTokenCharacter) else {
                try fail("entry \(index + 1) has an empty or invalid name")
            }
            guard !decoded.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else { try fail("entry \(index + 1) has a value holding CR, LF or NUL") }
            result.append(Header(name: name, value: decoded))
        }
        return result
    }

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
