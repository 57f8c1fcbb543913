package import ProductsDomain

/// Which fetches of one event loop go upstream together, pure: fetches in,
/// upstream calls out. Fetches of one scope gathered in one loop turn (or,
/// with a window, within it of the first) are packed into calls of at most
/// `maxIdentifiers` identifiers, each fetch whole, first fit in arrival
/// order: a fetch is answered by exactly one upstream call, so its outcome
/// is that call's, as if it had asked alone.
///
/// No clock, no I/O and no lock: ``LoopMergeBuffer`` runs it on its loop,
/// arms what ``add(_:scope:identifierCount:)`` asks for, and sends what the
/// flushes hand back; tests run it as a table.
///
/// A flush is tied to the generation it was armed for: once the window of
/// a generation has ended, an end-of-turn flush still queued for it finds
/// nothing, so a fetch gathered after that is never sent before its turn
/// ends or its own window does.
package struct MergeBufferStateMachine<Member> {
    /// What the driver must arm after an ``add(_:scope:identifierCount:)``.
    package struct Arming: Equatable {
        /// Pass it back to the flush it arms.
        package var generation: Int
        /// Queue ``turnEnded(generation:)`` to run once the loop has run
        /// the callbacks of this turn.
        package var endOfTurn = false
        /// Arm a timer that calls ``windowEnded(generation:)`` after this.
        package var window: Duration?

        package var isEmpty: Bool { !endOfTurn && window == nil }
    }

    /// One upstream call: whole fetches of one scope, in arrival order.
    package struct Call {
        package let scope: FetchScope
        package var members: [Member]
        package var identifierCount: Int
    }

    /// `UPSTREAM_MAX_IDS`.
    package let maxIdentifiers: Int
    /// `GATEWAY_MERGE_WINDOW_US`; zero merges what one turn gathers.
    package let window: Duration

    /// The calls being filled, in the order they were opened.
    private var open: [Call] = []
    private var generation = 0
    private var turnArmed = false
    private var windowArmed = false

    package init(maxIdentifiers: Int, window: Duration) {
        precondition(maxIdentifiers > 0, "an upstream call holds at least one identifier")
        self.maxIdentifiers = maxIdentifiers
        self.window = max(.zero, window)
    }

    /// Nothing is gathered.
    package var isEmpty: Bool { open.isEmpty }

    /// A fetch of `identifierCount` identifiers of `scope` joins the first
    /// call of its scope with room for it, or opens one.
    package mutating func add(_ member: Member, scope: FetchScope, identifierCount: Int) -> Arming {
        var filled = false
        if let index = open.firstIndex(where: { $0.scope == scope && $0.identifierCount + identifierCount <= maxIdentifiers }) {
            open[index].members.append(member)
            open[index].identifierCount += identifierCount
            filled = open[index].identifierCount >= maxIdentifiers
        } else {
            open.append(Call(scope: scope, members: [member], identifierCount: identifierCount))
            filled = identifierCount >= maxIdentifiers
        }
        var arming = Arming(generation: generation)
        if window == .zero {
            arming.endOfTurn = !turnArmed
        } else {
            if !windowArmed { arming.window = window }
            // A full call gains nothing by waiting for company.
            arming.endOfTurn = filled && !turnArmed
        }
        if arming.endOfTurn { turnArmed = true }
        if arming.window != nil { windowArmed = true }
        return arming
    }

    /// The loop ran this turn's callbacks: without a window, every call
    /// goes out; with one, only the full ones (the rest wait for it).
    package mutating func turnEnded(generation armed: Int) -> [Call] {
        guard armed == generation else { return [] }
        turnArmed = false
        if window == .zero { return takeAll() }
        var full: [Call] = []
        open.removeAll { call in
            guard call.identifierCount >= maxIdentifiers else { return false }
            full.append(call)
            return true
        }
        return full
    }

    /// The window of the first fetch gathered has ended: every call goes out.
    package mutating func windowEnded(generation armed: Int) -> [Call] {
        guard armed == generation else { return [] }
        return takeAll()
    }

    private mutating func takeAll() -> [Call] {
        generation &+= 1
        turnArmed = false
        windowArmed = false
        defer { open = [] }
        return open
    }
}

extension MergeBufferStateMachine {
    /// What becomes of a merged call's outcome.
    package enum Fate: Equatable {
        /// Every fetch of the call gets it, restricted to its identifiers.
        case shared
        /// The upstream rejected the call (`422`): some fetch's identifier
        /// may be at fault, so each fetch is asked again on its own, and
        /// only those whose identifiers are rejected fail.
        case askApart
    }

    /// A `422` is the one outcome that may belong to some fetches only; a
    /// call of one fetch was already asked alone.
    package static func fate(of outcome: Result<SourcePage, ProductsFetchFailure>, members: Int) -> Fate {
        if members > 1, case .failure(.invalidProductIdentifier) = outcome { return .askApart }
        return .shared
    }
}
