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
