import CGatewayShims
import COpenSSL
import Synchronization

/// PEM files are loaded into contexts one at a time in the process. With
/// the tests' gateways and upstreams starting side by side in one process,
/// a well-formed CA file once failed to load ("no certificate or crl
/// found") while other contexts loaded theirs; OpenSSL 3 reads PEM through
/// its shared decoder machinery. Contexts are made at start-up only, so
/// the lock costs nothing.
private let pemLoading = Mutex(())

/// Runs one PEM load (`load` returns OpenSSL's 1 for success) under the
/// lock, trying twice more after a failure with the error queue cleared:
/// a private key that loads every other time once failed with "DECODER
/// routines::unsupported" while handshakes ran on other threads of the
/// tests' process (OpenSSL 3.0's decoders under concurrent first use). A
/// file that is really wrong fails three times, with the last error.
private func loadingPEM(_ call: String, _ load: () -> Int32) throws(TransportError) {
    try pemLoading.withLock { _ throws(TransportError) in
        for _ in 1..<3 {
            if load() == 1 { return }
            ERR_clear_error()
        }
        try CCheck.openSSL(load(), call)
    }
}

/// An OpenSSL client context that always verifies the peer: the chain
/// against the system store (or a given CA file), and, per connection, the
/// host name. There is deliberately no way to switch verification off.
public final class TLSClientContext: @unchecked Sendable {
    // @unchecked: the SSL_CTX is configured once in init and only read
    // afterwards (SSL_new), which OpenSSL allows from any thread.
    let context: OpaquePointer

    /// - Parameter caFile: PEM file of CA certificates to trust instead of the
    ///   system store, or `nil` for the system store.
    public init(caFile: String?) throws(TransportError) {
        let context = try CCheck.pointer(SSL_CTX_new(TLS_client_method()), "SSL_CTX_new")
        self.context = context
        try CCheck.openSSL(gw_ssl_ctx_set_min_tls12(context), "SSL_CTX_set_min_proto_version")
        gw_ssl_ctx_harden(context)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        if let caFile {
            try loadingPEM("SSL_CTX_load_verify_locations(\(caFile))") { SSL_CTX_load_verify_locations(context, caFile, nil) }
        } else {
            try loadingPEM("SSL_CTX_set_default_verify_paths") { SSL_CTX_set_default_verify_paths(context) }
        }
    }

    deinit { SSL_CTX_free(context) }

    /// A fresh `SSL` for one connection to `host`: SNI set (for names, not
    /// addresses) and the certificate's name or address checked against it.
    func makeSSL(host: String) throws(TransportError) -> OpaquePointer {
        let ssl = try CCheck.pointer(SSL_new(context), "SSL_new")
        do {
            if Self.isIPAddress(host) {
                try CCheck.openSSL(X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host), "X509_VERIFY_PARAM_set1_ip_asc")
            } else {
                try CCheck.openSSL(SSL_set1_host(ssl, host), "SSL_set1_host")
                try CCheck.openSSL(gw_ssl_set_sni_host_name(ssl, host), "SSL_set_tlsext_host_name")
            }
        } catch {
            SSL_free(ssl)
            throw error
        }
        return ssl
    }

    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || (host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
    }
}

/// An OpenSSL server context from PEM certificate chain and key files
/// (the TLS test upstream uses it).
public final class TLSServerContext: @unchecked Sendable {
    // @unchecked: configured once in init, then only used by SSL_new.
    let context: OpaquePointer

    public init(certificateChainFile: String, privateKeyFile: String) throws(TransportError) {
        let context = try CCheck.pointer(SSL_CTX_new(TLS_server_method()), "SSL_CTX_new")
        self.context = context
        try CCheck.openSSL(gw_ssl_ctx_set_min_tls12(context), "SSL_CTX_set_min_proto_version")
        gw_ssl_ctx_harden(context)
        try loadingPEM("SSL_CTX_use_certificate_chain_file(\(certificateChainFile))") { SSL_CTX_use_certificate_chain_file(context, certificateChainFile) }
        try loadingPEM("SSL_CTX_use_PrivateKey_file(\(privateKeyFile))") { SSL_CTX_use_PrivateKey_file(context, privateKeyFile, SSL_FILETYPE_PEM) }
        try CCheck.openSSL(SSL_CTX_check_private_key(context), "SSL_CTX_check_private_key")
    }

    deinit { SSL_CTX_free(context) }

    package func makeSSL() -> OpaquePointer? { SSL_new(context) }
}
