@testable import GatewayMetrics
@testable import GatewayService
@testable import MemoryTier
@testable import SharedTier
import JSONRPC
import ProductsDomain
import Testing

/// The `outcome` label of metrics and the call's log line is read from the
/// typed failure a call ended with, never back from the error's `data`.
@Suite("Call outcome labels")
struct CallOutcomeLabelTests {
    @Test func aTypedFailureGivesItsReason() {
        let failure = ProductsFetchFailure.serviceUnavailable(upstreamStatus: 503, retryAfterSeconds: nil)
        #expect(GatewayApplication.outcome(of: .failure(failure.jsonRPCError(requestID: "r"))) == "serviceUnavailable")
        #expect(GatewayApplication.outcome(of: .failure(ProductsFetchFailure.cancelled(detail: "d").jsonRPCError(requestID: "r"))) == "cancelled")
    }

    @Test func paramsErrorsGiveTheContractsReasonOrInvalidParams() {
        let unresolved = ParamsError(param: "countryCode", reason: ParamsError.regionUnresolvedReason, message: "no region")
        #expect(GatewayApplication.outcome(of: .failure(unresolved.jsonRPCError)) == "regionUnresolved")
        #expect(GatewayApplication.outcome(of: .failure(ParamsError(param: "language", message: "bad").jsonRPCError)) == "invalidParams")
    }

    @Test func aReasonOnlyInDataIsNotALabel() {
        // What a method could put in `data` (or echo from a caller) never
        // becomes a metric label or a log field.
        let forged = JSONRPCError(code: -32001, message: "m", data: .object(["reason": .string("x outcome=ok")]))
        #expect(GatewayApplication.outcome(of: .failure(forged)) == "gatewayError")
        #expect(GatewayApplication.outcome(of: .success(.null)) == "ok")
    }

    @Test func theCauseIsNotPartOfEquality() {
        let failure = ProductsFetchFailure.appNotRegistered(upstreamStatus: 404)
        let typed = failure.jsonRPCError(requestID: "r")
        var plain = typed
        plain.cause = nil
        #expect(typed == plain)
    }
}
