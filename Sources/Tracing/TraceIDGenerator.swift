import Glibc

/// Random trace and span ids from a per-thread xoshiro256** generator,
/// seeded once per thread from the system's secure source (`getrandom`).
/// Reading the system source per id costs a system call each; this costs a
/// thread-specific load and a few multiplications, and allocates nothing
/// after a thread's first id.
public enum TraceIDGenerator {
    /// A fresh trace id, never all zero.
    public static func traceID() -> TraceID {
        let state = GeneratorState.current
        return traceID(state)
    }

    /// A fresh span id, never zero.
    public static func spanID() -> SpanID {
        let state = GeneratorState.current
        return spanID(state)
    }

    /// A fresh trace id and a fresh span id: a new trace's first span, with
    /// one thread-specific load for both.
    public static func traceAndSpanID() -> (TraceID, SpanID) {
        let state = GeneratorState.current
        return (traceID(state), spanID(state))
    }

    @inline(__always)
    private static func traceID(_ state: UnsafeMutablePointer<GeneratorState>) -> TraceID {
        while true {
            let id = TraceID(high: state.pointee.next(), low: state.pointee.next())
            if id.isValid { return id }
        }
    }

    @inline(__always)
    private static func spanID(_ state: UnsafeMutablePointer<GeneratorState>) -> SpanID {
        while true {
            let id = SpanID(state.pointee.next())
            if id.isValid { return id }
        }
    }
}

/// xoshiro256** (Blackman and Vigna), one per thread.
///
/// The state is plain memory behind a thread-specific pointer, not an
/// object: reaching it costs no reference count (a class cost a retain and
/// a release per id, measured on the hot path), and only its own thread
/// ever touches it.
private struct GeneratorState {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    private init() {
        var system = SystemRandomNumberGenerator()
        repeat {
            s0 = system.next()
            s1 = system.next()
            s2 = system.next()
            s3 = system.next()
        } while s0 | s1 | s2 | s3 == 0
    }

    /// The calling thread's state, made on its first use and freed when
    /// the thread ends.
    static var current: UnsafeMutablePointer<GeneratorState> {
        let key = threadKey
        if let existing = pthread_getspecific(key) {
            return existing.assumingMemoryBound(to: GeneratorState.self)
        }
        let made = UnsafeMutablePointer<GeneratorState>.allocate(capacity: 1)
        made.initialize(to: GeneratorState())
        pthread_setspecific(key, made)
        return made
    }

    @inline(__always)
    mutating func next() -> UInt64 {
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

/// The key of each thread's generator state; its destructor frees it.
private let threadKey: pthread_key_t = {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { pointer in
        guard let pointer else { return }
        let state = pointer.assumingMemoryBound(to: GeneratorState.self)
        state.deinitialize(count: 1)
        state.deallocate()
    }
    precondition(status == 0, "pthread_key_create failed: \(status)")
    return key
}()
