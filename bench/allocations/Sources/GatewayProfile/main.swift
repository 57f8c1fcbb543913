import BenchSupport
import Dispatch
import Foundation
import GatewayService
import MemoryTier
import JSONRPC
import ProductsDomain

// Runs the benchmark's calls in a plain loop, for an instruction profiler:
//   valgrind --tool=callgrind .build/release/GatewayProfile hot 2000
// The per-call cost is the difference between two counts (say 1 and 2001
// calls) divided by the difference in calls, so start-up cancels out.
//
// The loop runs in a task while the main thread waits on a semaphore:
// valgrind 3.19 crashes on the signal-driven main queue that top-level
// `await` would run on.

let arguments = CommandLine.arguments
let variant = arguments.count > 1 ? arguments[1] : "hot"
let iterations = arguments.count > 2 ? Int(arguments[2]) ?? 2000 : 2000
guard ["hot", "cold", "upstream", "parse", "page", "page-via-items"].contains(variant) else {
    fatalError("usage: GatewayProfile hot|cold|upstream|parse|page|page-via-items [iterations]")
}

/// `parse`: the upstream body read into a page; `page`: its products
/// transcoded to their encoded bytes, as the gateway reads a `200`, into a
/// `SourcePage`; `page-via-items`: the same `SourcePage` the way before the
/// transcoding (the page's items made, then each normalised and encoded).
@inline(never)
func profiledParses(_ count: Int, variant: String) -> Int {
    var products = 0
    for _ in 0 ..< count {
        switch variant {
        case "page":
            products += sourcePage(fromUpstreamBody: upstreamBody)?.encodedProducts.count ?? 0
        case "page-via-items":
            products += (try? UpstreamProductsPage.parse(upstreamBody)).map { SourcePage(page: $0, maxAgeSeconds: nil) }?.encodedProducts.count ?? 0
        default:
            products += (try? UpstreamProductsPage.parse(upstreamBody))?.items.count ?? 0
        }
    }
    return products
}

if ["parse", "page", "page-via-items"].contains(variant) {
    // The first parse pays for every lazy global.
    _ = profiledParses(1, variant: variant)
    let products = profiledParses(iterations, variant: variant)
    print("\(variant): \(iterations) bodies, \(products / max(iterations, 1)) products each")
    exit(0)
}

@inline(never)
func profiledCalls(_ server: JSONRPCServer<RPCCallContext>, _ count: Int) async -> Int {
    let request = variant == "upstream" ? upstreamRequestBody : requestBody
    var bytes = 0
    for _ in 0 ..< count {
        if case .json(let body) = await call(server, body: request) {
            bytes += body.count
        }
    }
    return bytes
}

let finished = DispatchSemaphore(value: 0)
// Detached: a task made here would inherit the main actor, whose thread is
// the one waiting below.
Task.detached { [variant, iterations, finished] in
    let server = variant == "upstream" ? makeServer(source: UpstreamBodySource()) : makeServer(maxAgeSeconds: variant == "hot" ? 30 : nil)
    // The first call fills the cache (hot) and every lazy global.
    _ = await profiledCalls(server, 1)
    let written = await profiledCalls(server, iterations)
    print("\(variant): \(iterations) calls, \(written / max(iterations, 1)) response bytes each")
    finished.signal()
}
finished.wait()
