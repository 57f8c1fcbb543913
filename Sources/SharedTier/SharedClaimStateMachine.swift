import MemoryTier
package import MonotonicTime
package import ProductsDomain

/// Coalescing across replicas for one shared fetch: which of its
/// identifiers this replica fetches, which it waits for, and when it takes
/// over. Pure: the ``SharedClaimDriver`` performs the actions (Redis
/// commands, the upstream fetch, a loop timer) and reports back.
///
/// The protocol, per identifier of one (app, country, language):
/// 1. **Claim**: a lease of 1 s on the identifier's claim key (taken when
///    the key is free, or holds a "claim" longer than a lease, which no
///    replica writes) and, in the same round trip, `MGET` of the entries.
///    An entry found answers at once (a claim won anyway is released); a
///    claim won is fetched; a claim held by another replica is waited for.
/// 2. **Fetch** what this replica claimed, renewing the leases while the
///    fetch runs; then **publish**: store the entries (when they may be
///    kept), release the claims (only if still ours) and publish the
///    outcome, success or failure, on the outcomes channel, in that order
///    on one connection.
/// 3. **Wait** for another replica's outcome, looking again (step 1: the
///    entries and the claims) every `poll` (250 ms), until the fetch's
///    deadline. The outcome message ends a wait as soon as the fetch waited
///    for ends; the poll is only the fallback. A waiter never depends on
///    one message: a claimer that died stops renewing, its lease lapses
///    within 1 s, and the next look takes over; a lost message costs one
///    poll. A "released" message looks again at once, at most once per
///    ``minimumReclaimInterval``. **No lease can make a call fail**: an
///    identifier waited for as long as `patience` (`UPSTREAM_TIMEOUT_MS`),
///    or whose fetch has less than that left before its deadline, is
///    fetched by this replica on its own (a lease renewed forever by a
///    writer that never fetches blocks nothing).
///
/// A message that arrives while this replica's claim round trip is under
/// way is kept and answers the identifier, whatever the reply says: the
/// fetch it reports is the one the claim overlapped (a claim won just
/// after that fetch released it is given back, not fetched again). A look
/// that wins a lease whose wait flag is gone (the holder's release saw it,
/// so its outcome message is on its way) holds the lease and waits for
/// that message until the next poll before fetching: a poll that comes
/// between a release and its message never costs a second fetch.
/// When Redis cannot be asked, the identifiers are fetched without a claim
/// (and nothing is published): the replica carries on alone. The same
/// happens to identifiers being waited for once the tier is lost (the
/// subscriber dropped, or a probe of a stalled Redis timed out): an outcome
/// could no longer arrive.
///
/// The usual miss starts at step 2 (``init(fetching:deadline:poll:patience:)``):
/// the call's lookup won every lease, so there is nothing to claim or wait
/// for, and the machine keeps no table of statuses until an event needs one.
package struct SharedClaimStateMachine<Page> {
    package typealias Outcome = Result<Page, ProductsFetchFailure>
    /// What an event asks the driver to do, in order.
    package typealias Actions = SharedInlineList<Action>
    /// The outcomes that answered the fetch, in the order they came.
    package typealias Parts = [Outcome]

    package typealias Action = SharedClaimAction
    package typealias WaitEnd = SharedClaimAction.WaitEnd

    private enum Status: Equatable {
        case claiming
        /// Claimed again after a wait, at a poll.
        case looking
        /// Claimed again after a wait, told by a "released" message.
        case lookingAfterRelease
        /// A look won the lease, but the wait flag was gone: the holder
        /// released it with an outcome, whose message is on its way. The
        /// lease is held meanwhile; the next poll fetches.
        case awaitingOutcome
        /// Fetched by this replica; `claimed`: under its lease.
        case fetching(claimed: Bool)
        case waiting
        case resolved
    }

    /// A "released" message looks again at once at most this often; more
    /// wait for the next poll (forged messages cannot make a replica send
    /// a claim per message).
    package static var minimumReclaimInterval: Duration { .milliseconds(50) }

    private let deadline: MonotonicInstant
    private let poll: Duration
    /// How long an identifier waits on another's lease before this replica
    /// fetches it on its own (`UPSTREAM_TIMEOUT_MS`); nil: it waits until
    /// the deadline.
    private let patience: Duration?
    /// When each identifier began to wait (its first wait).
    private var waitingSince: [String: MonotonicInstant] = [:]
    private var status: [String: Status] = [:]
    /// Outcomes of other replicas that came while the claim round trip of
    /// their identifiers was under way.
    private var early: [String: Outcome] = [:]
    private var lastClaim: MonotonicInstant?
    /// Waiting identifiers a "released" message named sooner than
    /// ``minimumReclaimInterval`` after the last look: the look the timer
    /// then makes is one after a release.
    private var releasedSinceLook: Set<String> = []
    private var unresolved: Int
    /// The outcomes that answered the fetch so far, in the order they
    /// came: what the driver answers with at `.finish`.
    package private(set) var parts = Parts()
    /// The answer is the outcome of the fetch whose end finished the
    /// machine, the whole of it (the usual miss), not the parts.
    package private(set) var answeredByFetch = false
    /// Every identifier, while the machine started at `.fetch` has only its
    /// one fetch under way: each is `.fetching(claimed: true)`, and
    /// `status` stays empty (no table is made for the usual miss). Only
    /// ``start(now:)``, ``fetched(_:_:claimed:)`` and ``leased`` read it;
    /// every other event finds no identifier it could change, as it would
    /// in a table of identifiers all being fetched.
    private var fetchingAll: [String]?
    private(set) var isFinished = false
    /// The tier was lost: nothing more is waited for.
    private var alone = false

    /// - Parameters:
    ///   - deadline: the fetch's deadline; waiting never goes past it.
    ///   - poll: how long a wait lasts before looking again (250 ms).
    ///   - won: identifiers whose lease the call's lookup already took
    ///     (fetched at once); `held`: those it found another replica
    ///     holding (waited for). The rest are claimed first.
    ///   - patience: how long an identifier waits on another's lease at
    ///     most, and the least time left in which it is still waited for
    ///     (`UPSTREAM_TIMEOUT_MS`); `nil` waits until the deadline.
    package init(identifiers: [String], deadline: MonotonicInstant, poll: Duration, patience: Duration? = nil, won: Set<String> = [], held: Set<String> = []) {
        self.deadline = deadline
        self.poll = poll
        self.patience = patience
        for identifier in identifiers {
            status[identifier] = won.contains(identifier) ? .fetching(claimed: true) : held.contains(identifier) ? .waiting : .claiming
        }
        self.unresolved = status.count
    }

    /// Starts at `.fetch`: the call's lookup won the lease of every one of
    /// `identifiers` (distinct), so the first action fetches them all under
    /// those leases, then publishes.
    package init(fetching identifiers: [String], deadline: MonotonicInstant, poll: Duration, patience: Duration? = nil) {
        self.deadline = deadline
        self.poll = poll
        self.patience = patience
        // Nothing to fetch: finished at the start, with no fetch to end.
        self.fetchingAll = identifiers.isEmpty ? nil : identifiers
        self.unresolved = identifiers.count
    }

    /// Whether other replicas' messages can matter: some identifier is
    /// claimed or waited for, not only fetched under this replica's lease.
    package var hearsOthers: Bool {
        fetchingAll == nil && status.values.contains { $0 != .fetching(claimed: true) && $0 != .resolved }
    }

    /// The table of statuses of a machine that started at `.fetch`, for an
    /// event it does not expect (a part of its identifiers fetched).
    private mutating func makeTable() {
        guard let all = fetchingAll else { return }
        fetchingAll = nil
        for identifier in all { status[identifier] = .fetching(claimed: true) }
    }

    /// The first round: fetch what the lookup won, wait for what it found
    /// held, claim the rest. `now` is read only when the machine did not
    /// start at `.fetch` (the usual miss reads no clock).
    package mutating func start(now readNow: @autoclosure () -> MonotonicInstant) -> Actions {
        guard unresolved > 0 else { return finishIfDone() }
        if let all = fetchingAll { return Actions(.fetch(all, claimed: true)) }
        let now = readNow()
        var actions = Actions()
        let fetch = status.filter { $0.value == .fetching(claimed: true) }.map(\.key).sorted()
        if !fetch.isEmpty { actions.append(.fetch(fetch, claimed: true)) }
        let claim = status.filter { $0.value == .claiming }.map(\.key).sorted()
        if !claim.isEmpty {
            lastClaim = now
            actions.append(.claim(claim))
        }
        let held = status.filter { $0.value == .waiting }.map(\.key)
        if !held.isEmpty {
            for identifier in held { waitingSince[identifier] = now }
            actions += waitOrGiveUp(now: now)
        }
        return actions
    }

    /// The claim round trip came back: `won` claims were ours to take,
    /// `entries` (a page with their products, and their identifiers) were
    /// found in the shared cache; the rest of `identifiers` are held by
    /// another replica.
    ///   - unflagged: those of `won` whose wait flag was not there: for a
    ///     look, the holder waited on released it with an outcome.
    package mutating func claimed(_ identifiers: [String], won: Set<String>, unflagged: Set<String> = [], entries: (page: Page, identifiers: Set<String>)?, now: MonotonicInstant) -> Actions {
        var actions = Actions()
        var release: [String] = []
        var fetch: [String] = []
        var fetchAlone: [String] = []
        var wait = false
        var answered = false
        var earlyParts: [(identifier: String, outcome: Outcome)] = []
        var ended: [WaitEnd: Int] = [:]
        for identifier in identifiers {
            let looked: Bool
            let afterRelease: Bool
            switch status[identifier] {
            case .claiming?: (looked, afterRelease) = (false, false)
            case .looking?: (looked, afterRelease) = (true, false)
            case .lookingAfterRelease?: (looked, afterRelease) = (true, true)
            default: continue
            }
            let earlyOutcome = early.removeValue(forKey: identifier)
            if let entries, entries.identifiers.contains(identifier) {
                resolve(identifier)
                answered = true
                if won.contains(identifier) { release.append(identifier) }
                if looked { ended[.entry, default: 0] += 1 }
            } else if let earlyOutcome {
                // The fetch this claim overlapped ended while the reply was
                // on its way: its outcome answers. A claim won anyway (the
                // fetch released it just before the claim came) is given
                // back, not fetched a second time.
                resolve(identifier)
                earlyParts.append((identifier, earlyOutcome))
                if won.contains(identifier) { release.append(identifier) }
                if looked { ended[.outcome, default: 0] += 1 }
            } else if won.contains(identifier), looked, !afterRelease, !alone, unflagged.contains(identifier) {
                // Released with an outcome since the last look: its message
                // is on its way. Hold the lease and wait for it.
                status[identifier] = .awaitingOutcome
                wait = true
            } else if won.contains(identifier) {
                status[identifier] = .fetching(claimed: true)
                fetch.append(identifier)
                if looked { ended[afterRelease ? .released : .takeover, default: 0] += 1 }
            } else if alone {
                status[identifier] = .fetching(claimed: false)
                fetchAlone.append(identifier)
                if looked { ended[.alone, default: 0] += 1 }
            } else {
                status[identifier] = .waiting
                if waitingSince[identifier] == nil { waitingSince[identifier] = now }
                wait = true
            }
        }
        for end in WaitEnd.allCases { if let count = ended[end] { actions.append(.waitsEnded(end, count)) } }
        if !fetchAlone.isEmpty { actions.append(.fetch(fetchAlone, claimed: false)) }
        if answered, let entries { parts.append(.success(entries.page)) }
        // One part per outcome, however many identifiers it answered.
        var seen: [Int] = []
        for (index, part) in earlyParts.enumerated() where !seen.contains(where: { Self.same(earlyParts[$0].outcome, part.outcome) }) {
            seen.append(index)
            parts.append(part.outcome)
        }
        if !release.isEmpty { actions.append(.release(release)) }
        if !fetch.isEmpty { actions.append(.fetch(fetch, claimed: true)) }
        if wait { actions += waitOrGiveUp(now: now) }
        actions += finishIfDone()
        return actions
    }

    /// Whether two early outcomes are the same message's (compared by
    /// case, as pages have no identity of their own: a repeated success is
    /// harmless, as parts merge first-wins).
    private static func same(_ first: Outcome, _ second: Outcome) -> Bool {
        switch (first, second) {
        case (.failure(let a), .failure(let b)): a == b
        default: false
        }
    }

    /// Redis could not be asked: fetch the identifiers without a claim.
    package mutating func claimFailed(_ identifiers: [String]) -> Actions {
        var fetch: [String] = []
        var looked = 0
        for identifier in identifiers where status[identifier] == .claiming || status[identifier] == .looking || status[identifier] == .lookingAfterRelease {
            if status[identifier] != .claiming { looked += 1 }
            status[identifier] = .fetching(claimed: false)
            fetch.append(identifier)
            early[identifier] = nil
        }
        var actions = Actions()
        if looked > 0 { actions.append(.waitsEnded(.alone, looked)) }
        if !fetch.isEmpty { actions.append(.fetch(fetch, claimed: false)) }
        return actions
    }

    /// This replica's upstream fetch of `identifiers` ended.
    package mutating func fetched(_ identifiers: [String], _ outcome: Outcome, claimed: Bool) -> Actions {
        if let all = fetchingAll {
            // The usual miss: its one fetch, of every identifier, ended.
            guard identifiers == all else {
                makeTable()
                return fetched(identifiers, outcome, claimed: claimed)
            }
            fetchingAll = nil
            unresolved = 0
            isFinished = true
            // Its outcome is the whole answer: kept by the driver, not in
            // the parts (no array made for it).
            answeredByFetch = true
            var actions = claimed ? Actions(.publish(identifiers)) : Actions()
            actions.append(.finish)
            return actions
        }
        var resolvedAny = false
        for identifier in identifiers {
            guard case .fetching? = status[identifier] else { continue }
            resolve(identifier)
            resolvedAny = true
        }
        guard resolvedAny else { return Actions() }
        parts.append(outcome)
        // Only a fetch still under way publishes: a late or repeated end
        // (nothing of it fetched any more) asks for nothing.
        var actions = claimed ? Actions(.publish(identifiers)) : Actions()
        actions += finishIfDone()
        return actions
    }

    /// Another replica published the outcome of `identifiers`. Waited-for
    /// identifiers take it; those whose claim reply is still to come keep
    /// it, in case the reply says another replica holds them.
    package mutating func received(_ identifiers: [String], _ outcome: Outcome) -> Actions {
        var resolved = 0
        var release: [String] = []
        for identifier in identifiers {
            switch status[identifier] {
            case .waiting?:
                resolve(identifier)
                resolved += 1
            case .awaitingOutcome?:
                // The lease this replica took meanwhile is given back.
                resolve(identifier)
                resolved += 1
                release.append(identifier)
            case .claiming?, .looking?, .lookingAfterRelease?:
                early[identifier] = outcome
            default:
                continue
            }
        }
        guard resolved > 0 else { return Actions() }
        parts.append(outcome)
        var actions = Actions(.waitsEnded(.outcome, resolved))
        if !release.isEmpty { actions.append(.release(release.sorted())) }
        actions += finishIfDone()
        return actions
    }

    /// Another replica gave up its claims on `identifiers` without an
    /// outcome (its own deadline passed, or a lease its lookup took was
    /// not needed): look again now, or, when a look went out less than
    /// ``minimumReclaimInterval`` ago, once that much has passed since.
    package mutating func released(_ identifiers: [String], now: MonotonicInstant) -> Actions {
        // A lease held while an outcome was awaited: none will come.
        var actions = Actions()
        let held = identifiers.filter { status[$0] == .awaitingOutcome }.sorted()
        if !held.isEmpty {
            for identifier in held { status[identifier] = .fetching(claimed: true) }
            actions.append(.waitsEnded(.released, held.count))
            actions.append(.fetch(held, claimed: true))
        }
        if let lastClaim, now - lastClaim < Self.minimumReclaimInterval {
            let waiting = identifiers.filter { status[$0] == .waiting }
            guard !waiting.isEmpty else { return actions }
            releasedSinceLook.formUnion(waiting)
            actions.append(.waitUntil(min(lastClaim + Self.minimumReclaimInterval, deadline)))
            return actions
        }
        var claim: [String] = []
        for identifier in identifiers where status[identifier] == .waiting {
            status[identifier] = .lookingAfterRelease
            claim.append(identifier)
        }
        guard !claim.isEmpty else { return actions }
        lastClaim = now
        actions.append(.claim(claim))
        return actions
    }

    /// The poll timer fired: past the deadline the waiting identifiers fail
    /// with `cancelled`; before it, they are looked at again (the entries,
    /// and the claims: a lapsed one is taken over).
    package mutating func pollDue(now: MonotonicInstant) -> Actions {
        let waiting = status.filter { $0.value == .waiting }.map(\.key).sorted()
        let awaiting = status.filter { $0.value == .awaitingOutcome }.map(\.key).sorted()
        guard !waiting.isEmpty || !awaiting.isEmpty else { return Actions() }
        if now >= deadline {
            for identifier in waiting + awaiting { resolve(identifier) }
            parts.append(.failure(.cancelled(detail: "another replica's fetch of these identifiers did not end within the call's deadline")))
            var actions = Actions(.waitsEnded(.deadline, waiting.count + awaiting.count))
            if !awaiting.isEmpty { actions.append(.release(awaiting)) }
            actions += finishIfDone()
            return actions
        }
        var actions = Actions()
        if !awaiting.isEmpty {
            // The outcome awaited never came (its message was lost): fetch
            // under the lease held.
            for identifier in awaiting { status[identifier] = .fetching(claimed: true) }
            actions.append(.waitsEnded(.takeover, awaiting.count))
            actions.append(.fetch(awaiting, claimed: true))
        }
        actions += fetchOnOwn(now: now)
        let still = waiting.filter { status[$0] == .waiting }
        guard !still.isEmpty else { return actions }
        for identifier in still { status[identifier] = releasedSinceLook.contains(identifier) ? .lookingAfterRelease : .looking }
        releasedSinceLook = []
        lastClaim = now
        actions.append(.claim(still))
        return actions
    }

    /// Arms the next look, or, for identifiers that have waited long
    /// enough (or whose fetch has too little time left to wait), fetches
    /// them on this replica's own.
    private mutating func waitOrGiveUp(now: MonotonicInstant) -> Actions {
        var impatient = fetchOnOwn(now: now)
        guard status.values.contains(where: { $0 == .waiting || $0 == .awaitingOutcome }) else { return impatient }
        // The next look: a poll from now, but no later than when the
        // oldest wait runs out of patience, or the time left falls under
        // it (then the look fetches on its own), nor than the deadline.
        var next = min(now + poll, deadline)
        if let patience {
            let oldest = waitingSince.filter { status[$0.key] == .waiting }.values.min() ?? now
            next = min(next, max(min(oldest + patience, deadline - patience), now))
        }
        impatient.append(.waitUntil(next))
        return impatient
    }

    /// Fetches, without a claim, what has waited `patience` or has less
    /// than that left before the deadline.
    private mutating func fetchOnOwn(now: MonotonicInstant) -> Actions {
        guard let patience else { return Actions() }
        let timeLeftTooShort = deadline - now < patience
        var fetch: [String] = []
        for (identifier, since) in waitingSince where status[identifier] == .waiting {
            guard timeLeftTooShort || now - since >= patience else { continue }
            status[identifier] = .fetching(claimed: false)
            fetch.append(identifier)
        }
        guard !fetch.isEmpty else { return Actions() }
        fetch.sort()
        var actions = Actions(.waitsEnded(.timeout, fetch.count))
        actions.append(.fetch(fetch, claimed: false))
        return actions
    }

    /// The tier was lost (the subscriber dropped, or Redis stalled): what
    /// is waited for is fetched without a claim, and nothing more will be.
    package mutating func sharedTierLost() -> Actions {
        alone = true
        let waiting = status.filter { $0.value == .waiting || $0.value == .awaitingOutcome }.map(\.key).sorted()
        guard !waiting.isEmpty else { return Actions() }
        for identifier in waiting { status[identifier] = .fetching(claimed: false) }
        var actions = Actions(.waitsEnded(.alone, waiting.count))
        actions.append(.fetch(waiting, claimed: false))
        return actions
    }

    /// Whether any identifier still waits for another replica.
    package var isWaiting: Bool { status.values.contains { $0 == .waiting || $0 == .awaitingOutcome } }

    /// The identifiers this replica fetches under its lease: their leases
    /// are renewed until the fetch ends.
    package var leased: [String] {
        if let all = fetchingAll { return all.sorted() }
        return status.compactMap { identifier, status in
            if case .fetching(claimed: true) = status { return identifier }
            return nil
        }.sorted()
    }

    private mutating func resolve(_ identifier: String) {
        status[identifier] = .resolved
        unresolved -= 1
    }

    /// The parts, moved out (no copy): for the driver at `.finish`, after
    /// which the machine keeps none.
    package mutating func takeParts() -> Parts {
        var taken = Parts()
        swap(&taken, &parts)
        return taken
    }

    private mutating func finishIfDone() -> Actions {
        guard unresolved == 0, !isFinished else { return Actions() }
        isFinished = true
        return Actions(.finish)
    }
}

