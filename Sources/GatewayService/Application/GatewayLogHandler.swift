#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import JSONRPC
public import Logging

/// Writes one line per event to standard error (or a sink, in tests):
/// a JSON object with `ts`, `level`, `msg` and the metadata (`requestId`,
/// `method`, `outcome`, ...) for `LOG_FORMAT=json`, or a plain line for people.
public struct GatewayLogHandler: LogHandler {
    /// Where finished lines go; each call receives one whole line.
    public typealias Sink = @Sendable (String) -> Void

    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let format: GatewayConfiguration.LogFormat
    private let sink: Sink

    public init(format: GatewayConfiguration.LogFormat, level: Logger.Level, sink: @escaping Sink = GatewayLogHandler.standardError) {
        self.format = format
        self.logLevel = level
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        let timestamp = Self.timestamp()
        switch format {
        case .json:
            var object = JSONObject()
            object["ts"] = .string(timestamp)
            object["level"] = .string(event.level.rawValue)
            object["msg"] = .string(event.message.description)
            for key in merged.keys.sorted() where !["ts", "level", "msg"].contains(key) {
                object[key] = Self.json(merged[key]!)
            }
            sink(JSONValue.object(object).serializedString)
        case .text:
            let fields = merged.keys.sorted().map { "\(Self.escaped($0))=\(Self.textValue("\(merged[$0]!)"))" }.joined(separator: " ")
            sink("\(timestamp) \(event.level.rawValue.uppercased()) \(Self.escaped(event.message.description))\(fields.isEmpty ? "" : " " + fields)")
        }
    }

    /// A text line is one line: control characters (a newline in a method
    /// name, NUL, a terminal escape) are written as `\n`, `\r`, `\t` or
    /// `\u{1b}`, so no input can forge a line or drive a terminal.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.properties.generalCategory == .control:
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// A text line's value as written: bare when it is plain, else quoted
    /// like a JSON string, so a value holding a space, `=` or a quote (a
    /// method name such as `x outcome=ok`) cannot plant a field of its own.
    static func textValue(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
            scalar != " " && scalar != "=" && scalar != "\"" && scalar != "\\" && scalar.properties.generalCategory != .control
        }
        return plain ? text : JSONValue.string(text).serializedString
    }

    /// Metadata as JSON: numbers and flags recorded as such
    /// (`.stringConvertible(42)`) are written as JSON numbers and booleans,
    /// so `durationMs` can be summed without parsing a string.
    private static func json(_ value: Logger.MetadataValue) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let value as Int): .integer(value)
        case .stringConvertible(let value as Int64): .number(String(value))
        case .stringConvertible(let value as Bool): .bool(value)
        case .stringConvertible(let value as Double) where value.isFinite: .number(String(value))
        case .stringConvertible(let value): .string(value.description)
        case .array(let values): .array(values.map(json))
        case .dictionary(let values): .object(JSONObject(values.keys.sorted().map { ($0, json(values[$0]!)) }))
        }
    }

    /// `2026-11-23T16:32:35.955Z`: UTC, milliseconds. Written by hand from
    /// `clock_gettime` and `gmtime_r`: a Foundation date formatter cost more
    /// than the rest of a cache hit, and a line is logged per call.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let milliseconds = Int(now.tv_nsec / 1_000_000)
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var index = 0
            func put(_ value: Int, digits: Int) {
                var divisor = 1
                for _ in 1..<digits { divisor *= 10 }
                var rest = value
                while divisor > 0 {
                    buffer[index] = UInt8(ascii: "0") + UInt8(rest / divisor)
                    rest %= divisor
                    divisor /= 10
                    index += 1
                }
            }
            func put(_ character: Unicode.Scalar) {
                buffer[index] = UInt8(ascii: character)
                index += 1
            }
            put(Int(parts.tm_year) + 1900, digits: 4); put("-")
            put(Int(parts.tm_mon) + 1, digits: 2); put("-")
            put(Int(parts.tm_mday), digits: 2); put("T")
            put(Int(parts.tm_hour), digits: 2); put(":")
            put(Int(parts.tm_min), digits: 2); put(":")
            put(Int(parts.tm_sec), digits: 2); put(".")
            put(milliseconds, digits: 3); put("Z")
            return index
        }
    }

    /// Writes the line and a newline with one `write`, so lines from
    /// several threads never interleave.
    public static let standardError: Sink = { line in
        let bytes = Array((line + "\n").utf8)
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }
}
