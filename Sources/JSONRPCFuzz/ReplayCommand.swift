#if !JSONRPC_FUZZER
import Foundation

/// Without libFuzzer (a plain `swift build`), the target is a program that
/// replays inputs through the fuzz checks: `jsonrpc-fuzz FILE_OR_DIR...`.
/// It keeps the target compiling in every build and replays a crash input
/// found by `.ci/fuzz` without the fuzzer runtime.
@main
struct ReplayCommand {
    static func main() {
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            FileHandle.standardError.write(Data("usage: jsonrpc-fuzz FILE_OR_DIRECTORY...\n".utf8))
            exit(2)
        }
        var count = 0
        for path in paths {
            for file in files(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    FileHandle.standardError.write(Data("jsonrpc-fuzz: cannot read \(file)\n".utf8))
                    exit(1)
                }
                let bytes = [UInt8](data)
                _ = bytes.withUnsafeBufferPointer { fuzzJSONRPC($0.baseAddress, $0.count) }
                count += 1
            }
        }
        print("jsonrpc-fuzz: \(count) inputs passed")
    }

    /// `path` itself, or the regular files directly inside it when it is a
    /// directory, sorted.
    private static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            return [path]
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.sorted().map { "\(path)/\($0)" }.filter { file in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }
}
#endif