/// What an event of a ``SharedClaimStateMachine`` asks its driver to do, in
/// order. No outcome travels in it (a publish is of the outcome the machine
/// was just told of, a finish answers with the machine's
/// ``SharedClaimStateMachine/parts``), and it is not generic: an action is
/// copied as a few words, never through a type's value witnesses.
package enum SharedClaimAction: Equatable {
    /// Claim these (or renew the lease of those this replica holds)
    /// and read their entries, in one round trip.
    case claim([String])
    /// Ask the upstream for these; `claimed` ones are published after.
    case fetch([String], claimed: Bool)
    /// Store, release and publish, for these identifiers, the outcome of
    /// the claimed fetch whose end returned this action.
    case publish([String])
    /// Release claims won for identifiers an entry already answered.
    case release([String])
    /// Arm the lapse timer (replacing any armed one).
    case waitUntil(MonotonicInstant)
    /// Every identifier is answered: the answer is the machine's parts,
    /// or, when ``SharedClaimStateMachine/answeredByFetch``, the outcome
    /// of the fetch whose end returned this action.
    case finish
    /// This many identifiers stopped waiting for another replica's
    /// fetch, in this way (for `gateway_shared_waits_total`).
    case waitsEnded(WaitEnd, Int)

    /// How a wait on another replica's lease ended.
    package enum WaitEnd: String, CaseIterable, Sendable {
        /// The outcome message of the fetch waited for.
        case outcome
        /// A look found the entry the fetch stored (its message was lost).
        case entry
        /// A look found the lease gone, and this replica fetched (its
        /// holder died, or its message was lost).
        case takeover
        /// Its holder gave it up without an outcome ("released": its
        /// deadline passed, or a lookup's lease no fetch needed), and this
        /// replica fetched.
        case released
        /// The tier was lost: this replica fetched without it.
        case alone
        /// The fetch's deadline passed first.
        case deadline
        /// It waited `patience` (`UPSTREAM_TIMEOUT_MS`), or the fetch's
        /// time left fell under that: this replica fetched on its own.
        case timeout
    }
}

