// The lock that guards shared state in Mirror, the simulator and the mirror commands: a pthread mutex around
// one value. Not `Mutex` from Synchronization: on Linux that is built on raw futex syscalls ThreadSanitizer
// cannot see, so `swift test --sanitize=thread` reports every access it guards as a race (checked here with a
// four-thread append probe under Swift 6.3.1); a pthread mutex keeps the sanitizer useful. Same API as Mutex.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a pthread mutex; `withLock` is the only way in.
package final class Lock<Value>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside `withLock`, while `mutex` is held.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let r = pthread_mutex_init(mutex, nil)
        precondition(r == 0, "pthread_mutex_init failed with \(r)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inline(__always)
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
