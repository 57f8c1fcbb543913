#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Catalog {
    /// Reads and parses a catalog file (`GATEWAY_CATALOG`).
    /// - Parameter path: The file's path.
    /// - Throws: `CatalogError`: `.unreadable` naming the file, `.tooLarge` before
    ///   the file is read when its size is over `maxBytes`, or a parse error.
    public init(contentsOfFile path: String) throws(CatalogError) {
        let bytes: [UInt8]
        do {
            // Checked before reading so that a huge file is not loaded into memory; the
            // symlink is resolved first because mounted config files are often links.
            let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
            let attributes = try FileManager.default.attributesOfItem(atPath: target)
            if let size = (attributes[.size] as? any BinaryInteger).map({ Int(clamping: $0) }), size > Self.maxBytes {
                throw CatalogError.tooLarge(byteCount: size, limit: Self.maxBytes)
            }
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch let error as CatalogError {
            throw error
        } catch {
            throw .unreadable(file: path, detail: "\(error)")
        }
        try self.init(json: bytes)
    }
}
