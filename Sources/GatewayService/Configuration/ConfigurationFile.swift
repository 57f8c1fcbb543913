#if canImport(Glibc)
import Glibc
#endif

/// A file named by a setting (a secret, the CA bundle, the catalog), read
/// with a cap, and with a failure worded so an operator can fix it: the
/// system's reason, and for a refused read the file's mode and owner beside
/// the uid the gateway runs as (10001 in the container image), which is what
/// a mounted secret most often gets wrong.
enum ConfigurationFile {
    /// Files larger than this are refused: settings and secrets are small,
    /// and a path pointing at something huge is a mistake.
    static let maxBytes = 16 << 20

    /// The file's bytes.
    /// - Throws: ``ConfigurationError`` naming `variable`.
    static func read(_ path: String, for variable: ConfigurationVariable) throws(ConfigurationError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure(path, errno, variable) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(path, errno, variable)
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
            guard bytes.count <= maxBytes else {
                throw ConfigurationError(variable: variable.rawValue, message: "file '\(URLRedaction.redactingUserinfo(path))' is larger than \(maxBytes) bytes")
            }
        }
    }

    /// Fails unless the file can be opened for reading.
    static func requireReadable(_ path: String, for variable: ConfigurationVariable) throws(ConfigurationError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure(path, errno, variable) }
        close(descriptor)
    }

    /// `cannot read file 'P': Permission denied (mode 0600, owner uid 0;
    /// the gateway runs as uid 10001 ...)`.
    static func failure(_ path: String, _ code: Int32, _ variable: ConfigurationVariable) -> ConfigurationError {
        var message = "cannot read file '\(URLRedaction.redactingUserinfo(path))': \(String(cString: strerror(code)))"
        if code == EACCES {
            var status = stat()
            if stat(path, &status) == 0 {
                let mode = String(status.st_mode & 0o7777, radix: 8)
                message += " (the file has mode 0\(mode), owner uid \(status.st_uid), group \(status.st_gid); the gateway runs as uid \(getuid()), groups \(getgid()): "
                message += "make it readable by that user, e.g. mode 0440 with group 10001, which Kubernetes gives a Secret volume with defaultMode 0440 and fsGroup 10001)"
            } else {
                message += " (the gateway runs as uid \(getuid()): a folder on the path may not let it through)"
            }
        }
        return ConfigurationError(variable: variable.rawValue, message: message)
    }
}
