/// What `--version` prints: the released version and the commit the binary
/// was built from (``BuildCommit``, written by the `BuildCommit` plugin).
enum GatewayVersion {
    /// The released version.
    static let release = "0.1.0"
    /// `0.1.0 (commit 1a2b3c4d5e6f)`; `-dirty` after the commit when the
    /// build had uncommitted changes, `unknown` when no commit was known.
    static let current = "\(release) (commit \(BuildCommit.value))"
}
