import Foundation
import OpenAPIURLSession

extension Client {
    /// A client of the gateway at `gatewayURL` (for example
    /// `http://127.0.0.1:8080`), over `URLSession`.
    ///
    /// Everything else, `Client`, its operations (`rpc`, `healthz`, `readyz`,
    /// `metrics`, `openapi`) and the `Components.Schemas` types, is generated
    /// at build time from the gateway's `openapi/openapi.yaml`.
    public init(gatewayURL: URL) {
        self.init(serverURL: gatewayURL, transport: URLSessionTransport())
    }
}
