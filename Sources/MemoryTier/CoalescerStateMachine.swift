//// Which identifiers are being fetched right now, by which fetch, per
/// (app, country, language). Pure: the ``Coalescer`` keeps it under a lock.
package struct CoalescerStateMachine<Fetch: AnyObject> {
    package typealias Key = ScopedIdentifier

    /// How a call's identifiers are covered.
    package struct Plan {
        /// Fetches already in flight that this call joins, each once.
        package var joined: [Fetch] = []
        /// How many of the call's identifiers those cover.
        package var joinedIdentifierCount = 0
        /// Keys nobody is fetching: the caller must start fetches for them
        /// and ``register(_:keys:)`` those at once.
        package var unclaimed: [Key] = []
    }

    private(set) var inFlight: [Key: Fetch] = [:]

    package func plan(keys: [Key]) -> Plan {
        var plan = Plan()
        guard !inFlight.isEmpty else {
            plan.unclaimed = keys
            return plan
        }
        // Usually nothing is joined and `unclaimed` is `keys` itself: the
        // list is only built once a key turns out to be in flight.
        var joinedAny = false
        var seen = Set<ObjectIdentifier>()
        for (index, key) in keys.enumerated() {
            if let fetch = inFlight[key] {
                if !joinedAny {
                    joinedAny = true
                    plan.unclaimed.reserveCapacity(keys.count - 1)
                    plan.unclaimed.append(contentsOf: keys[..<index])
                }
                plan.joinedIdentifierCount += 1
                if seen.insert(ObjectIdentifier(fetch)).inserted { plan.joined.append(fetch) }
            } else if joinedAny {
                plan.unclaimed.append(key)
            }
        }
        if !joinedAny { plan.unclaimed = keys }
        return plan
    }

    package mutating func register(_ fetch: Fetch, keys: some Sequence<Key>) {
        for key in keys {
            let previous = inFlight.updateValue(fetch, forKey: key)
            precondition(previous == nil, "identifier \(key.identifier) claimed twice")
        }
    }

    /// The fetch ended: its identifiers are free again, so the next call
    /// fetches anew (a failure is forgotten here, never cached).
    package mutating func finish(_ fetch: Fetch, keys: [Key]) {
        for key in keys {
            if let index = inFlight.index(forKey: key), inFlight.values[index] === fetch {
                inFlight.remove(at: index)
            }
        }
    }

    /// ``plan(keys:)`` for identifiers of one scope.
    package func plan(scope: FetchScope, identifiers: [String]) -> Plan {
        plan(keys: Key.keys(scope: scope, identifiers: identifiers))
    }

    /// ``register(_:keys:)`` for identifiers of one scope.
    package mutating func register(_ fetch: Fetch, identifiers: [String], scope: FetchScope) {
        register(fetch, keys: Key.keys(scope: scope, identifiers: identifiers))
    }

    /// ``finish(_:keys:)`` for identifiers of one scope.
    package mutating func finish(_ fetch: Fetch, identifiers: [String], scope: FetchScope) {
        finish(fetch, keys: Key.keys(scope: scope, identifiers: identifiers))
    }

    /// Every fetch in flight, each once.
    package var fetches: [Fetch] {
        var seen = Set<ObjectIdentifier>()
        return inFlight.values.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }
}
