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
