// SIGINT and SIGTERM for a tool whose work may be interrupted (`mirror`): a signalfd read by one owner, and what a
// signal does while an interruptible task runs (it cancels the task) or not (the process exits at once with 128 +
// the signal). What an interrupt means for each command is the tool's (MirrorCommandLine's Interrupts).
import CBlueZSocket
import LinkCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM through a signalfd (signalfd(2)): both are blocked in every thread from main's first line
/// (`blockSignals`), and the fd is read by one owner: a source of the running command's link loop, or, for a command
/// with no loop, a thread of its own (nothing else waits there); a wait that holds its thread polls it too
/// (`BlockingWait`). What a signal does is the same wherever it is read: `takeSignals`.
public enum InterruptSignals {
    /// 0: no interruptible task runs (a signal exits); 1: one runs and was not signalled; 2: it was.
    static let mode = Atomic<Int>(0)
    /// The signalfd; -1 until installed.
    static let signalFD = Atomic<Int32>(-1)
    /// The signal that cancelled the running interruptible task (SIGINT or SIGTERM), 0 when none did: stored
    /// before the task's handler runs, cleared when an interruptible task starts.
    static let received = Atomic<Int32>(0)
    /// A signal of the same number again within this interval of the one that cancelled the running task is that
    /// signal again, not a second one: GNU `timeout -s INT` (without --foreground) sends it to the child and then to
    /// its process group, microseconds apart, and a second signal would end a scan before its cancelScan.
    public static let sameSignalWindow: Duration = .milliseconds(500)
    static let sameSignalWindowNanoseconds = UInt64(sameSignalWindow.nanosecondsClamped)
    /// When (MonotonicClock nanoseconds) the signal in `received` cancelled the running task.
    static let cancelledAt = Atomic<UInt64>(0)
    /// Whether the reader thread runs (a command without a loop came first): then no loop registers the fd.
    private static let threadStarted = Atomic<Bool>(false)
    /// The loop that has the signalfd as a source, and its token there.
    private static let source = Lock<(loop: EventLoop, token: UInt64)?>(nil)
    /// Guards the running task's handler.
    private static let handler = Lock<(@Sendable () -> Void)?>(nil)

    /// The signal (SIGINT or SIGTERM) that cancelled the running interruptible task, 0 when none did.
    public static var receivedSignal: Int32 { received.load(ordering: .sequentiallyConsistent) }

    /// `receivedSignal`, then forgotten (0).
    public static func takeReceivedSignal() -> Int32 { received.exchange(0, ordering: .sequentiallyConsistent) }

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

    /// What one signal does: cancel the running interruptible task, nothing (the cancelling signal again within
    /// `sameSignalWindow`), or end the process.
    enum Action: Equatable {
        case cancel, repeated, exit
    }

    /// Decides what `signal`, read at `now` (MonotonicClock nanoseconds), does; the first while an interruptible
    /// task runs is recorded as the one that cancelled it. No side effect beyond that record.
    static func action(for signal: Int32, at now: UInt64) -> Action {
        if mode.compareExchange(expected: 1, desired: 2, ordering: .sequentiallyConsistent).exchanged {
            received.store(signal, ordering: .sequentiallyConsistent)
            cancelledAt.store(now, ordering: .sequentiallyConsistent)
            return .cancel
        }
        if mode.load(ordering: .sequentiallyConsistent) == 2, received.load(ordering: .sequentiallyConsistent) == signal,
           now &- cancelledAt.load(ordering: .sequentiallyConsistent) < sameSignalWindowNanoseconds {
            return .repeated  // the cancelling signal again (timeout's second copy): one signal
        }
        return .exit
    }

    /// Acts on one signal read at `now`: cancels the running interruptible task (its handler) or returns `.exit`
    /// for the caller to exit on; `.repeated` does nothing.
    static func deliver(_ signal: Int32, at now: UInt64) -> Action {
        let action = action(for: signal, at: now)
        if action == .cancel { handler.current?() }
        return action
    }

    /// Reads every pending signal and acts on each: the first while an interruptible task runs cancels it (its
    /// handler); any other exits at once with 128 + the signal (130 SIGINT, 143 SIGTERM), as the shell reports it.
    static func takeSignals() {
        let fd = signalFD.load(ordering: .relaxed)
        while true {
            let signal = cbz_signalfd_take(fd)
            guard signal > 0 else { return }
            if deliver(signal, at: MonotonicClock().now().nanoseconds) == .exit { _exit(128 + signal) }
        }
    }

    /// Runs `body` in a task that the first SIGINT or SIGTERM cancels (a second one exits at once). Nests: an inner
    /// interruptible part (a shell's listen) cancels first, and the outer handler is back after.
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
