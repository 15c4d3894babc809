// An opt-in task executor that lets a caller continue on the bearer's reader thread right after its response
// arrived, instead of waking a pool thread: the only thread hop left per request is the one the kernel forces.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// A task executor for code that runs GATT requests back to back (Core Spec 5.4 Vol 3 Part F §3.3.2 allows one
/// request in flight, so such code waits on every round trip). Inside
/// `withTaskExecutorPreference(client.bearerExecutor) { ... }`, a task whose response the engine delivers is run
/// inline on the transport's reader thread until its next suspension, which is usually its next request.
/// Everywhere else (cancellation, timeouts, other threads) its jobs go to the global concurrent executor.
/// While such code runs inline no PDU is read, so keep it short: heavy work belongs outside the preference.
public final class BearerExecutor: TaskExecutor {
    /// The thread that may run a job inline now (the reader thread while the engine resumes a caller); 0: none.
    private let inlineThread = Atomic<UInt>(0)
    /// True while a caller reads its response inline on the reader thread (`withoutInlineJobs`).
    private let inlineJobsHeld = Atomic<Bool>(false)

    init() {}

    public func enqueue(_ job: consuming ExecutorJob) {
        if claimInline() {
            job.runSynchronously(on: asUnownedTaskExecutor())
        } else {
            globalConcurrentExecutor.enqueue(job)
        }
    }

    /// Whether the calling thread may run one job inline now (the reader thread resuming a caller), and takes that
    /// permission: one job inline per resumption, so nested resumptions it causes go elsewhere (bounded stack depth).
    @inline(__always)
    func claimInline() -> Bool {
        let me = UInt(pthread_self())
        return me != 0 && inlineThread.compareExchange(expected: me, desired: 0, ordering: .acquiringAndReleasing).exchanged
    }

    /// Runs `body` (which resumes a continuation) allowing one job of this executor to run inline on this thread.
    @inline(__always)
    func resumingInline(_ body: () -> Void) {
        if inlineJobsHeld.load(ordering: .relaxed) { return body() }
        let me = UInt(pthread_self())
        inlineThread.store(me, ordering: .releasing)
        body()
        inlineThread.store(0, ordering: .releasing)
    }

    /// Runs `body` (a caller's inline read, on the reader thread) with no other job run inline meanwhile.
    @inline(__always)
    func withoutInlineJobs(_ body: () -> Void) {
        inlineJobsHeld.store(true, ordering: .relaxed)
        body()
        inlineJobsHeld.store(false, ordering: .relaxed)
    }
}