/// A short list held inline: the first two elements in place, any more in
/// an array. The machine answers the usual miss's events with one or two
/// actions, which an array would allocate for each time.
/// Always inlined: a generic call here would copy its elements through
/// their value witnesses, at more cost than the malloc it saves.
package struct SharedInlineList<Element>: Sequence {
    private var first: Element?
    private var second: Element?
    private var more: [Element] = []
    /// How many elements it holds.
    package private(set) var count = 0

    /// No element.
    @inline(__always)
    package init() {}

    /// One element.
    @inline(__always)
    package init(_ element: Element) {
        first = element
        count = 1
    }

    package var isEmpty: Bool {
        @inline(__always) get { count == 0 }
    }

    /// The element at `index` (below ``count``).
    package subscript(index: Int) -> Element {
        @inline(__always) get {
            switch index {
            case 0: first!
            case 1: second!
            default: more[index - 2]
            }
        }
    }

    @inline(__always)
    package mutating func append(_ element: Element) {
        switch count {
        case 0: first = element
        case 1: second = element
        default: more.append(element)
        }
        count += 1
    }

    @inline(__always)
    package static func += (list: inout SharedInlineList, other: SharedInlineList) {
        for index in 0 ..< other.count { list.append(other[index]) }
    }

    @inline(__always)
    package func makeIterator() -> Iterator { Iterator(list: self) }

    package struct Iterator: IteratorProtocol {
        fileprivate let list: SharedInlineList
        private var index = 0

        @inline(__always)
        fileprivate init(list: SharedInlineList) {
            self.list = list
        }

        @inline(__always)
        package mutating func next() -> Element? {
            guard index < list.count else { return nil }
            defer { index += 1 }
            return list[index]
        }
    }
}
