import JSONRPC
import Logging
import MemoryTier
import MonotonicTime
import ProductsDomain

/// At `LOG_LEVEL=debug`, one `products.fetch steps` line per call: which
/// tier answered each identifier, and how long each step took.
///
/// Made only when debug lines are written (``init(context:identifiers:)``
/// is nil otherwise): below `debug` a call holds `nil` and pays one level
/// check, no clock read and no array.
///
/// Tiers: `memory` (a fresh entry in this process), `memory-stale` (a
/// stale entry answered under `stale-while-revalidate`), `redis` (the
/// shared tier's entry), `shared-fetch` (a fetch already in flight that
/// the call joined: another call's, in this process), `upstream` (a fetch
/// the call started: the upstream or the catalog, merged with other calls'
/// misses, or another replica's fetch it waited for through the shared
/// tier), `stale-if-error` (a stale entry after that fetch failed), and
/// `none` (nothing answered it: the call failed). An identifier a step
/// reported unknown is that step's too.
struct CallSteps {
    enum Tier: String {
        case memory, memoryStale = "memory-stale", redis, sharedFetch = "shared-fetch", upstream, staleIfError = "stale-if-error", none
    }

    /// The message of every steps line.
    static let message: Logger.Message = "products.fetch steps"

    private let logger: Logger
    private let started: MonotonicInstant
    private var stepStarted: MonotonicInstant
    private var steps: [Logger.MetadataValue] = []
    /// By slot of the call's identifiers: the tier that answered it.
    private var tiers: [Tier?]
    /// The fetches the call started itself (the others it joined).
    private var ownFetches: Set<ObjectIdentifier> = []

    /// The steps of a call of `count` identifiers when `context` writes
    /// debug lines; nil otherwise.
    init?(context: borrowing RPCCallContext, identifiers count: Int) {
        guard context.logLevel <= .debug else { return nil }
        logger = context.logger
        started = .now
        stepStarted = started
        tiers = Array(repeating: nil, count: count)
    }

    /// The memory lookup ended; `stale` are the identifiers it answered
    /// from stale entries.
    mutating func memoryLookedUp(_ answers: [ProductAnswer?], identifiers: [String], stale: [String]) {
        let staleSet = Set(stale)
        for index in answers.indices where answers[index] != nil && tiers[index] == nil {
            tiers[index] = staleSet.contains(identifiers[index]) ? .memoryStale : .memory
        }
        endStep("memory", identifiers: answers.count)
    }

    /// The shared tier's lookup of `asked` answered (or failed).
    mutating func sharedTierAnswered(_ answers: [ProductAnswer?], asked: Int) {
        attribute(answers, to: .redis)
        endStep("redis", identifiers: asked)
    }

    /// The call claimed its fetches: those in `started` are its own.
    mutating func fetchesClaimed(started: [CoalescedFetch]) {
        for fetch in started { ownFetches.insert(ObjectIdentifier(fetch)) }
    }

    /// The fetch waited for ended: on success it answered each of its
    /// identifiers still open in the call, with a product or as unknown.
    mutating func fetchEnded(_ fetch: CoalescedFetch, identifiers: [String], failed: Bool) {
        let tier: Tier = ownFetches.contains(ObjectIdentifier(fetch)) ? .upstream : .sharedFetch
        if !failed {
            let asked = Set(fetch.identifiers)
            for index in identifiers.indices where tiers[index] == nil && asked.contains(identifiers[index]) {
                tiers[index] = tier
            }
        }
        endStep(tier.rawValue, identifiers: fetch.identifiers.count, failed: failed)
    }

    /// Stale entries were tried after a fetch failed.
    mutating func staleCovered(_ answers: [ProductAnswer?]) {
        attribute(answers, to: .staleIfError)
        endStep(Tier.staleIfError.rawValue, identifiers: answers.count)
    }

    /// Writes the line, with `ok` or the failure's reason.
    func log(identifiers: [String], outcome: Result<EncodedJSON, ProductsFetchFailure>) {
        var byIdentifier: [String: Logger.MetadataValue] = [:]
        for index in identifiers.indices where byIdentifier[identifiers[index]] == nil {
            byIdentifier[identifiers[index]] = .string((tiers[index] ?? .none).rawValue)
        }
        logger.debug(Self.message, metadata: [
            "tiers": .dictionary(byIdentifier),
            "steps": .array(steps),
            "outcome": .string(Self.reason(outcome)),
            "durationMs": .stringConvertible(AccessLog.milliseconds(.now - started)),
        ])
    }

    private static func reason(_ outcome: Result<EncodedJSON, ProductsFetchFailure>) -> String {
        switch outcome {
        case .success: "ok"
        case .failure(let failure): failure.reason
        }
    }

    private mutating func attribute(_ answers: [ProductAnswer?], to tier: Tier) {
        for index in answers.indices where answers[index] != nil && tiers[index] == nil {
            tiers[index] = tier
        }
    }

    private mutating func endStep(_ name: String, identifiers: Int, failed: Bool = false) {
        let now = MonotonicInstant.now
        var step: [String: Logger.MetadataValue] = [
            "step": .string(name),
            "identifiers": .stringConvertible(identifiers),
            "ms": .stringConvertible(AccessLog.milliseconds(now - stepStarted)),
        ]
        if failed { step["failed"] = .stringConvertible(true) }
        steps.append(.dictionary(step))
        stepStarted = now
    }
}
