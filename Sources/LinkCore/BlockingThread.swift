// One kept thread for the blocking calls of async code (a terminal read, a wait on another thread's lock): a call
// costs a wake of that thread, never a new thread, and never holds the link's loop.
import CBlueZSocket

/// The one thread for a program's blocking calls (`mirror shell`'s prompt read when no line is buffered, the pairing
/// agent's wait for keys): started at the first call and kept, so a line costs a wake, never a new thread. Calls run
/// one at a time, in order; the thread waits for the next with no limit (it only serves, and ends with the process).
public final class BlockingThread: Sendable {
    public static let shared = BlockingThread()
    private let jobs = Lock<(queue: [@Sendable () -> Void], started: Bool)>(([], false))

    /// Runs `body` on the thread; the caller's task is resumed on its own executor (the shell's: the link's loop) after.
    public func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            let start = jobs.withLockBroadcasting { s -> Bool in
                s.queue.append { continuation.resume(returning: body()) }
                defer { s.started = true }
                return !s.started
            }
            if start { startDetachedThread { [self] in serve() } }
        }
    }

    private func serve() {
        _ = cbz_set_thread_name("mirror-input")
        while true {
            let job = jobs.wait(until: { s -> (@Sendable () -> Void)? in s.queue.isEmpty ? nil : s.queue.removeFirst() })
            job()
        }
    }
}
