/// Writes a response's status line and header section.
public enum HTTPResponseHead {
    /// Appends the head of a response to `buffer`.
    ///
    /// `Content-Length`, `Connection` and `Date` are the writer's: fields of
    /// those names in `headers` are skipped, and so is any field whose name
    /// or value holds CR, LF or NUL (they would split the response).
    /// - Parameters:
    ///   - contentLength: the body's length; also sent for `HEAD`, whose
    ///     body is not; `nil` for `204`, which has none.
    ///   - close: says `Connection: close`.
    ///   - keepAliveForHTTP10: says `Connection: keep-alive` (an HTTP/1.0
    ///     client that asked to keep the connection).
    ///   - date: an IMF-fixdate (``HTTPDate``).
    public static func write(
        status: Int,
        headers: HTTPHeaders,
        contentLength: Int?,
        close: Bool,
        keepAliveForHTTP10: Bool = false,
        date: some Collection<UInt8>,
        into buffer: inout [UInt8]
    ) {
        buffer.append(contentsOf: "HTTP/1.1 ".utf8)
        appendDecimal(status, to: &buffer)
        buffer.append(ASCII.space)
        buffer.append(contentsOf: reasonPhrase(status).utf8)
        buffer.append(contentsOf: "\r\nDate: ".utf8)
        buffer.append(contentsOf: date)
        if let contentLength {
            buffer.append(contentsOf: "\r\nContent-Length: ".utf8)
            appendDecimal(contentLength, to: &buffer)
        }
        if close {
            buffer.append(contentsOf: "\r\nConnection: close".utf8)
        } else if keepAliveForHTTP10 {
            buffer.append(contentsOf: "\r\nConnection: keep-alive".utf8)
        }
        for field in headers.fields where isWritable(field.name, field.value) {
            buffer.append(contentsOf: "\r\n".utf8)
            buffer.append(contentsOf: field.name.utf8)
            buffer.append(contentsOf: ": ".utf8)
            buffer.append(contentsOf: field.value.utf8)
        }
        buffer.append(contentsOf: "\r\n\r\n".utf8)
    }

    private static func isWritable(_ name: String, _ value: String) -> Bool {
        let nameBytes = name.utf8
        guard !nameBytes.isEmpty, nameBytes.allSatisfy(ASCII.isTokenByte) else { return false }
        switch nameBytes.count {
        case 4 where ASCII.equalsLowercase(nameBytes, "date"): return false
        case 10 where ASCII.equalsLowercase(nameBytes, "connection"): return false
        case 14 where ASCII.equalsLowercase(nameBytes, "content-length"): return false
        default: return value.utf8.allSatisfy(ASCII.isFieldValueByte)
        }
    }

    static func appendDecimal(_ value: Int, to buffer: inout [UInt8]) {
        precondition(value >= 0)
        if value >= 10 { appendDecimal(value / 10, to: &buffer) }
        buffer.append(ASCII.zero + UInt8(value % 10))
    }

    /// The reason phrase of the statuses the gateway sends.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 204: "No Content"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }
}

/// The `Date` field's IMF-fixdate (RFC 9110 section 5.6.7).
public enum HTTPDate {
    /// e.g. `Sun, 06 Nov 1994 08:49:37 GMT` for 784111777.
    public static func imfFixdate(secondsSince1970 seconds: Int) -> [UInt8] {
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        // Civil-from-days (Howard Hinnant's algorithm), proleptic Gregorian.
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let dayOfEra = z - era * 146097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = (days % 7 + 11) % 7 // 1970-01-01 was a Thursday (index 4).
        let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let text = "\(weekdays[weekday]), \(two(day)) \(months[month - 1]) \(year) \(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60)) GMT"
        return Array(text.utf8)
    }
}
