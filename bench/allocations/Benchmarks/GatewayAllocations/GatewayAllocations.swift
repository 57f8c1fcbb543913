import BenchSupport
import Benchmark
import ProductsDomain

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
        _ = await call(hot, body: requestBody)
    })) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await call(hot, body: requestBody))
        }
    }

    // Nothing kept: every call claims, fetches from the catalog, merges.
    let cold = makeServer(maxAgeSeconds: nil)
    Benchmark("products.fetch no cache, 5 ids") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await call(cold, body: requestBody))
        }
    }

    // Nothing kept, and the source reads the TLS upstream's body on every
    // fetch: the cold path of `bench/run` without the HTTP exchanges.
    let upstream = makeServer(source: UpstreamBodySource())
    Benchmark("products.fetch no cache, upstream body, 5 ids") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await call(upstream, body: upstreamRequestBody))
        }
    }

    // What the harness allocates per iteration of a synchronous
    // benchmark: subtract it from the two rows below.
    Benchmark("harness floor (sync no-op)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(syncNoop())
        }
    }

    // The upstream's part of a call without cache: the TLS upstream's
    // 5-product body read into a page.
    Benchmark("upstream body parse, 5 products") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try? UpstreamProductsPage.parse(upstreamBody))
        }
    }

    // The same body read and its products normalised and encoded, as an
    // upstream `200` becomes a `SourcePage`.
    Benchmark("upstream body to SourcePage, 5 products") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(sourcePage(fromUpstreamBody: upstreamBody))
        }
    }
}

/// An async call that does nothing, for the harness floor.
@inline(never)
func noop() async -> Int {
    0
}

/// A call that does nothing, for the synchronous harness floor.
@inline(never)
func syncNoop() -> Int {
    0
}
