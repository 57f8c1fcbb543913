/// A value that only its loop's thread may touch, checked on every access
/// (as swift-nio's `NIOLoopBound`): the one audited way for loop-confined
/// state to cross a `@Sendable` boundary (a closure queued on the loop, a
/// completion handed to another thread and brought back). Anything that
/// reads or writes ``value`` off the loop thread crashes at once, in every
/// build, instead of racing.
///
/// A struct: copying it copies the value. For state that several
/// callbacks share and change, use ``LoopBoundBox``.
public struct LoopBound<Value>: @unchecked Sendable {
    // @unchecked: `storage` is read and written only after
    // `loop.preconditionInEventLoop()`, so only the loop's thread ever
    // touches it (or, once the loop has stopped for good, the one thread
    // that runs what it left).

    /// The loop whose thread owns the value.
    public let loop: EventLoop
    @usableFromInline
    var storage: Value

    /// Binds `value`, made on `loop`'s thread, to `loop`.
    @inlinable
    public init(_ value: Value, loop: EventLoop) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.storage = value
    }

    /// Binds `value`, made on any thread, to `loop`: `sending` proves that
    /// nothing else holds it, so the loop becomes its only owner.
    @inlinable
    public init(sending value: sending Value, loop: EventLoop) {
        self.loop = loop
        self.storage = value
    }

    /// The value; on the loop's thread only.
    @inlinable
    public var value: Value {
        get {
            loop.preconditionInEventLoop()
            return storage
        }
        _modify {
            loop.preconditionInEventLoop()
            yield &storage
        }
        set {
            loop.preconditionInEventLoop()
            storage = newValue
        }
    }
}

/// A box holding state that only its loop's thread may touch, checked on
/// every access (as swift-nio's `NIOLoopBoundBox`): what a loop-confined
/// object shares between its callbacks, held by reference so every
/// callback sees one value.
public final class LoopBoundBox<Value>: @unchecked Sendable {
    // @unchecked: as `LoopBound`, `storage` is touched only after the
    // loop-thread check.

    /// The loop whose thread owns the value.
    public let loop: EventLoop
    @usableFromInline
    var storage: Value

    /// Boxes `value`, made on `loop`'s thread.
    @inlinable
    public init(_ value: Value, loop: EventLoop) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.storage = value
    }

    /// Boxes `value`, made on any thread (before the loop runs, at start-up):
    /// `sending` proves that nothing else holds it.
    @inlinable
    public init(sending value: sending Value, loop: EventLoop) {
        self.loop = loop
        self.storage = value
    }

    /// The value; on the loop's thread only.
    @inlinable
    public var value: Value {
        get {
            loop.preconditionInEventLoop()
            return storage
        }
        _modify {
            loop.preconditionInEventLoop()
            yield &storage
        }
        set {
            loop.preconditionInEventLoop()
            storage = newValue
        }
    }
}
