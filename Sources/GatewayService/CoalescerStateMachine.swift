/// Which identifiers are being fetched right now, by which fetch, per
/// (app, country, language). Pure: the ``Coalescer`` keeps it under a lock.
struct CoalescerStateMachine<Fetch: AnyObject> {
    struct Key: Hashable {
        let scope: FetchScope
        let identifier: String
    }

    /// How a call's identifiers are covered.
    struct Plan {
        /// Fetches already in flight that this call joins, each once.
        var joined: [Fetch] = []
        /// How many of the call's identifiers those cover.
        var joinedIdentifierCount = 0
        /// Identifiers nobody is fetching: the caller must start fetches
        /// for them and ``register(_:identifiers:scope:)`` those at once.
        var unclaimed: [String] = []
    }

    private(set) var inFlight: [Key: Fetch] = [:]

    func plan(scope: FetchScope, identifiers: [String]) -> Plan {
        var plan = Plan()
        var seen = Set<ObjectIdentifier>()
        for identifier in identifiers {
            if let fetch = inFlight[Key(scope: scope, identifier: identifier)] {
                plan.joinedIdentifierCount += 1
                if seen.insert(ObjectIdentifier(fetch)).inserted { plan.joined.append(fetch) }
            } else {
                plan.unclaimed.append(identifier)
            }
        }
        return plan
    }

    mutating func register(_ fetch: Fetch, identifiers: [String], scope: FetchScope) {
        for identifier in identifiers {
            let key = Key(scope: scope, identifier: identifier)
            precondition(inFlight[key] == nil, "identifier \(identifier) claimed twice")
            inFlight[key] = fetch
        }
    }

    /// The fetch ended: its identifiers are free again, so the next call
    /// fetches anew (a failure is forgotten here, never cached).
    mutating func finish(_ fetch: Fetch, identifiers: [String], scope: FetchScope) {
        for identifier in identifiers {
            let key = Key(scope: scope, identifier: identifier)
            if inFlight[key] === fetch { inFlight[key] = nil }
        }
    }

    /// Every fetch in flight, each once.
    var fetches: [Fetch] {
        var seen = Set<ObjectIdentifier>()
        return inFlight.values.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }
}
