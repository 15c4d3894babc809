// Threads without Foundation's `Thread` (full Foundation would pull ICU into a statically linked `mirror`):
// a detached pthread, started by the C shim, that runs one closure.
import CBlueZSocket

/// Starts a detached thread that runs `body` once (what `Thread { body }.start()` did). A process that cannot
/// start a thread (pthread_create's EAGAIN: the thread limit, or memory) cannot run its reader, so it stops there.
public func startDetachedThread(_ body: @escaping @Sendable () -> Void) {
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    let rc = cbz_thread_start({ raw in
        guard let raw else { return }
        Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().body()
    }, context)
    guard rc != 0 else { return }
    Unmanaged<ThreadBody>.fromOpaque(context).release()
    let failure = Errno(rc)
    fatalError("pthread_create: \(failure.name) (\(failure.meaning))")
}

/// The closure, boxed so that it crosses the C shim as one pointer.
private final class ThreadBody: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
