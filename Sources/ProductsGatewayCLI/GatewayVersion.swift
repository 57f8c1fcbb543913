/// The released version, printed by `--version`.
enum GatewayVersion {
    static let current = "0.1.0"
}
