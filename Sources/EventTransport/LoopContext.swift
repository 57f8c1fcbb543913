import Dispatch
import Synchronization

/// What one loop holds per component (as Envoy's `ThreadLocal::TypedSlot`):
/// each component that keeps something per loop (its Redis connection, its
/// end-of-turn batches, its merge buffer, its upstream pool) allocates a
/// ``LoopSlot`` once, at start-up, and fills it on every loop; a call
/// reads its loop's value from the loop it runs on (``EventLoop/context``,
/// which the call's loop carries), by index.
///
/// Confined to its loop: read and written on the loop's thread only
/// (checked), so no lock, and a read is an array index, not a hash.
public final class LoopContext: @unchecked Sendable {
    // @unchecked: `values` is touched only after `loop.preconditionInEventLoop()`
    // (or, once the loop has stopped for good, by the one thread that runs
    // what it left), so only the loop's thread ever reads or writes it.

    /// The loop owns its context: unowned, or the two would keep each
    /// other; set once, in the loop's init (which makes the context before
    /// it can hand out `self`).
    private unowned(unsafe) var loop: EventLoop?
    /// By slot index; a slot never filled on this loop is nil or past the end.
    /// No dynamic exclusivity check: only the loop's thread touches it
    /// (checked), and no access outlives the one statement that makes it,
    /// so two can never overlap (the check was a runtime call per read,
    /// several per call).
    @exclusivity(unchecked)
    private var values: ContiguousArray<AnyObject?> = []

    init() {}

    func bind(to loop: EventLoop) {
        self.loop = loop
    }

    /// `slot`'s value on this loop; nil when it was not filled here (a loop
    /// the component does not run on). On the loop only.
    @inlinable
    public subscript<Value>(slot: LoopSlot<Value>) -> Value? {
        value(at: slot.index).map { unsafeDowncast($0, to: Value.self) }
    }

    @usableFromInline
    func value(at index: Int) -> AnyObject? {
        loop.unsafelyUnwrapped.preconditionInEventLoop()
        return index < values.count ? values[index] : nil
    }

    /// Sets the value at `index`. On the loop only.
    fileprivate func set(_ value: AnyObject?, at index: Int) {
        loop.unsafelyUnwrapped.preconditionInEventLoop()
        if index >= values.count {
            guard value != nil else { return }
            values.append(contentsOf: repeatElement(nil, count: index + 1 - values.count))
        }
        values[index] = value
    }
}

/// One component's value on every loop it runs on (as Envoy's
/// `TypedSlot<T>`): allocated once, filled per loop with
/// ``fill(_:with:)``, read on a loop through ``EventLoop/context``.
/// When the slot goes (its component has), each loop drops its value.
///
/// Its index is never given to another slot, so a value can never be read
/// back as another slot's type; slots are made at start-up (a few per
/// process, more only in tests), so the loops' tables stay small.
public final class LoopSlot<Value: AnyObject>: Sendable {
    @usableFromInline
    let index: Int
    /// The loops holding a value, for the slot's end.
    private let filled = Mutex<[EventLoop]>([])

    public init() {
        index = slotIndices.add(1, ordering: .relaxed).oldValue
    }

    deinit {
        let index = self.index
        for loop in filled.withLock({ $0 }) {
            // A stopped loop runs nothing more: its context is ours to clear.
            if !loop.execute({ loop.context.set(nil, at: index) }) {
                loop.context.set(nil, at: index)
            }
        }
    }

    /// Puts `value` in `loop`'s context, and returns once it is there, so
    /// every read on `loop` after this finds it. From any thread (from
    /// another than `loop`'s, it waits for one turn of `loop`); `value`
    /// is `loop`'s alone from then on.
    public func fill(_ loop: EventLoop, with value: sending Value) {
        filled.withLock { $0.append(loop) }
        let index = self.index
        if loop.inEventLoop {
            loop.context.set(value, at: index)
            return
        }
        let bound = LoopBound(sending: value, loop: loop)
        let done = DispatchSemaphore(value: 0)
        let queued = loop.execute {
            loop.context.set(bound.value, at: index)
            done.signal()
        }
        if queued {
            done.wait()
        } else {
            // Stopped between the two checks: nothing runs it any more.
            loop.context.set(bound.value, at: index)
        }
    }

    /// `loop`'s value; on `loop` only.
    @inlinable
    public func value(on loop: EventLoop) -> Value? {
        loop.context[self]
    }
}

/// The next slot's index, over the process.
private let slotIndices = Atomic<Int>(0)
