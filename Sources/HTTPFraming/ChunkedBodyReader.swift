/// Reads a chunked body (RFC 9112 section 7.1): each size line (hex digits,
/// extensions checked and ignored), its data and CRLF, the last chunk, the
/// trailer's fields (checked like header fields, then dropped) and the final
/// CRLF. The request and the response parsers share it; each words its
/// refusals its own way.
struct ChunkedBodyReader: Sendable {
    /// Why the body cannot be read.
    enum Failure: Error {
        /// Not chunked as RFC 9112 frames it (the error of a bad request;
        /// a chunk size past 63 bits is a 413).
        case framing(HTTPFramingError)
        /// The data passed the body limit.
        case bodyTooLarge
        /// The trailer passed the head limit.
        case trailerTooLarge
    }

    private enum Phase {
        case sizeLine
        case data(remaining: Int)
        case dataCR
        case dataLF
        case trailer
    }

    private var phase = Phase.sizeLine
    /// The size or trailer line read so far, when split over reads.
    private var line: [UInt8] = []
    private var trailerBytes = 0

    /// Reads as much of `bytes` as the body needs, appending its data to
    /// `body`. Returns the bytes used (up to and including the offending
    /// line or byte on a failure), and whether the body ended.
    mutating func read(_ bytes: UnsafeRawBufferPointer, into body: inout [UInt8], maxBodyBytes: Int, maxTrailerBytes: Int) -> (used: Int, outcome: Result<Bool, Failure>) {
        var offset = 0
        while offset < bytes.count {
            switch phase {
            case .sizeLine, .trailer:
                let isTrailer = if case .trailer = phase { true } else { false }
                guard let lf = bytes[offset...].firstIndex(of: ASCII.lf) else {
                    line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                    if isTrailer { trailerBytes += bytes.count - offset }
                    if line.count > 1024 && !isTrailer {
                        return (bytes.count, .failure(.framing(.badRequest("a chunk-size line is longer than 1024 bytes"))))
                    } else if trailerBytes > maxTrailerBytes {
                        return (bytes.count, .failure(.trailerTooLarge))
                    }
                    return (bytes.count, .success(false))
                }
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...lf]))
                if isTrailer { trailerBytes += lf + 1 - offset }
                offset = lf + 1
                let complete = line
                line.removeAll(keepingCapacity: true)
                guard complete.count >= 2, complete[complete.count - 2] == ASCII.cr else {
                    return (offset, .failure(.framing(.badRequest("a line of the chunked body ends in a bare LF; lines end in CRLF"))))
                }
                if isTrailer {
                    if trailerBytes > maxTrailerBytes { return (offset, .failure(.trailerTooLarge)) }
                    if complete.count == 2 { return (offset, .success(true)) }
                    if let error = complete.withUnsafeBytes({ HeadParser.checkTrailerField(UnsafeRawBufferPointer(rebasing: $0[..<(complete.count - 2)])) }) {
                        return (offset, .failure(.framing(error)))
                    }
                    continue
                }
                switch complete.withUnsafeBytes({ Self.chunkSize(UnsafeRawBufferPointer(rebasing: $0[..<(complete.count - 2)])) }) {
                case .failure(let error):
                    return (offset, .failure(.framing(error)))
                case .success(0):
                    phase = .trailer
                case .success(let size):
                    guard size <= maxBodyBytes - body.count else { return (offset, .failure(.bodyTooLarge)) }
                    phase = .data(remaining: size)
                }
            case .data(let remaining):
                let take = min(remaining, bytes.count - offset)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + take)]))
                offset += take
                phase = take == remaining ? .dataCR : .data(remaining: remaining - take)
            case .dataCR, .dataLF:
                let expected = if case .dataCR = phase { ASCII.cr } else { ASCII.lf }
                guard bytes[offset] == expected else {
                    return (offset, .failure(.framing(.badRequest("chunk data is not followed by CRLF"))))
                }
                offset += 1
                phase = expected == ASCII.cr ? .dataLF : .sizeLine
            }
        }
        return (offset, .success(false))
    }

    /// `chunk-size [ chunk-ext ]` (RFC 9112 section 7.1): hex digits, then
    /// nothing or extensions that start with `;`.
    static func chunkSize(_ line: UnsafeRawBufferPointer) -> Result<Int, HTTPFramingError> {
        var size = 0
        var index = 0
        while index < line.count, let digit = ASCII.hexValue(line[index]) {
            guard size <= (Int.max - digit) / 16 else {
                return .failure(HTTPFramingError(status: 413, message: "a chunk size does not fit in 63 bits"))
            }
            size = size * 16 + digit
            index += 1
        }
        guard index > 0 else { return .failure(.badRequest("a chunk size is not hexadecimal digits")) }
        var rest = index
        while rest < line.count, line[rest] == ASCII.space || line[rest] == ASCII.tab { rest += 1 }
        guard rest == line.count || line[rest] == ASCII.semicolon else {
            return .failure(.badRequest("a chunk size is followed by something other than an extension"))
        }
        for byte in line[rest...] where !ASCII.isFieldValueByte(byte) {
            return .failure(.badRequest("a chunk extension holds a control character"))
        }
        return .success(size)
    }
}
