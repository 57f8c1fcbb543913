package import EventTransport

/// The Lua scripts the tier runs in Redis, in one place: each is the
/// protocol's one atomic step (lookup, claim, renew, release), read
/// together with ``SharedClaimStateMachine``'s description.
extension SharedTier {
    /// The shared-tier lookup: for each of `KEYS` (entry keys), `SET key
    /// ARGV[1] NX PX ARGV[2] GET`, whose reply is the entry there (nothing
    /// written) or nil (the lease `ARGV[1]` is written in its place); a key
    /// that came before in `KEYS` is answered with the (1-based) position
    /// of its first, and not run again, so the reply holds each entry once
    /// however many calls of the turn asked for it. One script for a loop
    /// turn's lookups, not a `MULTI` transaction: Redis answers it with one
    /// reply, where a transaction of n keys answers n + 2 (`OK`, n
    /// `QUEUED`, then `EXEC`'s), each of which the gateway reads and hiredis
    /// tracks. `pcall`: a key of another type is an error in its place (the
    /// claim script takes it over), not the whole lookup's.
    ///
    /// When every key was written (the usual miss: no entry, no lease, no
    /// key asked twice), the reply is the integer 0 instead of an array of
    /// nils: one reply object to read and free, not one per key.
    package static let lookupScript = RedisScript("""
        local found, first, all = {}, {}, true
        for i, key in ipairs(KEYS) do
          if first[key] then
            found[i] = first[key]
            all = false
          else
            first[key] = i
            found[i] = redis.pcall('SET', key, ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
            if found[i] then all = false end
          end
        end
        if all then return 0 end
        return found
        """)

    /// Releases (and stores) for any number of fetches, in groups, one
    /// after the other. For each group, `ARGV` holds the claim value its
    /// token wrote, its identifier count `n`, whether it stores (`1`) and
    /// where its claims are (`p`: leases in the entry keys, ``SharedLease``;
    /// `c`: the claim keys), then, when it stores, each entry's value and
    /// time to keep (ms). `KEYS` holds, in the same order: for claims in the
    /// claim keys, its `n` entry keys when it stores, then its `n` claims;
    /// for leases, its `n` entry keys (the claims themselves); then its `n`
    /// wait flags.
    ///
    /// A group reads its claims and flags first, then stores its entries
    /// (they are its replica's answer, whoever holds the claims now; a
    /// lease in the entry key is replaced by its entry), then releases the
    /// claims its token still holds (a claim that lapsed and was taken over
    /// is not its to release): it deletes them and their wait flags. The
    /// reply has one integer per group: 1 when any of its flags was there
    /// (publish), else 0; or, when no group has a flag (the usual case: no
    /// replica waits), the integer 0 alone.
    ///
    /// Nothing is held once the fetch has ended: a call that comes after
    /// it finds the identifier free and fetches at once, and a replica
    /// that waited gets the outcome message. (A claim held a while longer
    /// "as published" made every call arriving meanwhile wait for a poll,
    /// as no message follows it.)
    ///
    /// However many groups and identifiers, the claims and the wait flags
    /// are read with one MGET each and what goes is deleted with one DEL.
    /// Lists go to commands in chunks: Lua's unpack takes at most a few
    /// thousand values, and a call may ask GATEWAY_MAX_IDS (up to 10000).
    package static let releaseScript = RedisScript("""
        local function mget(list)
          local values = {}
          for s = 1, #list, 1000 do
            local part = redis.call('MGET', unpack(list, s, math.min(s + 999, #list)))
            for k = 1, #part do values[s + k - 1] = part[k] end
          end
          return values
        end
        local groups, claimKeys, flagKeys = {}, {}, {}
        local k, a = 0, 0
        while a < #ARGV do
          local group = {
            token = ARGV[a + 1], n = tonumber(ARGV[a + 2]),
            inEntry = ARGV[a + 4] == 'p', base = #claimKeys, entries = k
          }
          local stores, n = ARGV[a + 3] == '1', group.n
          a = a + 4
          if stores then
            group.values = a
            a = a + 2 * n
            if not group.inEntry then k = k + n end
          end
          for i = 1, n do
            claimKeys[#claimKeys + 1] = KEYS[k + i]
            flagKeys[#flagKeys + 1] = KEYS[k + n + i]
          end
          k = k + 2 * n
          groups[#groups + 1] = group
        end
        -- Every group's claims and wait flags in two reads, whatever the
        -- number of groups; what goes is deleted in one command at the end.
        local claims, flags = mget(claimKeys), mget(flagKeys)
        local gone, result, any = {}, {}, false
        for g = 1, #groups do
          local group, waited = groups[g], 0
          for i = 1, group.n do
            local j = group.base + i
            local ours = claims[j] == group.token
            local flagged = ours and flags[j] ~= false
            if flagged then
              waited = 1
              gone[#gone + 1] = flagKeys[j]
            end
            if group.values then
              redis.call('SET', KEYS[group.entries + i], ARGV[group.values + 2 * i - 1], 'PX', ARGV[group.values + 2 * i])
            end
            -- A lease in the entry key that an entry replaced is gone already.
            if ours and not (group.inEntry and group.values) then
              gone[#gone + 1] = claimKeys[j]
            end
          end
          result[g] = waited
          if waited == 1 then any = true end
        end
        for s = 1, #gone, 1000 do
          redis.call('DEL', unpack(gone, s, math.min(s + 999, #gone)))
        end
        if not any then return 0 end
        return result
        """)

