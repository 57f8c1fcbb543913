package import EventTransport

/// A lease a lookup takes where the entry would be: when `{prefix}v1:p:…`
/// holds no entry, the lookup writes this there (`SET … NX PX 1000 GET`),
/// so reading the entry and claiming the fetch are one command
/// (``SharedTier/lookupScript`` runs one per key). The fetch's store then replaces the lease with the entry.
///
///     "OGC1" | the claim's token
///
/// An entry begins with "OGW1" (``SharedCacheEntry``): the two never read
/// as each other. A lease whose time left is longer than a lease is not a
/// lease (``SharedTier/claimScript`` takes it over).
package enum SharedLease {
    package static let magic: [UInt8] = Array("OGC1".utf8)

    /// The value of a lease held by `token`.
    package static func value(token: String) -> [UInt8] {
        magic + Array(token.utf8)
    }

    /// Appends the value of a lease held by `token` to a command, as one
    /// argument, with no buffer of its own.
    package static func append(token: String, to command: inout RedisCommand) {
        command.beginArgument()
        command.appendPart(magic)
        command.appendPart(token)
        command.endArgument()
    }

    /// Whether `bytes` are a lease (of any replica), not an entry.
    package static func isLease(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.starts(with: magic)
    }
}
