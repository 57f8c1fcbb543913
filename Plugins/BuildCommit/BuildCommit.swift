import Foundation
import PackagePlugin

/// Writes `BuildCommit.swift` into the target: the commit the binary is
/// built from, which `products-gateway --version` prints.
///
/// The commit is the first line of `BUILD_COMMIT` at the package's root
/// when there is one (the Dockerfile writes it from its `GATEWAY_COMMIT`
/// build argument: the image's build context has no `.git`), else
/// `git rev-parse --short=12 HEAD`, else `unknown`. The file is written
/// again when HEAD moves (git appends to `logs/HEAD` on every commit,
/// checkout or reset) or a file is added to or removed from the package's
/// root (`BUILD_COMMIT` among them: write it as a new file), not on every
/// build, so a build at the same commit recompiles little. Uncommitted
/// changes are not marked: a build does not look at the working tree.
@main
struct BuildCommitPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let package = context.package.directoryURL
        let output = context.pluginWorkDirectoryURL.appending(path: "BuildCommit.swift")
        return [.buildCommand(
            displayName: "Recording the commit products-gateway is built from",
            executable: URL(filePath: "/bin/sh"),
            arguments: ["-c", Self.script, "build-commit", package.path, output.path],
            inputFiles: Self.inputs(package: package),
            outputFiles: [output]
        )]
    }

    /// What, when it changes, may mean another commit: the package's root
    /// folder (a `BUILD_COMMIT` written or removed changes its time; the
    /// file itself is not an input, since an input that goes missing stops
    /// the build), and git's `HEAD` and its log (in a worktree, `.git` is a
    /// file naming the worktree's own git directory).
    static func inputs(package: URL) -> [URL] {
        let files = FileManager.default
        var inputs = [package]
        var gitDirectory = package.appending(path: ".git")
        var isDirectory: ObjCBool = false
        guard files.fileExists(atPath: gitDirectory.path, isDirectory: &isDirectory) else { return inputs }
        if !isDirectory.boolValue {
            guard let text = try? String(contentsOf: gitDirectory, encoding: .utf8),
                  let line = text.split(separator: "\n").first, line.hasPrefix("gitdir: ") else { return inputs }
            let path = String(line.dropFirst("gitdir: ".count))
            gitDirectory = path.hasPrefix("/") ? URL(filePath: path) : package.appending(path: path)
        }
        inputs += [gitDirectory.appending(path: "HEAD"), gitDirectory.appending(path: "logs/HEAD")].filter { files.fileExists(atPath: $0.path) }
        return inputs
    }

    /// `$1`: the package's root; `$2`: the file to write.
    static let script = #"""
        set -eu
        package=$1 file=$2
        if [ -s "$package/BUILD_COMMIT" ]; then
            commit=$(head -n 1 "$package/BUILD_COMMIT" | tr -cd '0-9A-Za-z._+-' | cut -c1-64)
        else
            commit=$(git -C "$package" rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
        fi
        [ -n "$commit" ] || commit=unknown
        printf '%s\n' "/// Written by Plugins/BuildCommit." "enum BuildCommit {" "    /// The commit this binary was built from." "    static let value = \"$commit\"" "}" > "$file"
        """#
}