    /// For each identifier `i` of `n` (`KEYS[i]` its claim key, `KEYS[n+i]`
    /// its wait flag, `KEYS[2n+i]` its entry key), with `ARGV[1]` the
    /// token, `ARGV[2]` a lease (ms), `ARGV[3]` the token's lease value
    /// (``SharedLease``) and `ARGV[4]` the start of every token of this
    /// replica, one integer (below; 2 more when the identifier's wait flag
    /// was not there before this claim: a replica that set it while it
    /// waited then knows the holder's release saw it, and published):
    /// - no entry (or a key that is not a string, or bytes that are
    ///   neither an entry nor a lease): the lease goes into the entry key,
    ///   where the fetch's entry will replace it (1);
    /// - this token's lease there: renewed (1);
    /// - another lease of this replica there: taken over (1). This replica
    ///   never waits for itself: its fetches in flight are joined in
    ///   process, so such a lease is one no fetch runs under (a lookup's
    ///   that joined a fetch instead, or a fetch's that has ended), whose
    ///   release is on its way; waiting for it would wait for a poll;
    /// - another replica's lease there: held (0), and the wait flag says
    ///   someone waits for its outcome (for a lease's time: a waiter sets it
    ///   again at every look); unless its time left is longer than a lease
    ///   (no replica writes such a lease): then it is taken over (1);
    /// - an entry (one not fresh enough, or the lookup would have answered
    ///   from it): the entry stays for stale answers, and the claim key is
    ///   claimed: taken when free, without expiry, with a longer expiry than
    ///   a lease, or not a string (2); renewed when it holds the token, or
    ///   taken when it holds another of this replica's (2); else held (0),
    ///   with the wait flag set.
    package static let claimScript = RedisScript("""
        local n = #KEYS / 3
        local lease = tonumber(ARGV[2])
        local mine = ARGV[4]
        local function ours(value, from)
          return type(value) == 'string' and string.sub(value, from, from + #mine - 1) == mine
        end
        local won, flagged = {}, {}
        for i = 1, n do
          local entryKey, flag = KEYS[2 * n + i], KEYS[n + i]
          flagged[i] = redis.call('EXISTS', flag) == 1
          local value = redis.pcall('GET', entryKey)
          local head = type(value) == 'string' and string.sub(value, 1, 4) or nil
          if head == nil or (head ~= 'OGW1' and head ~= 'OGC1') then
            redis.call('SET', entryKey, ARGV[3], 'PX', lease)
            won[i] = 1
          elseif value == ARGV[3] then
            redis.call('PEXPIRE', entryKey, lease)
            won[i] = 1
          elseif head == 'OGC1' then
            local ttl = redis.call('PTTL', entryKey)
            if ttl == -1 or ttl > lease or ours(value, 5) then
              redis.call('SET', entryKey, ARGV[3], 'PX', lease)
              won[i] = 1
            else
              redis.call('SET', flag, '1', 'PX', lease)
              won[i] = 0
            end
          else
            local key = KEYS[i]
            local ttl = redis.call('PTTL', key)
            if ttl == -2 or ttl == -1 or ttl > lease or redis.call('TYPE', key).ok ~= 'string' then
              redis.call('SET', key, ARGV[1], 'PX', lease)
              won[i] = 2
            elseif redis.call('GET', key) == ARGV[1] then
              redis.call('PEXPIRE', key, lease)
              won[i] = 2
            elseif ours(redis.call('GET', key), 1) then
              redis.call('SET', key, ARGV[1], 'PX', lease)
              won[i] = 2
            else
              redis.call('SET', flag, '1', 'PX', lease)
              won[i] = 0
            end
          end
          if won[i] > 0 and not flagged[i] then won[i] = won[i] + 2 end
        end
        return won
        """)

    /// Renews the lease of each claim key that still holds `ARGV[1]`.
    package static let renewScript = RedisScript("""
        for _, key in ipairs(KEYS) do
          if redis.call('GET', key) == ARGV[1] then redis.call('PEXPIRE', key, ARGV[2]) end
        end
        return 0
        """)
}
