import JSONRPC
import MemoryTier
import MonotonicTime
import ProductsDomain
import SharedTier
import Tracing

/// The control flow of one `products.fetch` call after its memory lookup,
/// pure: events in (the shared tier answered, the fetches were claimed, a
/// fetch ended, `stale-if-error` entries were tried), the next action out.
/// No clock, no I/O and no lock: ``ProductsCallDriver`` runs it on the
/// call's loop and does what each action says; tests run it as a table.
///
/// ```
/// memory ─ all answered ──────────────────────────────────────▶ answer
///    │ missing, shared tier on            missing, no shared tier
///    ▼                                               │
/// lookUpSharedTier ─ all answered ──▶ answer         ▼
///    └─ still missing ─▶ fetch (or deadlinePassed) ─▶ waitFor ⟲ ─▶ answer
///                                                 └▶ coverWithStale ─┘
/// ```
struct ProductsCallStateMachine {
    /// What the driver does next.
    enum Action {
        /// Ask the shared tier for these (the call's memory misses): its
        /// entries, and leases on those without one, in one round trip.
        /// Then ``sharedTierAnswered(now:)``.
        case lookUpSharedTier([String])
        /// Claim these in the coalescer (joining fetches already running)
        /// and start the new fetches. Then ``fetchesClaimed(_:)``.
        case fetch([String])
        /// Wait for this fetch, until the call's deadline. Then
        /// ``fetchEnded(_:)``.
        case waitFor(CoalescedFetch)
        /// This fetch failed with a failure `stale-if-error` may cover: try
        /// the entries of its identifiers. Then ``staleCovered(complete:)``.
        case coverWithStale(CoalescedFetch)
        /// The call's deadline passed before it could start a fetch: answer
        /// `cancelled`, starting none.
        case deadlinePassed
        /// Answer: the call's `result`, or its most severe failure.
        case answer(Result<EncodedJSON, ProductsFetchFailure>)
    }

    private enum State {
        case memoryLookedUp
        case lookingUpSharedTier
        case claiming
        /// Waiting for the first of `pending`.
        case waiting
        case coveringWithStale(ProductsFetchFailure)
        case answered
    }

    /// The call: its identifiers and the answers found so far. The driver
    /// writes into `answers` what memory and the shared tier hold.
    var call: CallInProgress
    private var state = State.memoryLookedUp
    private var pending: ArraySlice<CoalescedFetch> = []
    private var failures: [ProductsFetchFailure] = []

    init(call: CallInProgress) {
        self.call = call
    }

    /// Whether the call has been answered (no event is expected any more).
    var isAnswered: Bool {
        if case .answered = state { return true }
        return false
    }

    /// The memory lookup is done (its answers are in ``call``).
    mutating func memoryLookedUp(sharedTier: Bool, now: MonotonicInstant) -> Action {
        precondition(isAt(.memoryLookedUp), "the memory lookup ends once, first")
        let missing = call.missing
        if missing.isEmpty { return answer() }
        if sharedTier {
            state = .lookingUpSharedTier
            return .lookUpSharedTier(missing)
        }
        return fetchOrGiveUp(missing, now: now)
    }

    /// The shared tier answered (what it held is in ``call``), or could not
    /// be asked.
    mutating func sharedTierAnswered(now: MonotonicInstant) -> Action {
        precondition(isAt(.lookingUpSharedTier), "the shared tier answers a lookup")
        let missing = call.missing
        if missing.isEmpty { return answer() }
        return fetchOrGiveUp(missing, now: now)
    }

    /// The coalescer gave the fetches that answer the missing identifiers
    /// (new ones started, running ones joined), in claim order.
    mutating func fetchesClaimed(_ fetches: [CoalescedFetch]) -> Action {
        precondition(isAt(.claiming), "fetches are claimed after a fetch action")
        pending = fetches[...]
        state = .waiting
        return next()
    }

