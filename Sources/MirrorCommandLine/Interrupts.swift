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

/// SIGINT and SIGTERM through a signalfd (signalfd(2)): both are blocked in every thread from main's first line
/// (`blockSignals`), and the fd is read by one owner: a source of the running command's link loop, or, for a command
/// with no loop, a thread of its own (nothing else waits there); a wait that holds its thread polls it too
/// (`BlockingWait`). What a signal does is the same wherever it is read: `takeSignals`.
public enum Interrupts {
    /// 0: no interruptible command runs (a signal exits); 1: one runs and was not signalled; 2: it was.
    static let mode = Atomic<Int>(0)
    /// The signalfd; -1 until installed.
    static let signalFD = Atomic<Int32>(-1)
    /// The signal that cancelled the running interruptible command (SIGINT or SIGTERM), 0 when none did: stored
    /// before the command's handler runs, cleared when an interruptible command starts.
    static let received = Atomic<Int32>(0)
    /// A signal of the same number again within this interval of the one that cancelled the running command is that
    /// signal again, not a second one: GNU `timeout -s INT` (without --foreground) sends it to the child and then to
    /// its process group, microseconds apart, and a second signal would end a scan before its cancelScan.
    public static let sameSignalWindow: Duration = .milliseconds(500)
    static let sameSignalWindowNanoseconds = UInt64(sameSignalWindow.nanosecondsClamped)
    /// When (MonotonicClock nanoseconds) the signal in `received` cancelled the running command.
    static let cancelledAt = Atomic<UInt64>(0)
    /// Whether the reader thread runs (a command without a loop came first): then no loop registers the fd.
    private static let threadStarted = Atomic<Bool>(false)
    /// The loop that has the signalfd as a source, and its token there.
    private static let source = Lock<(loop: EventLoop, token: UInt64)?>(nil)

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

    /// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread started after (they inherit the
    /// mask): first thing in main, before any thread exists, so that only the signalfd ever sees them.
    public static func blockSignals() { StopSignals.block() }

    /// Opens the signalfd (idempotent) and gives it one reader: a source of `loop` when the command has one (on
    /// the loop's thread; `stopServing` takes it out), else a thread of its own. The signals must be blocked
    /// (`blockSignals`): they are blocked here too, for a caller that did not.
    public static func install(on loop: EventLoop? = nil) {
        var fd = signalFD.load(ordering: .relaxed)
        if fd < 0 {
            blockSignals()
            let opened = cbz_signalfd_interrupts()
            guard opened >= 0 else { return }
            if signalFD.compareExchange(expected: -1, desired: opened, ordering: .sequentiallyConsistent).exchanged {
                fd = opened
                BlockingWait.setInterruptSource(fd: fd, take: { takeSignals() })
            } else {
                _ = cbz_close(opened)
                fd = signalFD.load(ordering: .relaxed)
            }
        }
        if let loop, !threadStarted.load(ordering: .relaxed) {
            let register: @Sendable () -> Void = { [fd] in
                let token = loop.makeSourceToken()
                let claimed = source.withLock { s -> Bool in
                    guard s == nil else { return false }
                    s = (loop, token)
                    return true
                }
                guard claimed else { return }
                if !loop.register(fd: fd, token: token, events: CBZ_EPOLLIN, { _ in takeSignals() }) {
                    source.withLock { $0 = nil }
                    startThread(fd)
                }
            }
            if loop.inEventLoop { register() } else { loop.execute(register) }
        } else if loop == nil {
            startThread(fd)
        }
    }

    /// Takes the signalfd out of `loop`'s set (the loop ends only once it has no source): at the end of the
    /// command. A signal from here to the exit stays pending.
    public static func stopServing(on loop: EventLoop) {
        let deregister: @Sendable () -> Void = {
            let token = source.withLock { s -> UInt64? in
                guard let held = s, held.loop === loop else { return nil }
                s = nil
                return held.token
            }
            if let token { loop.deregister(fd: signalFD.load(ordering: .relaxed), token: token) }
        }
        if loop.inEventLoop { deregister() } else { loop.execute(deregister) }
    }

    /// The reader of a command without a loop: one thread, started once, that waits for the signalfd.
    private static func startThread(_ fd: Int32) {
        guard threadStarted.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged else { return }
        startDetachedThread {
            _ = cbz_set_thread_name("mirror-signals")
            var revents: Int16 = 0
            while true {
                guard cbz_poll_one(fd, CBZ_POLLIN, -1, &revents) > 0 else { continue }
                takeSignals()
            }
        }
    }

    /// Reads every pending signal and acts on each: the first while an interruptible command runs cancels it (its
    /// handler); any other exits at once with 128 + the signal (130 SIGINT, 143 SIGTERM), as the shell reports it.
    static func takeSignals() {
        let fd = signalFD.load(ordering: .relaxed)
        while true {
            let signal = cbz_signalfd_take(fd)
            guard signal > 0 else { return }
            let now = MonotonicClock().now().nanoseconds
            if mode.compareExchange(expected: 1, desired: 2, ordering: .sequentiallyConsistent).exchanged {
                received.store(signal, ordering: .sequentiallyConsistent)
                cancelledAt.store(now, ordering: .sequentiallyConsistent)
                handler.current?()
            } else if mode.load(ordering: .sequentiallyConsistent) == 2, received.load(ordering: .sequentiallyConsistent) == signal,
                      now &- cancelledAt.load(ordering: .sequentiallyConsistent) < sameSignalWindowNanoseconds {
                continue  // the cancelling signal again (timeout's second copy): one signal
            } else {
                _exit(128 + signal)
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
    ("every other command", "ends at once; exit 130 (a second signal always does; the same signal again within 0.5 s of the first counts as the first, as GNU timeout sends it twice)", "ends at once; exit 143"),
]

