import JSONRPC
import ProductsDomain
import Testing

@Suite("products.fetch failures")
struct ProductsFetchFailureTests {
    static let all: [ProductsFetchFailure] = [
        .connectionError(detail: "connection refused"),
        .serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: 30),
        .appNotRegistered(upstreamStatus: 404),
        .invalidProductIdentifier(upstreamStatus: 422, detail: nil),
        .cancelled(detail: "the call's deadline of 5000 ms passed"),
        .internalError(upstreamStatus: nil, detail: "items[0].id: missing (expected a string)"),
    ]

    @Test func contractTable() {
        #expect(Self.all.map(\.code) == [-32001, -32002, -32003, -32004, -32005, -32006])
        #expect(Self.all.map(\.reason) == ["connectionError", "serviceUnavailable", "appNotRegistered", "invalidProductIdentifier", "cancelled", "internalError"])
        #expect(Self.all.map(\.isRetryable) == [true, true, false, false, true, false])
    }

    @Test func precedence() {
        let connection = ProductsFetchFailure.connectionError(detail: "reset")
        let unavailable = ProductsFetchFailure.serviceUnavailable(upstreamStatus: 502, retryAfterSeconds: nil)
        let notRegistered = ProductsFetchFailure.appNotRegistered(upstreamStatus: 404)
        let rejected = ProductsFetchFailure.invalidProductIdentifier(upstreamStatus: 422, detail: "bad")
        let cancelled = ProductsFetchFailure.cancelled(detail: "shutting down")
        let internalError = ProductsFetchFailure.internalError(upstreamStatus: 401, detail: "unauthorized")

        #expect(ProductsFetchFailure.mostSevere([]) == nil)
        #expect(ProductsFetchFailure.mostSevere([cancelled]) == cancelled)
        #expect(ProductsFetchFailure.mostSevere(Self.all.reversed())?.reason == "appNotRegistered")
        #expect(ProductsFetchFailure.mostSevere([cancelled, connection, unavailable, internalError, rejected]) == rejected)
        #expect(ProductsFetchFailure.mostSevere([cancelled, connection, unavailable, internalError]) == internalError)
        #expect(ProductsFetchFailure.mostSevere([cancelled, connection, unavailable]) == unavailable)
        #expect(ProductsFetchFailure.mostSevere([cancelled, connection]) == connection)
        #expect(ProductsFetchFailure.mostSevere([notRegistered, rejected]) == notRegistered)
        // Same case: the first one reported wins.
        let later = ProductsFetchFailure.serviceUnavailable(upstreamStatus: 429, retryAfterSeconds: 5)
        #expect(ProductsFetchFailure.mostSevere([cancelled, unavailable, later]) == unavailable)
    }

    @Test func serviceUnavailableData() {
        let error = ProductsFetchFailure.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: 30).jsonRPCError(requestID: "req-1")
        #expect(error.code == -32002)
        #expect(error.message == "The products service is unavailable (upstream status 503); retry after 30 seconds")
        #expect(error.data?.serializedString == #"{"reason":"serviceUnavailable","retryable":true,"requestId":"req-1","upstreamStatus":503,"retryAfterSeconds":30}"#)
    }

    @Test func serviceUnavailableWithoutRetryAfter() {
        let error = ProductsFetchFailure.serviceUnavailable(upstreamStatus: 429, retryAfterSeconds: nil).jsonRPCError(requestID: "r")
        #expect(error.message == "The products service is unavailable (upstream status 429); retry later")
        #expect(error.data?.serializedString == #"{"reason":"serviceUnavailable","retryable":true,"requestId":"r","upstreamStatus":429}"#)
    }

    @Test func connectionErrorHasNoUpstreamStatus() {
        let error = ProductsFetchFailure.connectionError(detail: "TLS handshake failed: certificate verify failed").jsonRPCError(requestID: "abc")
        #expect(error == JSONRPCError(
            code: -32001,
            message: "The products service could not be reached: TLS handshake failed: certificate verify failed",
            data: ["reason": "connectionError", "retryable": true, "requestId": "abc"]
        ))
    }

    @Test func appNotRegistered() {
        let error = ProductsFetchFailure.appNotRegistered(upstreamStatus: 404).jsonRPCError(requestID: "abc")
        #expect(error == JSONRPCError(
            code: -32003,
            message: "The app is not registered with Onside (upstream status 404)",
            data: ["reason": "appNotRegistered", "retryable": false, "requestId": "abc", "upstreamStatus": 404]
        ))
    }

    @Test func invalidProductIdentifier() {
        let withDetail = ProductsFetchFailure.invalidProductIdentifier(upstreamStatus: 422, detail: "ids: too many").jsonRPCError(requestID: "abc")
        #expect(withDetail.code == -32004)
        #expect(withDetail.message == "The products service rejected the request (upstream status 422): ids: too many")
        #expect(withDetail.data == ["reason": "invalidProductIdentifier", "retryable": false, "requestId": "abc", "upstreamStatus": 422])
        let bare = ProductsFetchFailure.invalidProductIdentifier(upstreamStatus: 422, detail: nil).jsonRPCError(requestID: "abc")
        #expect(bare.message == "The products service rejected the request (upstream status 422)")
    }

    @Test func cancelled() {
        let error = ProductsFetchFailure.cancelled(detail: "the gateway is shutting down").jsonRPCError(requestID: "abc")
        #expect(error == JSONRPCError(
            code: -32005,
            message: "The call was cancelled: the gateway is shutting down",
            data: ["reason": "cancelled", "retryable": true, "requestId": "abc"]
        ))
    }

    @Test func internalErrorWithAndWithoutStatus() {
        let body = ProductsFetchFailure.internalError(upstreamStatus: 200, detail: "items[0].id: missing (expected a string)").jsonRPCError(requestID: "abc")
        #expect(body == JSONRPCError(
            code: -32006,
            message: "The products service gave an answer the gateway cannot use (upstream status 200): items[0].id: missing (expected a string)",
            data: ["reason": "internalError", "retryable": false, "requestId": "abc", "upstreamStatus": 200]
        ))
        let noStatus = ProductsFetchFailure.internalError(upstreamStatus: nil, detail: "response truncated").jsonRPCError(requestID: "abc")
        #expect(noStatus.message == "The products service gave an answer the gateway cannot use: response truncated")
        #expect(noStatus.data == ["reason": "internalError", "retryable": false, "requestId": "abc"])
    }

    @Test func longDetailsAreClipped() {
        let detail = String(repeating: "x", count: 500)
        let message = ProductsFetchFailure.connectionError(detail: detail).message
        #expect(message == "The products service could not be reached: " + String(repeating: "x", count: 200) + "…")
    }
}
