// The one lock type of the package: a pthread mutex (and its condition variable) around one value.
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

/// A value guarded by a pthread mutex; `withLock` is the only way in. `wait(until:)` sleeps on the lock's
/// condition variable until a `withLockBroadcasting` makes its predicate true.
public final class Lock<Value>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside withLock, withLockBroadcasting and wait(until:), while
    // `mutex` is held. It lives behind a pointer so that no dynamic exclusivity check runs on every access.
    // @usableFromInline: withLock is inlined into every module that locks (the engine's hot path), not called.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    public init(_ value: Value) {
        self.value = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        self.value.initialize(to: value)
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let r = pthread_mutex_init(mutex, nil)
        precondition(r == 0, "pthread_mutex_init failed with \(r)")
        condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        // The condition measures timed waits on CLOCK_MONOTONIC: a wall-clock step cannot stretch or cut them.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        let c = pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        precondition(c == 0, "pthread_cond_init failed with \(c)")
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deinitialize(count: 1)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }

    /// A copy of the value, read under the lock without an inout access. Read a closure kept as the value this way:
    /// generic storage holds it at maximal abstraction, so an inout access (`withLock { $0 }`) reabstracts it and
    /// writes it back wrapped in two more thunks each time, and a closure read once per PDU grows without end.
    @inlinable
    public var current: Value {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return value.pointee
    }

    /// Runs `body` with exclusive access to the value, then wakes every thread in `wait(until:)` to look again.
    public func withLockBroadcasting<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        return try body(&value.pointee)
    }

    /// Sleeps until `body` returns a result: it runs under the lock at once, then after each broadcast.
    /// Not a wait with a limit of its own: each caller says what wakes it (see the bearer).
    public func wait<R>(until body: (inout Value) -> R?) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let r = body(&value.pointee) { return r }
            pthread_cond_wait(condition, mutex)
        }
    }

    /// As `wait(until:)`, but gives up after `timeoutNanoseconds` and returns nil: a bounded wait for a caller
    /// that acts again on timeout (the bearer's loan re-interrupts its reader).
    public func wait<R>(until body: (inout Value) -> R?, timeoutNanoseconds: Int) -> R? {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let total = Int(deadline.tv_nsec) + timeoutNanoseconds
        deadline.tv_sec += total / 1_000_000_000
        deadline.tv_nsec = total % 1_000_000_000
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let r = body(&value.pointee) { return r }
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { return body(&value.pointee) }
        }
    }
}
