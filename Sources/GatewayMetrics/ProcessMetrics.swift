#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
package import Prometheus

/// The usual `process_*` series, read from `/proc/self` when `/metrics` is
/// scraped (a few small file reads; nothing runs in between scrapes).
package struct ProcessMetrics: Sendable {
    private let startTime: Prometheus.Gauge
    private let residentMemory: Prometheus.Gauge
    private let openFileDescriptors: Prometheus.Gauge
    private let cpuSeconds: Prometheus.Gauge

    package init(registry: PrometheusCollectorRegistry) {
        startTime = registry.makeGauge(descriptor: GatewayMetrics.family("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds."))
        residentMemory = registry.makeGauge(descriptor: GatewayMetrics.family("process_resident_memory_bytes", "Resident memory size in bytes."))
        openFileDescriptors = registry.makeGauge(descriptor: GatewayMetrics.family("process_open_fds", "Number of open file descriptors."))
        cpuSeconds = registry.makeGauge(descriptor: GatewayMetrics.family("process_cpu_seconds_total", "User and system CPU time spent, in seconds."))
        startTime.set(to: Date().timeIntervalSince1970)
    }

    /// Refreshes the gauges; called just before the exposition is written.
    package func refresh() {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
           let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) {
            residentMemory.set(to: kilobytes * 1024)
        }
        if let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            openFileDescriptors.set(to: Double(descriptors.count))
        }
        // Fields 14 and 15 of /proc/self/stat (after the parenthesised
        // command name) are user and system time in clock ticks; Linux
        // reports them at USER_HZ = 100 on every architecture.
        if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
           let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) {
                cpuSeconds.set(to: (user + system) / 100)
            }
        }
    }
}
