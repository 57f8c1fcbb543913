/// What one loop gathers during a turn and hands over, all at once, when
/// the turn's callbacks are done: the first element queues one closure on
/// the loop, which runs after every callback already queued (every
/// request read in the turn, every upstream answer that came in it), and
/// passes the whole turn to ``flush``. The shared tier's lookups and
/// releases go out this way, one script per turn each, and so does the
/// merge buffer's end-of-turn flush.
///
/// Confined to its loop (checked: ``add(_:)`` asserts it); the one mutable
/// state is touched only there, which is what makes it `Sendable`.
public final class LoopTurnBatch<Element: Sendable>: @unchecked Sendable {
    public let loop: EventLoop
    /// Takes a turn's elements; set once, before the loop runs or on the
    /// loop before the first ``add(_:)`` (only the loop reads it).
    public var flush: (@Sendable ([Element]) -> Void)?
    // Unchecked exclusivity: touched on the loop only, by statements that
    // call nothing back (the flush gets the elements moved out), so no two
    // accesses overlap; the checks were runtime calls on every add.
    @exclusivity(unchecked)
    private var elements: [Element] = []
    @exclusivity(unchecked)
    private var armed = false

    public init(loop: EventLoop) {
        self.loop = loop
    }

    /// Adds `element` to this turn's; ``flush`` gets them all when the
    /// turn ends. False when the loop cannot run the flush (it has
    /// stopped, or no flush is set): the caller sends it alone.
    public func add(_ element: Element) -> Bool {
        loop.preconditionInEventLoop()
        guard flush != nil else { return false }
        elements.append(element)
        guard !armed else { return true }
        armed = true
        let queued = loop.execute { [self] in
            armed = false
            let batch = elements
            elements = []
            flush?(batch)
        }
        if !queued {
            armed = false
            elements.removeLast()
        }
        return queued
    }
}
