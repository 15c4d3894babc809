// The lock that guards the engine's state, and shared state in Mirror, the simulator and the CLI: a pthread mutex around one value.
//
// Why not `Mutex` from the Synchronization module: on Linux it is built on raw futex syscalls that
// ThreadSanitizer cannot see, so `swift test --sanitize=thread` reports every access it guards as a race (checked
// with a two-thread probe under Swift 6.3.1: Mutex reports, a pthread mutex does not). A pthread mutex costs the
// same on the uncontended path and keeps the sanitizer useful. The API mirrors `Mutex.withLock`.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a pthread mutex; `withLock` is the only way in.
package final class Lock<Value>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside `withLock`, while `mutex` is held. It lives behind a
    // pointer so that no dynamic exclusivity check runs on every access (the mutex already excludes).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let value: UnsafeMutablePointer<Value>

    package init(_ value: Value) {
        self.value = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        self.value.initialize(to: value)
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let r = pthread_mutex_init(mutex, nil)
        precondition(r == 0, "pthread_mutex_init failed with \(r)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inline(__always)
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
