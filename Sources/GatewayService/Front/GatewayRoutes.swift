/// The routes the gateway serves; the OpenAPI route test compares its
/// paths with this table.
public enum GatewayRoutes {
    /// Path and the one method it takes (`GET` routes also answer `HEAD`).
    public static let all: [(path: String, method: String)] = [
        ("/rpc", "POST"),
        ("/healthz", "GET"),
        ("/readyz", "GET"),
        ("/metrics", "GET"),
        ("/openapi.yaml", "GET"),
    ]

    /// The paths `GATEWAY_ADMIN_LISTEN` serves; nothing else is served there.
    public static let admin: [String] = ["/healthz", "/readyz", "/metrics"]
}
