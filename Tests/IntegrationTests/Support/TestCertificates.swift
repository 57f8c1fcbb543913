import Foundation

/// Certificates made with the `openssl` command line at test time: a CA, a
/// `localhost` certificate it signed, one for another host name, and a
/// second, unrelated CA with its own `localhost` certificate.
struct TestCertificates: Sendable {
    let directory: String
    var caFile: String { directory + "/ca.pem" }
    var localhostCert: String { directory + "/localhost.pem" }
    var localhostKey: String { directory + "/localhost.key" }
    var otherHostCert: String { directory + "/other.pem" }
    var otherHostKey: String { directory + "/other.key" }
    var rogueCAFile: String { directory + "/rogue-ca.pem" }
    var rogueLocalhostCert: String { directory + "/rogue-localhost.pem" }
    var rogueLocalhostKey: String { directory + "/rogue-localhost.key" }

    /// Made once per test process.
    static let shared: TestCertificates = {
        do { return try make() } catch { fatalError("cannot make test certificates: \(error)") }
    }()

    static func make() throws -> TestCertificates {
        let directory = NSTemporaryDirectory() + "gateway-certs-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let script = """
        set -e
        cd '\(directory)'
        ca() { openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" -keyout "$2.key" -out "$2.pem" \
               -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null; }
        leaf() { # name ca san
          openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr" 2>/dev/null
          printf "subjectAltName=%s\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n" "$3" > "$1.ext"
          openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
        }
        ca "Gateway Test CA" ca
        ca "Rogue Test CA" rogue-ca
        leaf localhost ca "DNS:localhost,IP:127.0.0.1"
        leaf other ca "DNS:other.example"
        leaf rogue-localhost rogue-ca "DNS:localhost,IP:127.0.0.1"
        """
        let status = try ProcessLaunch.run("/bin/sh", ["-c", script]).status
        guard status == 0 else { throw TestHTTPError("openssl failed with status \(status)") }
        return TestCertificates(directory: directory)
    }
}
