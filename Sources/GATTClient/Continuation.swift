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

/// Who waits for a request's outcome: a suspended task, or a back-to-back request's scope (`RequestScope`), whose
/// task reads its response inline on the reader thread and takes the outcome there without suspending.
enum RequestContinuation {
    case task(EngineContinuation<ATTPDU>)
    case scope(RequestScope, id: UInt64)

    @inline(__always)
    func resume(returning pdu: ATTPDU) {
        switch self {
        case .task(let c): c.resume(returning: pdu)
        case .scope(let scope, let id): scope.deliver(id, .success(pdu))
        }
    }

    @inline(__always)
    func resume(throwing error: GATTError) {
        switch self {
        case .task(let c): c.resume(throwing: error)
        case .scope(let scope, let id): scope.deliver(id, .failure(error))
        }
    }
}

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
