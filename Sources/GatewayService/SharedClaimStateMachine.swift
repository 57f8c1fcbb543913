import ProductsDomain

/// Coalescing across replicas for one shared fetch: which of its
/// identifiers this replica fetches, which it waits for, and when it takes
/// over. Pure: the ``SharedClaimDriver`` performs the actions (Redis
/// commands, the upstream fetch, a loop timer) and reports back.
///
/// The protocol, per identifier of one (app, country, language):
/// 1. **Claim**: `SET claim token NX PX lapse` and, in the same round
///    trip, `MGET` of the entries. An entry found answers at once (a
///    claim won anyway is released); a claim won is fetched; a claim held by
///    another replica is waited for.
/// 2. **Fetch** what this replica claimed; then **publish**: store the
///    entries (when they may be kept), release the claims (only if still
///    ours) and publish the outcome, success or failure, on the outcomes
///    channel, in that order on one connection.
/// 3. **Wait** for another replica's outcome, at most until its claim must
///    have lapsed (`UPSTREAM_TIMEOUT_MS` × (1 + `UPSTREAM_RETRIES`)) or the
///    fetch's deadline; a lapse, or a "released" message, sends those
///    identifiers back to step 1: a waiter takes over from a dead claimer.
///
/// Since the claimer releases before it publishes, a waiter that saw the
/// claim (its `SET NX` failed) is registered before the message can come.
/// When Redis cannot be asked, the identifiers are fetched without a claim
/// (and nothing is published): the replica carries on alone. The same
/// happens to identifiers being waited for once the tier is lost (the
/// subscriber dropped, or a probe of a stalled Redis timed out): an outcome
/// could no longer arrive.
struct SharedClaimStateMachine<Page> {
    typealias Outcome = Result<Page, ProductsFetchFailure>

    enum Action {
        /// Claim these and read their entries, in one round trip.
        case claim([String])
        /// Ask the upstream for these; `claimed` ones are published after.
        case fetch([String], claimed: Bool)
        /// Store, release and publish the outcome of a claimed fetch.
        case publish([String], Outcome)
        /// Release claims won for identifiers an entry already answered.
        case release([String])
        /// Arm the lapse timer (replacing any armed one).
        case waitUntil(ContinuousClock.Instant)
        /// Every identifier is answered: the parts, in the order they came.
        case finish([Outcome])
    }

    private enum Status {
        case claiming, fetching, waiting, resolved
    }

    private let deadline: ContinuousClock.Instant
    private let lapse: Duration
    private var status: [String: Status] = [:]
    private var unresolved: Int
    private var parts: [Outcome] = []
    private(set) var isFinished = false
    /// The tier was lost: nothing more is waited for.
    private var alone = false

    /// - Parameters:
    ///   - deadline: the fetch's deadline; waiting never goes past it.
    ///   - lapse: how long a claim lives (`PX`), so the longest wait before
    ///     trying to take over.
    init(identifiers: [String], deadline: ContinuousClock.Instant, lapse: Duration) {
        self.deadline = deadline
        self.lapse = lapse
        for identifier in identifiers { status[identifier] = .claiming }
        self.unresolved = status.count
    }

    /// The first round: claim everything.
    mutating func start() -> [Action] {
        let all = status.keys.sorted()
        return all.isEmpty ? finishIfDone() : [.claim(all)]
    }

