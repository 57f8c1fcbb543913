import Foundation
import GatewayService
import Testing

/// Every route the server registers is in `openapi/openapi.yaml`, with its
/// method, and the document describes no other route.
@Suite struct OpenAPIRoutesTests {
    /// `path:method` pairs under `paths:`, read from the document's layout
    /// (two-space path keys, four-space operation keys).
    static func documentedRoutes() throws -> Set<String> {
        let file = #filePath.replacingOccurrences(of: "Tests/IntegrationTests/OpenAPIRoutesTests.swift", with: "openapi/openapi.yaml")
        let operations: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
        var routes = Set<String>()
        var inPaths = false
        var path: String?
        for line in try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" "), !line.isEmpty { inPaths = line == "paths:" }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":"),
                      let path, operations.contains(String(line.dropFirst(4).dropLast())) {
                routes.insert("\(path):\(line.dropFirst(4).dropLast())")
            }
        }
        return routes
    }

    @Test func documentAndServerHaveTheSameRoutes() throws {
        let served = Set(GatewayRoutes.all.map { "\($0.path):\($0.method.lowercased())" })
        #expect(try Self.documentedRoutes() == served)
        #expect(served.count == 5)
    }
}
