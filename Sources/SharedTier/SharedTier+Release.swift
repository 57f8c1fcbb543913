import Logging
package import GatewayMetrics
package import MemoryTier
package import EventTransport
package import ProductsDomain

/// Releases, the outcome message and commands nobody waits for.
extension SharedTier {
    /// One fetch's release, waiting for its loop turn's script.
    package struct ReleaseGroup: Sendable {
        package let identifiers: [String]
        package let scope: FetchScope
        package let token: String
        /// Whether the claims are leases in the entry keys (``SharedLease``)
        /// rather than in the claim keys.
        package let leasesInEntryKeys: Bool
        package let kind: SharedOutcomeMessage.Kind
        package let entries: SharedTier.EntryArguments?
    }

    /// After a claimed fetch: store the entries (when they may be kept),
    /// then release the claims, in that order on one connection; when a
    /// replica waits for them, publish the outcome. A `cancelled` fetch (its
    /// caller's deadline) publishes "released", so waiters with time left
    /// take over.
    package func publish(_ identifiers: [String], outcome: Result<SourcePage, ProductsFetchFailure>, scope: FetchScope, token: String, on connection: RedisConnection, leasesInEntryKeys: Bool) {
        let kind: SharedOutcomeMessage.Kind
        switch outcome {
        case .success(let page):
            // The usual miss: its entries and its release in one script, one
            // command instead of one per identifier and one more.
            if let entries = entryArguments(page, scope: scope, identifiers: identifiers) {
                release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys, announcing: .success(page), storing: entries)
                return
            }
            kind = .success(page)
        case .failure(.cancelled):
            kind = .released
        case .failure(let failure):
            kind = .failure(failure)
        }
        release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys, announcing: kind)
    }

    /// Releases claims won for identifiers an entry already answered, and
    /// tells waiters, if any, to look again.
    package func releaseAndAnnounce(_ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection, leasesInEntryKeys: Bool) {
        release(identifiers, scope: scope, token: token, on: connection, leasesInEntryKeys: leasesInEntryKeys)
    }

    /// Releases the claims `token` still holds and, when a replica waits
    /// for any of them (their wait flags), publishes `kind` (by default
    /// "released": look again). The message is built only then: with no
    /// herd, a miss publishes nothing. With `entries`
    /// (``entryArguments(_:scope:identifiers:)``), they are stored first,
    /// by the same script.
    ///
    /// Gathered with the other releases of the connection's loop turn and
    /// sent as one script (``releaseScript``, one group each), not waited
    /// for.
    package func release(
        _ identifiers: [String], scope: FetchScope, token: String, on connection: RedisConnection, leasesInEntryKeys: Bool,
        announcing kind: SharedOutcomeMessage.Kind = .released, storing entries: EntryArguments? = nil
    ) {
        guard !identifiers.isEmpty else { return }
        let group = ReleaseGroup(
            identifiers: identifiers, scope: scope, token: token, leasesInEntryKeys: leasesInEntryKeys, kind: kind, entries: entries
        )
        guard let batch = releaseBatch(for: connection.loop), batch.add(group) else {
            sendReleases([group], on: connection)
            return
        }
    }

    /// One release script for `groups`; each group whose flags were there
    /// publishes its message.
    func sendReleases(_ groups: [ReleaseGroup], on connection: RedisConnection) {
        // By index: a group is read in place, not copied (a copy retains
        // each of its fields, outcome and entries included).
        var keyCount = 0
        var argumentCount = 0
        var bytes = 128
        for index in groups.indices {
            let n = groups[index].identifiers.count
            let stores = groups[index].entries != nil
            keyCount += (!stores || groups[index].leasesInEntryKeys ? 2 : 3) * n
            argumentCount += 4 + (stores ? 2 * n : 0)
            bytes += 200 * n + (groups[index].entries?.items.reduce(0) { $0 + $1.entry.encodedCount + 24 } ?? 0)
        }
        var command = RedisCommand.evalsha(Self.releaseScript, keyCount: keyCount, reservingBytes: bytes, arguments: keyCount + argumentCount)
        command.replyElements = groups.count
        for index in groups.indices {
            let scope = groups[index].scope
            if groups[index].leasesInEntryKeys {
                keys.append("v1:p:", scope, groups[index].identifiers, to: &command)
            } else {
                if groups[index].entries != nil { keys.append("v1:p:", scope, groups[index].identifiers, to: &command) }
                keys.append("v1:c:", scope, groups[index].identifiers, to: &command)
            }
            keys.append("v1:w:", scope, groups[index].identifiers, to: &command)
        }
        for index in groups.indices {
            if groups[index].leasesInEntryKeys {
                SharedLease.append(token: groups[index].token, to: &command)
            } else {
                command.append(groups[index].token)
            }
            command.append(Int64(groups[index].identifiers.count))
            command.append(groups[index].entries == nil ? "0" : "1")
            command.append(groups[index].leasesInEntryKeys ? "p" : "c")
            if let items = groups[index].entries?.items {
                for (entry, keep) in items {
                    entry.append(to: &command)
                    command.append(keep)
                }
            }
        }
        let metrics = self.metrics
        let log = self.log
        let channel = channelBytes
        // The connection is captured strongly: the closure waits in its
        // queue until the reply or its drop (no weak side table left for
        // LeakSanitizer at exit).
        connection.eval(Self.releaseScript, command) { result in
            switch result {
            case .success(.integer(0)):
                // No group had a waiter: nothing to publish.
                break
            case .success(.array(let flags)) where flags.count == groups.count:
                for (group, flag) in zip(groups, flags) {
                    switch flag {
                    case .integer(1):
                        let message = SharedOutcomeMessage(scope: group.scope, identifiers: group.identifiers, kind: group.kind)
                        self.sendCounted([Array("PUBLISH".utf8), channel, message.encoded], on: connection, what: "publish")
                    case .integer(0):
                        break
                    default:
                        metrics.recordSharedErrors(1)
                        log.warning("Redis answered a shared-tier release unexpectedly", metadata: ["reply": "\(SharedTier.describe(flag))"])
                    }
                }
            case .success(let other):
                metrics.recordSharedErrors(1)
                log.warning("Redis refused a shared-tier release", metadata: ["reply": "\(SharedTier.describe(other))"])
            case .failure(let error):
                metrics.recordSharedErrors(1)
                log.warning("a shared-tier release failed", metadata: ["error": "\(error.message)"])
            }
        }
    }

    /// Sends a command nobody waits for; a failure is counted and logged.
    package func sendCounted(_ arguments: [[UInt8]], on connection: RedisConnection, what: String) {
        let metrics = self.metrics
        let log = self.log
        connection.send(arguments) { result in
            Self.count(result, what: what, metrics: metrics, log: log)
        }
    }

    /// A reply nobody waits for: a failure is counted and logged.
    package static func count(_ result: Result<RedisValue, RedisError>, what: String, metrics: GatewayMetrics, log: RateLimitedLog) {
        switch result {
        case .success(.error(let message)):
            metrics.recordSharedErrors(1)
            log.warning("Redis refused a shared-tier \(what)", metadata: ["reply": "\(RedisConnection.errorCode(message))"])
        case .success:
            break
        case .failure(let error):
            metrics.recordSharedErrors(1)
            log.warning("a shared-tier \(what) failed", metadata: ["error": "\(error.message)"])
        }
    }
}
