import Glibc

/// Random trace and span ids from a per-thread xoshiro256** generator,
/// seeded once per thread from the system's secure source (`getrandom`).
/// Reading the system source per id costs a system call each; this costs a
/// thread-specific load and a few multiplications, and allocates nothing
/// after a thread's first id.
public enum TraceIDGenerator {
    /// A fresh trace id, never all zero.
    public static func traceID() -> TraceID {
        let generator = ThreadGenerator.current
        while true {
            let id = TraceID(high: generator.next(), low: generator.next())
            if id.isValid { return id }
        }
    }

    /// A fresh span id, never zero.
    public static func spanID() -> SpanID {
        let generator = ThreadGenerator.current
        while true {
            let id = SpanID(generator.next())
            if id.isValid { return id }
        }
    }
}

/// xoshiro256** (Blackman and Vigna), one per thread.
private final class ThreadGenerator {
    // Unchecked: one thread's own object (its thread-specific slot), never
    // shared; checked, each of the four updates of `next()` cost a runtime
    // exclusivity check, twelve per call's ids.
    @exclusivity(unchecked) private var s0: UInt64
    @exclusivity(unchecked) private var s1: UInt64
    @exclusivity(unchecked) private var s2: UInt64
    @exclusivity(unchecked) private var s3: UInt64

    private init() {
        var system = SystemRandomNumberGenerator()
        repeat {
            s0 = system.next()
            s1 = system.next()
            s2 = system.next()
            s3 = system.next()
        } while s0 | s1 | s2 | s3 == 0
    }

    /// The calling thread's generator, made on its first use and freed
    /// when the thread ends.
    static var current: ThreadGenerator {
        if let existing = pthread_getspecific(threadKey) {
            return Unmanaged<ThreadGenerator>.fromOpaque(existing).takeUnretainedValue()
        }
        let made = ThreadGenerator()
        pthread_setspecific(threadKey, Unmanaged.passRetained(made).toOpaque())
        return made
    }

    @inline(__always)
    func next() -> UInt64 {
        let result = (s1 &* 5).rotatedLeft(by: 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = s3.rotatedLeft(by: 45)
        return result
    }
}

private extension UInt64 {
    @inline(__always)
    func rotatedLeft(by count: UInt64) -> UInt64 { (self << count) | (self >> (64 - count)) }
}

/// The key of each thread's generator; its destructor releases it.
private let threadKey: pthread_key_t = {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { pointer in
        guard let pointer else { return }
        Unmanaged<ThreadGenerator>.fromOpaque(pointer).release()
    }
    precondition(status == 0, "pthread_key_create failed: \(status)")
    return key
}()
