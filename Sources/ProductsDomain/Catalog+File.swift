#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Catalog {
    /// Reads and parses a catalog file (`GATEWAY_CATALOG`).
    /// - Parameter path: The file's path; a symbolic link is followed.
    /// - Throws: `CatalogError`: `.unreadable` naming the file (missing, a
    ///   directory, not readable), `.tooLarge` before the file is read when its
    ///   size is over `maxBytes`, or a parse error.
    public init(contentsOfFile path: String) throws(CatalogError) {
        let files = FileManager.default
        // Mounted config files (Kubernetes ConfigMaps, secrets) are usually links,
        // and the size check must see the target's size.
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard files.fileExists(atPath: target) else {
            throw .unreadable(file: path, detail: "no such file")
        }
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try files.attributesOfItem(atPath: target)
        } catch {
            throw .unreadable(file: path, detail: "\(error)")
        }
        if attributes[.type] as? FileAttributeType == .typeDirectory {
            throw .unreadable(file: path, detail: "it is a directory")
        }
        guard files.isReadableFile(atPath: target) else {
            throw .unreadable(file: path, detail: "permission denied")
        }
        // Checked before reading so that a huge file is not loaded into memory;
        // `init(json:)` checks again in case the file grew meanwhile.
        if let size = (attributes[.size] as? any BinaryInteger).map({ Int(clamping: $0) }), size > Self.maxBytes {
            throw .tooLarge(byteCount: size, limit: Self.maxBytes)
        }
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: target)))
        } catch {
            throw .unreadable(file: path, detail: "\(error)")
        }
        try self.init(json: bytes)
    }
}