    /// The claim round trip came back: `won` claims were ours to take,
    /// `entries` (a page with their products, and their identifiers) were
    /// found in the shared cache; the rest of `identifiers` are held by
    /// another replica.
    mutating func claimed(_ identifiers: [String], won: Set<String>, entries: (page: Page, identifiers: Set<String>)?, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        var release: [String] = []
        var fetch: [String] = []
        var fetchAlone: [String] = []
        var wait = false
        var answered = false
        for identifier in identifiers where status[identifier] == .claiming {
            if let entries, entries.identifiers.contains(identifier) {
                resolve(identifier)
                answered = true
                if won.contains(identifier) { release.append(identifier) }
            } else if won.contains(identifier) {
                status[identifier] = .fetching
                fetch.append(identifier)
            } else if alone {
                status[identifier] = .fetching
                fetchAlone.append(identifier)
            } else {
                status[identifier] = .waiting
                wait = true
            }
        }
        if !fetchAlone.isEmpty { actions.append(.fetch(fetchAlone, claimed: false)) }
        if answered, let entries { parts.append(.success(entries.page)) }
        if !release.isEmpty { actions.append(.release(release)) }
        if !fetch.isEmpty { actions.append(.fetch(fetch, claimed: true)) }
        if wait { actions.append(.waitUntil(min(now + lapse, deadline))) }
        return actions + finishIfDone()
    }

    /// Redis could not be asked: fetch the identifiers without a claim.
    mutating func claimFailed(_ identifiers: [String]) -> [Action] {
        var fetch: [String] = []
        for identifier in identifiers where status[identifier] == .claiming {
            status[identifier] = .fetching
            fetch.append(identifier)
        }
        return fetch.isEmpty ? [] : [.fetch(fetch, claimed: false)]
    }

    /// This replica's upstream fetch of `identifiers` ended.
    mutating func fetched(_ identifiers: [String], _ outcome: Outcome, claimed: Bool) -> [Action] {
        var resolvedAny = false
        for identifier in identifiers where status[identifier] == .fetching {
            resolve(identifier)
            resolvedAny = true
        }
        if resolvedAny { parts.append(outcome) }
        let publish: [Action] = claimed ? [.publish(identifiers, outcome)] : []
        return publish + finishIfDone()
    }

    /// Another replica published the outcome of `identifiers`.
    mutating func received(_ identifiers: [String], _ outcome: Outcome) -> [Action] {
        var resolvedAny = false
        for identifier in identifiers where status[identifier] == .waiting {
            resolve(identifier)
            resolvedAny = true
        }
        if resolvedAny { parts.append(outcome) }
        return finishIfDone()
    }

    /// Another replica gave up its claims on `identifiers` without an
    /// outcome (its own deadline passed): try to claim them now.
    mutating func released(_ identifiers: [String]) -> [Action] {
        var claim: [String] = []
        for identifier in identifiers where status[identifier] == .waiting {
            status[identifier] = .claiming
            claim.append(identifier)
        }
        return claim.isEmpty ? [] : [.claim(claim)]
    }

    /// The lapse timer fired: past the deadline the waiting identifiers fail
    /// with `cancelled`; before it, they are claimed again (take-over).
    mutating func lapsed(now: ContinuousClock.Instant) -> [Action] {
        let waiting = status.filter { $0.value == .waiting }.map(\.key).sorted()
        guard !waiting.isEmpty else { return [] }
        if now >= deadline {
            for identifier in waiting { resolve(identifier) }
            parts.append(.failure(.cancelled(detail: "another replica's fetch of these identifiers did not end within the call's deadline")))
            return finishIfDone()
        }
        for identifier in waiting { status[identifier] = .claiming }
        return [.claim(waiting)]
    }

    /// The tier was lost (the subscriber dropped, or Redis stalled): what
    /// is waited for is fetched without a claim, and nothing more will be.
    mutating func sharedTierLost() -> [Action] {
        alone = true
        let waiting = status.filter { $0.value == .waiting }.map(\.key).sorted()
        for identifier in waiting { status[identifier] = .fetching }
        return waiting.isEmpty ? [] : [.fetch(waiting, claimed: false)]
    }

    /// Whether any identifier still waits for another replica.
    var isWaiting: Bool { status.values.contains(.waiting) }

    private mutating func resolve(_ identifier: String) {
        status[identifier] = .resolved
        unresolved -= 1
    }

    private mutating func finishIfDone() -> [Action] {
        guard unresolved == 0, !isFinished else { return [] }
        isFinished = true
        return [.finish(parts)]
    }
}
