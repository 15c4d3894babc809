#if canImport(Glibc)
import LinkCore
import Glibc
#endif

/// SIGINT and SIGTERM for the tools that run until stopped (`mirror-sim`, `hostile-peer`): blocked in every thread
/// from the first line, so one sent right after a tool says it is listening stays pending instead of being lost,
/// and taken by `sigwait` on the thread that waits for it. Not part of ATT; shared here by the tools' processes.
package enum StopSignals {
    private static func set() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        return set
    }

    /// Blocks SIGINT and SIGTERM in the calling thread and so in every thread it starts later (they inherit the
    /// mask). Call it first thing in `main`, before any thread exists.
    package static func block() {
        var set = set()
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Waits, without a limit, for SIGINT or SIGTERM (blocked by `block()`) and returns which one came.
    package static func wait() -> Int32 {
        var set = set()
        var received: Int32 = 0
        while sigwait(&set, &received) != 0 {}
        return received
    }
}
