public import EventTransport

/// Limits and address of an ``EvhttpServer``.
public struct EvhttpServerConfiguration: Sendable {
    /// Host or address to bind, e.g. `127.0.0.1`, `0.0.0.0`, `::`.
    public var host: String
    /// Port to bind; `0` picks a free one (see ``EvhttpServer/start()``).
    public var port: Int
    /// Largest request body accepted; larger ones get `413` and the
    /// connection is closed.
    public var maxBodyBytes: Int
    /// Largest request line plus headers accepted.
    public var maxHeaderBytes: Int
    /// Read and write timeout of a connection, idle keep-alive included.
    public var timeoutSeconds: Int
    /// Serve HTTPS with this context instead of plain HTTP.
    public var tls: TLSServerContext?

    public init(
        host: String,
        port: Int,
        maxBodyBytes: Int = 65536,
        maxHeaderBytes: Int = 16384,
        timeoutSeconds: Int = 30,
        tls: TLSServerContext? = nil
    ) {
        self.host = host
        self.port = port
        self.maxBodyBytes = maxBodyBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.timeoutSeconds = timeoutSeconds
        self.tls = tls
    }
}
