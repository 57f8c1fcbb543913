import Foundation
import Synchronization

/// Starts child processes one at a time in the test process. Foundation's
/// `Process.run()` on Linux is not safe to call from several threads at
/// once: under the parallel tests, a `redis-cli` launch crashed in `memcpy`
/// inside `Process.run()` while another test launched one too. Only the
/// launch is serialized; the children run, and are waited for, together.
enum ProcessLaunch {
    private static let lock = Mutex(())

    static func run(_ process: Process) throws {
        try lock.withLock { _ in try process.run() }
    }
}
