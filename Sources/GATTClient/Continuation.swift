// The continuation type the engine stores. Debug builds (and so every test run) use CheckedContinuation, which
// traps on a second resume and reports one that is never resumed; release builds use UnsafeContinuation, whose
// exactly-once rule the engine's state machine guarantees (a continuation leaves the state before it is resumed).

import ATTStack

#if DEBUG
typealias EngineContinuation<T: Sendable> = CheckedContinuation<T, any Error>

@inline(__always)
nonisolated(nonsending) func withEngineContinuation<T: Sendable>(_ body: (EngineContinuation<T>) -> Void) async throws -> T {
    try await withCheckedThrowingContinuation(body)
}
#else
typealias EngineContinuation<T: Sendable> = UnsafeContinuation<T, any Error>

@inline(__always)
nonisolated(nonsending) func withEngineContinuation<T: Sendable>(_ body: (EngineContinuation<T>) -> Void) async throws -> T {
    try await withUnsafeThrowingContinuation(body)
}
#endif

/// The continuation the engine stores, made from an unsafe one (for the executor-inheriting continuation of
/// `ATTEngine.request`): checked in debug builds, as withCheckedThrowingContinuation makes it; as is in release builds.
@inline(__always)
func engineContinuation<T: Sendable>(_ c: UnsafeContinuation<T, any Error>) -> EngineContinuation<T> {
    #if DEBUG
    CheckedContinuation(continuation: c)
    #else
    c
    #endif
}
