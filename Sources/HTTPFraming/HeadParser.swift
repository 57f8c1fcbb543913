#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Parses a complete head (request line, fields, the empty line), every
/// line already known to end in CRLF.
enum HeadParser {
    static func parse(_ raw: UnsafeRawBufferPointer, limits: HTTPRequestParser.Limits) -> Result<HTTPRequestHead, HTTPFramingError> {
        // The request line: method SP request-target SP HTTP-version CRLF.
        var index = 0
        while index < raw.count, ASCII.isTokenByte(raw[index]) { index += 1 }
        guard index > 0, index < raw.count, raw[index] == ASCII.space else {
            return .failure(.badRequest("the request line does not start with a method token and one space"))
        }
        let method = methodName(UnsafeRawBufferPointer(rebasing: raw[..<index]))
        let targetStart = index + 1
        index = targetStart
        while index < raw.count, raw[index] > ASCII.space, raw[index] < 0x7F { index += 1 }
        guard index > targetStart, index < raw.count, raw[index] == ASCII.space else {
            return .failure(.badRequest("the request target is missing or holds a character that is not visible ASCII"))
        }
        let target = String(decoding: UnsafeRawBufferPointer(rebasing: raw[targetStart..<index]), as: UTF8.self)
        let versionStart = index + 1
        guard versionStart + 10 <= raw.count, raw[versionStart + 8] == ASCII.cr, raw[versionStart + 9] == ASCII.lf else {
            return .failure(.badRequest("the request line does not end in an HTTP version such as HTTP/1.1"))
        }
        let version: HTTPRequestHead.Version
        switch versionOf(UnsafeRawBufferPointer(rebasing: raw[versionStart..<(versionStart + 8)])) {
        case .some((1, 0)): version = .http10
        case .some((1, _)): version = .http11
        case .some(let (major, minor)):
            return .failure(HTTPFramingError(status: 505, message: "HTTP/\(major).\(minor) is not supported; send HTTP/1.1"))
        case .none:
            return .failure(.badRequest("the request line does not end in an HTTP version such as HTTP/1.1"))
        }
        guard target.utf8.first == ASCII.slash || target.hasPrefix("http://") || target.hasPrefix("https://") || (target == "*" && method == "OPTIONS") else {
            return .failure(.badRequest("the request target is neither a path, an absolute URI nor * for OPTIONS"))
        }

        var headers = HTTPHeaders(reservingCapacity: 12)
        var contentLengths = 0
        var declaredLength: Int?
        var transferEncodings = 0
        var transferEncoding = ""
        var hosts = 0
        var expectsContinue = false
        var closeRequested = false
        var keepAliveRequested = false
        index = versionStart + 10
        // Every line ends in CRLF, so `raw` ends in the empty line's CRLF.
        while index < raw.count - 2 {
            var lineEnd = index
            while raw[lineEnd] != ASCII.cr || raw[lineEnd + 1] != ASCII.lf { lineEnd += 1 }
            let line = UnsafeRawBufferPointer(rebasing: raw[index..<lineEnd])
            index = lineEnd + 2
            let field: (name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
            switch splitField(line) {
            case .failure(let error): return .failure(error)
            case .success(let split): field = split
            }
            guard headers.count < limits.maxHeaderFields else {
                return .failure(HTTPFramingError(status: 431, message: "more than \(limits.maxHeaderFields) header fields"))
            }
            let name = String(decoding: field.name, as: UTF8.self)
            let value = fieldValue(field.value)
            headers.add(name, value)
            switch field.name.count {
            case 4 where ASCII.equalsLowercase(field.name, "host"):
                hosts += 1
            case 6 where ASCII.equalsLowercase(field.name, "expect"):
                guard ASCII.equalsLowercase(field.value, "100-continue") else {
                    return .failure(refusal(headers, method, target, HTTPFramingError(status: 417, message: "Expect holds something other than 100-continue")))
                }
                expectsContinue = version == .http11
            case 10 where ASCII.equalsLowercase(field.name, "connection"):
                for option in value.split(separator: ",") {
                    let token = option.trimmingOWS.lowercased()
                    if token == "close" { closeRequested = true }
                    if token == "keep-alive" { keepAliveRequested = true }
                }
            case 14 where ASCII.equalsLowercase(field.name, "content-length"):
                contentLengths += 1
                guard contentLengths == 1 else {
                    return .failure(refusal(headers, method, target, .badRequest("more than one Content-Length field")))
                }
                switch contentLength(field.value) {
                case .failure(let error): return .failure(refusal(headers, method, target, error))
                case .success(let length): declaredLength = length
                }
            case 17 where ASCII.equalsLowercase(field.name, "transfer-encoding"):
                transferEncodings += 1
                transferEncoding = value
            default:
                break
            }
        }

        var framing: HTTPRequestHead.BodyFraming = declaredLength.map { $0 == 0 ? .none : .length($0) } ?? .none
        if transferEncodings > 0 {
            guard version == .http11 else {
                return .failure(refusal(headers, method, target, .badRequest("Transfer-Encoding in an HTTP/1.0 request")))
            }
            guard contentLengths == 0 else {
                return .failure(refusal(headers, method, target, .badRequest("both Content-Length and Transfer-Encoding")))
            }
            guard transferEncodings == 1, ASCII.equalsLowercase(transferEncoding.utf8, "chunked") else {
                return .failure(refusal(headers, method, target, HTTPFramingError(status: 501, message: "the only transfer coding accepted is chunked")))
            }
            framing = .chunked
        }
        if case .length(let length) = framing, length > limits.maxBodyBytes {
            return .failure(refusal(headers, method, target, HTTPFramingError(status: 413, message: "the request body is larger than \(limits.maxBodyBytes) bytes")))
        }
        if version == .http11 && hosts != 1 {
            return .failure(refusal(headers, method, target, .badRequest(hosts == 0 ? "an HTTP/1.1 request without a Host field" : "more than one Host field")))
        }
        if version == .http10 && hosts > 1 {
            return .failure(refusal(headers, method, target, .badRequest("more than one Host field")))
        }
        return .success(HTTPRequestHead(
            method: method,
            target: target,
            version: version,
            headers: headers,
            bodyFraming: framing,
            expectsContinue: expectsContinue && framing != .none,
            keepAlive: version == .http11 ? !closeRequested : (keepAliveRequested && !closeRequested)
        ))
    }

    /// `error`, carrying the request line and the fields read so far.
    static func refusal(_ headers: HTTPHeaders, _ method: String, _ target: String, _ error: HTTPFramingError) -> HTTPFramingError {
        var error = error
        error.requestHeaders = headers
        error.requestLine = (method, target)
        return error
    }

    /// `field-name ":" OWS field-value OWS` (RFC 9110 section 5, RFC 9112
    /// section 5): no whitespace before the colon, no folding, no control
    /// characters in the value.
    static func splitField(_ line: UnsafeRawBufferPointer) -> Result<(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer), HTTPFramingError> {
        guard let first = line.first else { return .failure(.badRequest("an empty header line")) }
        if first == ASCII.space || first == ASCII.tab {
            return .failure(.badRequest("a header line starts with whitespace (obsolete line folding)"))
        }
        var colon = 0
        while colon < line.count, ASCII.isTokenByte(line[colon]) { colon += 1 }
        guard colon < line.count, line[colon] == ASCII.colon else {
            if colon < line.count, line[colon] == ASCII.space || line[colon] == ASCII.tab {
                return .failure(.badRequest("whitespace between a header name and its colon"))
            }
            return .failure(.badRequest("a header name holds a character that is not a token character"))
        }
        guard colon > 0 else { return .failure(.badRequest("a header field without a name")) }
        var start = colon + 1
        var end = line.count
        while start < end, line[start] == ASCII.space || line[start] == ASCII.tab { start += 1 }
        while end > start, line[end - 1] == ASCII.space || line[end - 1] == ASCII.tab { end -= 1 }
        for byte in line[start..<end] where !ASCII.isFieldValueByte(byte) {
            return .failure(.badRequest("a header value holds a control character"))
        }
        return .success((UnsafeRawBufferPointer(rebasing: line[..<colon]), UnsafeRawBufferPointer(rebasing: line[start..<end])))
    }

    static func checkTrailerField(_ line: UnsafeRawBufferPointer) -> HTTPFramingError? {
        if case .failure(let error) = splitField(line) { return error }
        return nil
    }

    /// `1*DIGIT`, nothing else: no sign, no spaces inside, no list.
    static func contentLength(_ value: UnsafeRawBufferPointer) -> Result<Int, HTTPFramingError> {
        guard !value.isEmpty, value.allSatisfy({ $0 >= ASCII.zero && $0 <= ASCII.nine }) else {
            return .failure(.badRequest("Content-Length is not plain decimal digits"))
        }
        var length = 0
        for digit in value {
            // Anything past 2^59 is over every limit; stop before overflowing.
            guard length < 1 << 59 else { break }
            length = length * 10 + Int(digit - ASCII.zero)
        }
        return .success(length)
    }

    /// `HTTP/` DIGIT `.` DIGIT.
    static func versionOf(_ bytes: UnsafeRawBufferPointer) -> (Int, Int)? {
        guard bytes.count == 8, ASCII.equals(UnsafeRawBufferPointer(rebasing: bytes[..<5]), "HTTP/"),
              bytes[5] >= ASCII.zero, bytes[5] <= ASCII.nine, bytes[6] == ASCII.dot,
              bytes[7] >= ASCII.zero, bytes[7] <= ASCII.nine else { return nil }
        return (Int(bytes[5] - ASCII.zero), Int(bytes[7] - ASCII.zero))
    }

    /// A field value as a string; the one every JSON-RPC call sends that is
    /// too long for Swift's inline strings (`application/json`, 16 bytes)
    /// is a static string, so reading it allocates nothing.
    static func fieldValue(_ bytes: UnsafeRawBufferPointer) -> String {
        if bytes.count == 16, ASCII.equals(bytes, "application/json" as StaticString) { return "application/json" }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The common methods as static strings (no allocation per request).
    static func methodName(_ bytes: UnsafeRawBufferPointer) -> String {
        switch bytes.count {
        case 3 where ASCII.equals(bytes, "GET" as StaticString): return "GET"
        case 3 where ASCII.equals(bytes, "PUT" as StaticString): return "PUT"
        case 4 where ASCII.equals(bytes, "POST" as StaticString): return "POST"
        case 4 where ASCII.equals(bytes, "HEAD" as StaticString): return "HEAD"
        default: return String(decoding: bytes, as: UTF8.self)
        }
    }
}

/// Byte classes of RFC 9110.
enum ASCII {
    static let tab: UInt8 = 0x09
    static let lf: UInt8 = 0x0A
    static let cr: UInt8 = 0x0D
    static let space: UInt8 = 0x20
    static let dot: UInt8 = 0x2E
    static let slash: UInt8 = 0x2F
    static let zero: UInt8 = 0x30
    static let nine: UInt8 = 0x39
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B

    /// tchar (RFC 9110 section 5.6.2): ``!#$%&'*+-.^_`|~``, digits and letters.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        // Two 64-bit masks of the tchars, bit n for byte n and for byte
        // 64 + n: constants, where a `static let` table cost a `swift_once`
        // call and a bounds check for every byte of every header name.
        switch byte {
        case 0..<64: (0x03FF_6CFA_0000_0000 as UInt64) >> UInt64(byte) & 1 != 0
        case 64..<128: (0x57FF_FFFF_C7FF_FFFE as UInt64) >> UInt64(byte - 64) & 1 != 0
        default: false
        }
    }

    /// field-vchar, SP or HTAB: no other control character, no DEL.
    static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte == tab || (byte >= space && byte != 0x7F)
    }

    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: Int(byte - 0x30)
        case 0x41...0x46: Int(byte - 0x41 + 10)
        case 0x61...0x66: Int(byte - 0x61 + 10)
        default: nil
        }
    }

    static func equals(_ bytes: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount else { return false }
        return text.withUTF8Buffer { expected in
            bytes.isEmpty || memcmp(bytes.baseAddress!, expected.baseAddress!, bytes.count) == 0
        }
    }

    /// Case-insensitive comparison with a lower-case ASCII text.
    static func equalsLowercase(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        return lowercase.withUTF8Buffer { expected in
            for index in 0..<bytes.count where lowercased(bytes[index]) != expected[index] { return false }
            return true
        }
    }

    /// The same for a field name held as a `String` (the response writer's).
    static func equalsLowercase(_ name: String.UTF8View, _ lowercase: StaticString) -> Bool {
        guard name.count == lowercase.utf8CodeUnitCount else { return false }
        var name = String(name)
        return name.withUTF8 { equalsLowercase(UnsafeRawBufferPointer($0), lowercase) }
    }

    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}

extension Substring {
    var trimmingOWS: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
