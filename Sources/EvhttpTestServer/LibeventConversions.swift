import EventTransport
import CGatewayShims
import CLibevent
import HTTPFraming

// Copying between libevent's structures and Swift values. Everything here is
// called on the loop thread that owns the structures.

enum LibeventConversions {
    static func methodName(_ command: evhttp_cmd_type) -> String {
        switch command {
        case EVHTTP_REQ_GET: "GET"
        case EVHTTP_REQ_POST: "POST"
        case EVHTTP_REQ_HEAD: "HEAD"
        case EVHTTP_REQ_PUT: "PUT"
        case EVHTTP_REQ_DELETE: "DELETE"
        case EVHTTP_REQ_OPTIONS: "OPTIONS"
        case EVHTTP_REQ_TRACE: "TRACE"
        case EVHTTP_REQ_CONNECT: "CONNECT"
        case EVHTTP_REQ_PATCH: "PATCH"
        default: "UNKNOWN"
        }
    }

    static func headers(_ list: UnsafeMutablePointer<evkeyvalq>?) -> HTTPHeaders {
        var headers = HTTPHeaders()
        var field = gw_headers_first(list)
        while let current = field {
            let entry = UnsafeMutablePointer<evkeyval>(current)
            if let key = entry.pointee.key, let value = entry.pointee.value {
                headers.add(String(cString: key), String(cString: value))
            }
            field = gw_headers_next(current)
        }
        return headers
    }

    static func bytes(of buffer: OpaquePointer?) -> [UInt8] {
        guard let buffer else { return [] }
        let length = evbuffer_get_length(buffer)
        guard length > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: length) { storage, count in
            let copied = evbuffer_copyout(buffer, storage.baseAddress, length)
            count = max(0, copied)
        }
    }

    /// Adds `headers` to a libevent header list. Header names and values
    /// with CR or LF are dropped: they would split the message.
    static func add(_ headers: HTTPHeaders, to list: UnsafeMutablePointer<evkeyvalq>?) throws(TransportError) {
        for field in headers where !field.name.containsLineBreak && !field.value.containsLineBreak {
            try CCheck.libevent(evhttp_add_header(list, field.name, field.value), "evhttp_add_header")
        }
    }
}

extension String {
    var containsLineBreak: Bool { utf8.contains { $0 == 10 || $0 == 13 } }
}
