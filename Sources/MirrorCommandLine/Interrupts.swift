// Ctrl-C (SIGINT) and SIGTERM for `mirror`: a command that streams (`mirror listen`) ends cleanly on the first
// one; every other command (or a second signal) ends at once with the shell's status, 128 + the signal number.

import ATTStack
import LinuxBluetooth
import LinkCore
import CBlueZSocket
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The signal handler and the thread it wakes. The handler does only async-signal-safe work: an atomic
/// compare-exchange, then either `_exit` or one eventfd write; the waiter thread runs the command's handler.
public enum Interrupts {
    /// 0: no interruptible command runs (a signal exits); 1: one runs and was not signalled; 2: it was.
    static let mode = Atomic<Int>(0)
    /// The eventfd the handler signals; -1 until installed.
    static let wakeFD = Atomic<Int32>(-1)
    /// The signal that cancelled the running interruptible command (SIGINT or SIGTERM), 0 when none did: stored by
    /// the handler before it wakes the waiter, cleared when an interruptible command starts.
    static let received = Atomic<Int32>(0)

    /// `status`, then forgotten: the shell asks once per line whether a signal ended it.
    public static func take() -> ExitStatus? {
        defer { received.store(0, ordering: .sequentiallyConsistent) }
        return status
    }

    /// How the interrupted command exits: 130 for SIGINT, 143 for SIGTERM; nil when no signal cancelled it.
    public static var status: ExitStatus? {
        switch received.load(ordering: .sequentiallyConsistent) {
        case SIGINT: return .interrupted
        case SIGTERM: return .terminated
        default: return nil
        }
    }
    /// Guards the running command's handler.
    private static let handler = Lock<(@Sendable () -> Void)?>(nil)

    /// Installs the SIGINT and SIGTERM handler and starts the thread that acts on it. Idempotent.
    public static func install() {
        guard wakeFD.load(ordering: .relaxed) < 0 else { return }
        let fd = cbz_eventfd()
        guard fd >= 0, wakeFD.compareExchange(expected: -1, desired: fd, ordering: .sequentiallyConsistent).exchanged else {
            if fd >= 0 { _ = cbz_close(fd) }
            return
        }
        var thread = pthread_t()
        if pthread_create(&thread, nil, { _ in
            let fd = Interrupts.wakeFD.load(ordering: .relaxed)
            var revents: Int16 = 0
            while true {
                guard cbz_poll_one(fd, CBZ_POLLIN, -1, &revents) > 0 else { continue }
                _ = cbz_eventfd_drain(fd)
                let h = Interrupts.handler.current
                h?()
            }
        }, nil) == 0 {
            pthread_detach(thread)
        }
        for sig in [SIGINT, SIGTERM] {
            signal(sig) { received in
                if Interrupts.mode.compareExchange(expected: 1, desired: 2, ordering: .sequentiallyConsistent).exchanged {
                    Interrupts.received.store(received, ordering: .sequentiallyConsistent)
                    let saved = errno
                    _ = cbz_eventfd_signal(Interrupts.wakeFD.load(ordering: .relaxed))
                    errno = saved
                } else {
                    _exit(128 + received)
                }
            }
        }
    }

    /// Runs `body` in a task that the first SIGINT or SIGTERM cancels (a second one exits at once). Nests: inside
    /// `mirror shell` a command's own interruptible part (listen) cancels first, and the shell's handler is back after.
    public static func whileInterruptible<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        // The handler is in place before the task starts, so a signal that comes while it starts still cancels it.
        let running = Lock<(task: Task<T, any Error>?, cancelled: Bool)>((nil, false))
        let outer = handler.withLock { h in
            let previous = h
            h = {
                let task = running.withLock { r in
                    r.cancelled = true
                    return r.task
                }
                task?.cancel()
            }
            return previous
        }
        received.store(0, ordering: .sequentiallyConsistent)
        mode.store(1, ordering: .sequentiallyConsistent)
        defer {
            handler.withLock { $0 = outer }
            mode.store(outer == nil ? 0 : 1, ordering: .sequentiallyConsistent)
        }
        // On the link's loop when the caller is (EventLoop.current): a command's body keeps the loop as its executor.
        let task = Task(executorPreference: EventLoop.current) { try await body() }
        if running.withLock({ r in
            r.task = task
            return r.cancelled
        }) {
            task.cancel()
        }
        // The caller's cancellation (a shell line's --timeout) reaches the task as a signal would.
        return try await withTaskCancellationHandler {
            return try await task.value
        } onCancel: { task.cancel() }
    }
}

/// What SIGINT (Ctrl-C) and SIGTERM do, per command: the one table the man page's SIGNALS section prints and the
/// README repeats (ReferenceTests keeps the two the same). Every row holds: the link is closed before the exit.
public let interruptTable: [(commands: String, sigint: String, sigterm: String)] = [
    ("scan", "once the scan may have started (initDeviceForScan sent), sends cancelScan and waits up to 5 s for its Write Response, reads the final state, prints the result (outcome interrupted, cancelScanSent); exit 130",
     "the same; exit 143"),
    ("bench", "prints the figures of the rounds done (\"interrupted by SIGINT after N rounds\", JSON interrupted); exit 130", "the same; exit 143"),
    ("discover", "stops the scan (Stop Discovery), prints the devices seen so far; exit 130", "the same; exit 143"),
    ("listen", "stops listening, prints the count (and the drops); exit 0, the normal end of a listen", "the same; exit 143"),
    ("shell", "at a terminal: cancels the running command and returns to the prompt; reading a script: cancels the running command and ends the script; exit 130",
     "cancels the running command, closes the connection and ends the shell; exit 143"),
    ("every other command", "ends at once; exit 130 (a second signal always does)", "ends at once; exit 143"),
]

