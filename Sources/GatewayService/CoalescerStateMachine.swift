/// Which identifiers are being fetched right now, by which fetch, per
/// (app, country, language). Pure: the ``Coalescer`` keeps it under a lock.
struct CoalescerStateMachine<Fetch: AnyObject> {
    /// The scope's hash is computed once per operation, not once per
    /// identifier (it hashes three strings); equality still compares the
    /// whole scope. As in the response cache.
    struct Key: Hashable {
        let scope: FetchScope
        let scopeHash: Int
        let identifier: String

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.identifier == rhs.identifier && lhs.scopeHash == rhs.scopeHash && lhs.scope == rhs.scope
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(scopeHash)
            hasher.combine(identifier)
        }
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
        guard !inFlight.isEmpty else {
            plan.unclaimed = identifiers
            return plan
        }
        let scopeHash = scope.hashValue
        plan.unclaimed.reserveCapacity(identifiers.count)
        var seen = Set<ObjectIdentifier>()
        for identifier in identifiers {
            if let fetch = inFlight[Key(scope: scope, scopeHash: scopeHash, identifier: identifier)] {
                plan.joinedIdentifierCount += 1
                if seen.insert(ObjectIdentifier(fetch)).inserted { plan.joined.append(fetch) }
            } else {
                plan.unclaimed.append(identifier)
            }
        }
        return plan
    }

    mutating func register(_ fetch: Fetch, identifiers: [String], scope: FetchScope) {
        let scopeHash = scope.hashValue
        for identifier in identifiers {
            let previous = inFlight.updateValue(fetch, forKey: Key(scope: scope, scopeHash: scopeHash, identifier: identifier))
            precondition(previous == nil, "identifier \(identifier) claimed twice")
        }
    }

    /// The fetch ended: its identifiers are free again, so the next call
    /// fetches anew (a failure is forgotten here, never cached).
    mutating func finish(_ fetch: Fetch, identifiers: [String], scope: FetchScope) {
        let scopeHash = scope.hashValue
        for identifier in identifiers {
            if let index = inFlight.index(forKey: Key(scope: scope, scopeHash: scopeHash, identifier: identifier)), inFlight.values[index] === fetch {
                inFlight.remove(at: index)
            }
        }
    }

    /// Every fetch in flight, each once.
    var fetches: [Fetch] {
        var seen = Set<ObjectIdentifier>()
        return inFlight.values.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }
}
