import BenchSupport
import Benchmark

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .instructions, .throughput],
        scalingFactor: .one,
        maxDuration: .seconds(3),
        maxIterations: 20_000
    )

    // What the harness itself allocates per iteration of an async
    // benchmark: subtract it from the rows below.
    Benchmark("harness floor (async no-op)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await noop())
        }
    }

    // Answered from memory after the first call (setup makes that call).
    let hot = makeServer(maxAgeSeconds: 30)
    Benchmark("products.fetch cache hit, 5 ids", configuration: .init(setup: {
        _ = await hot.handle(body: requestBody, context: requestContext)
    })) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await hot.handle(body: requestBody, context: requestContext))
        }
    }

    // Nothing kept: every call claims, fetches from the catalog, merges.
    let cold = makeServer(maxAgeSeconds: nil)
    Benchmark("products.fetch no cache, 5 ids") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await cold.handle(body: requestBody, context: requestContext))
        }
    }
}

/// An async call that does nothing, for the harness floor.
@inline(never)
func noop() async -> Int {
    0
}