    /// The fetch waited for ended (or the call's deadline passed while it
    /// waited: a failure). Its products fill the slots still open, as the
    /// first answer wins.
    mutating func fetchEnded(_ outcome: CoalescedFetch.Outcome) -> Action {
        precondition(isAt(.waiting), "a fetch ends while it is waited for")
        let fetch = pending[pending.startIndex]
        switch outcome {
        case .success(let page):
            pending.removeFirst()
            let identifiers = call.identifiers
            for index in identifiers.indices where call.answers[index] == nil {
                if let product = page.encodedProducts[identifiers[index]] { call.answers[index] = .product(product) }
            }
            return next()
        case .failure(let failure):
            guard failure.allowsStaleAnswer else {
                pending.removeFirst()
                failures.append(failure)
                return next()
            }
            state = .coveringWithStale(failure)
            return .coverWithStale(fetch)
        }
    }

    /// The stale entries were tried for the failed fetch: `complete` when
    /// they answered every identifier of the call, so the failure is not
    /// the call's.
    mutating func staleCovered(complete: Bool) -> Action {
        guard case .coveringWithStale(let failure) = state else { preconditionFailure("stale entries cover a failed fetch") }
        pending.removeFirst()
        if !complete { failures.append(failure) }
        state = .waiting
        return next()
    }

    private mutating func fetchOrGiveUp(_ missing: [String], now: MonotonicInstant) -> Action {
        guard now < call.deadline else {
            state = .answered
            return .deadlinePassed
        }
        state = .claiming
        return .fetch(missing)
    }

    private mutating func next() -> Action {
        if let fetch = pending.first { return .waitFor(fetch) }
        if let failure = ProductsFetchFailure.mostSevere(failures) {
            state = .answered
            return .answer(.failure(failure))
        }
        return answer()
    }

    private mutating func answer() -> Action {
        state = .answered
        return .answer(.success(call.result))
    }

    private func isAt(_ expected: State) -> Bool {
        switch (state, expected) {
        case (.memoryLookedUp, .memoryLookedUp), (.lookingUpSharedTier, .lookingUpSharedTier), (.claiming, .claiming), (.waiting, .waiting): true
        default: false
        }
    }
}

/// One `products.fetch` call between its steps (memory, shared tier,
/// upstream): what it asked for and the answers found so far.
struct CallInProgress: Sendable {
    let identifiers: [String]
    let scope: FetchScope
    let region: ResolvedRegion
    let requestID: String
    let deadline: MonotonicInstant
    /// One slot per requested identifier, in request order: a product's
    /// bytes, `.unknown`, or nil while nothing answered it yet.
    var answers: [ProductAnswer?]
    /// The leases the shared tier's lookup took for the call, until the
    /// fetches it starts adopt them.
    var preclaim: SharedPreclaim?
    /// The call's trace, carried by the fetches it starts.
    var trace: PropagatedTrace?

    init(identifiers: [String], scope: FetchScope, region: ResolvedRegion, requestID: String, deadline: MonotonicInstant, trace: PropagatedTrace? = nil) {
        self.identifiers = identifiers
        self.scope = scope
        self.region = region
        self.requestID = requestID
        self.deadline = deadline
        self.trace = trace
        self.answers = [ProductAnswer?](repeating: nil, count: identifiers.count)
    }

    /// The identifiers nothing answered yet, in request order.
    var missing: [String] {
        // Usually all of them or none: an empty answer costs nothing, a full
        // one is a copy of the list, and a partial one reserves once.
        var open = 0
        for answer in answers where answer == nil { open += 1 }
        if open == 0 { return [] }
        if open == identifiers.count { return identifiers }
        var missing: [String] = []
        missing.reserveCapacity(open)
        for index in identifiers.indices where answers[index] == nil { missing.append(identifiers[index]) }
        return missing
    }

    /// The call's `result`: every identifier no page and no entry has a
    /// product for is invalid.
    var result: EncodedJSON {
        ProductsResult.encoded(requested: identifiers, answers: answers, region: region)
    }
}
