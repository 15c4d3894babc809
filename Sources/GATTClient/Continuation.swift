// The continuation type the engine stores: CheckedContinuation in every build, so the tests run what ships, and a
// second resume or one never resumed traps or is reported instead of corrupting memory. The engine's state machine
// keeps the rule anyway: a continuation leaves the state before it is resumed.

import ATTStack

typealias EngineContinuation<T: Sendable> = CheckedContinuation<T, any Error>

@inline(__always)
nonisolated(nonsending) func withEngineContinuation<T: Sendable>(_ body: (EngineContinuation<T>) -> Void) async throws -> T {
    try await withCheckedThrowingContinuation(body)
}
