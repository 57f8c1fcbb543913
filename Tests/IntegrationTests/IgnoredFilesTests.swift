import Foundation
import Testing

/// What the README and clients/README.md make in the checkout stays out of
/// git and out of the image's build context: the local upstream's private
/// key and certificate, the clients' venv, a hand-written BUILD_COMMIT.
@Suite struct IgnoredFilesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func lines(_ name: String) throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent(name), encoding: .utf8)
        return Set(text.split(separator: "\n").map(String.init))
    }

    @Test func dockerignoreKeepsKeysAndVenvsOut() throws {
        let patterns = try Self.lines(".dockerignore")
        for pattern in ["*.pem", "**/*.pem", "*.key", "**/*.key", ".venv", "**/.venv", "BUILD_COMMIT"] {
            #expect(patterns.contains(pattern), ".dockerignore has no \(pattern)")
        }
    }

    /// `git check-ignore` says so for each path (skipped outside a checkout).
    @Test(arguments: ["upstream-key.pem", "upstream.pem", ".venv/bin/python", "clients/python/.venv/bin/python", "BUILD_COMMIT"])
    func gitIgnores(path: String) async throws {
        guard FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(".git").path) else { return }
        let (child, _, stdout) = try ChildProcess.spawn(
            "/usr/bin/git", arguments: ["-C", Self.root.path, "check-ignore", "--no-index", path], environment: GatewayProcess.baseEnvironment()
        )
        #expect(await child.exitStatus() == 0, "git does not ignore \(path)")
        await stdout.waitForEnd()
        #expect(stdout.lines == [path])
    }
}
