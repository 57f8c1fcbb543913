import Synchronization

/// Whether `/readyz` answers 200: only between start-up and the first
/// shutdown signal.
final class ReadinessState: Sendable {
    enum Phase: Int, Sendable { case starting, ready, draining }

    private let value = Atomic<Int>(Phase.starting.rawValue)

    var phase: Phase { Phase(rawValue: value.load(ordering: .acquiring))! }

    func set(_ phase: Phase) { value.store(phase.rawValue, ordering: .releasing) }
}
