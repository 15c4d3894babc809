// A lock around a value that ThreadSanitizer can see.

import Foundation

/// A value behind a lock, with `Mutex`'s `withLock` shape, built on pthread_mutex (NSLock). Why not
/// `Synchronization.Mutex`: with Swift 6.3 on Linux, TSan does not see Mutex's ordering and reports
/// false "Swift access races" on every value it guards (a two-thread append/count test reproduces it),
/// while pthread_mutex is intercepted by TSan, so `swift test --sanitize=thread` stays meaningful.
public final class LockedValue<Value: Sendable>: @unchecked Sendable {
    // `lock` guards `value`: every access goes through withLock.
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// A value behind a lock with a condition variable (NSCondition: a pthread mutex and condition variable, both
/// visible to TSan): `withLock` as in `LockedValue`, and `wait(until:)` for a thread that sleeps until another
/// thread changes the value and calls `withLockBroadcasting`.
final class ConditionValue<Value: Sendable>: @unchecked Sendable {
    // `condition` guards `value`: every access goes through withLock, withLockBroadcasting or wait(until:).
    private let condition = NSCondition()
    private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    @inline(__always)
    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        condition.lock()
        defer { condition.unlock() }
        return try body(&value)
    }

    /// Runs `body` with exclusive access to the value, then wakes every thread in `wait(until:)` to look again.
    func withLockBroadcasting<R>(_ body: (inout Value) -> R) -> R {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return body(&value)
    }

    /// Sleeps until `body` returns a result: it runs under the lock at once, then after each broadcast.
    /// Not a wait with a limit of its own: each caller says what wakes it (see the bearer).
    func wait<R>(until body: (inout Value) -> R?) -> R {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let r = body(&value) { return r }
            condition.wait()
        }
    }
}
