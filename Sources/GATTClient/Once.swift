// The resume-exactly-once box and named deadlines: every wait has a limit, and a timeout says what it waited for.
import ATTStack
import LinkCore
import Synchronization

/// A box around one continuation that resumes exactly once, from whichever side gets there first: a callback,
/// a deadline or the waiting task's cancellation. A result that arrives before anyone waits is kept and handed
/// over when the waiter attaches; every later result is dropped (never a second resume, never a crash).
public final class OnceBox<T: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(EngineContinuation<T>)
        case early(Result<T, any Error>)
        case done
    }
    /// Guards the continuation or the early result; a continuation leaves the state before it is resumed.
    private let state = Lock<State>(.empty)

    public init() {}

    /// Delivers the one result. Returns false when a result was already delivered (this one is dropped).
    @discardableResult
    public func finish(_ result: Result<T, any Error>) -> Bool {
        let (taken, accepted): (EngineContinuation<T>?, Bool) = state.withLock { s in
            switch s {
            case .empty:
                s = .early(result)
                return (nil, true)
            case .waiting(let c):
                s = .done
                return (c, true)
            case .early, .done:
                return (nil, false)
            }
        }
        taken?.resume(with: result)
        return accepted
    }

    /// True once a result has been delivered.
    public var isFinished: Bool {
        state.withLock { s in
            if case .empty = s { return false }
            if case .waiting = s { return false }
            return true
        }
    }

    /// Waits for the one result. Cancelling the waiting task finishes the box with `CancellationError`.
    /// Call at most once.
    public func value() async throws -> T {
        try await withTaskCancellationHandler {
            try await withEngineContinuation { (c: EngineContinuation<T>) in
                let ready: Result<T, any Error>? = state.withLock { s in
                    switch s {
                    case .early(let r):
                        s = .done
                        return r
                    case .empty:
                        s = .waiting(c)
                        return nil
                    case .waiting, .done:
                        preconditionFailure("OnceBox.value() called twice")
                    }
                }
                if let ready { c.resume(with: ready) }
            }
        } onCancel: {
            finish(.failure(CancellationError()))
        }
    }
}

/// Runs `work` with a named limit on `clock`: returns its result, or throws `GATTError.timeout` naming `what`
/// once `limit` passes. The limit is armed before the work starts. The work is cancelled when the limit passes and
/// the function returns at once, even if the work ignores cancellation (the work's late result is dropped).
public func withDeadline<T: Sendable>(
    _ limit: Duration, waitingFor what: String, handle: UInt16? = nil, handleName: String? = nil,
    clock: any GATTClock = MonotonicClock(),
    _ work: @escaping @Sendable () async throws -> T
) async throws -> T {
    let once = OnceBox<T>()
    // The work's task once it has started; a limit that passes before then leaves `once` finished instead.
    let started = Lock<Task<Void, Never>?>(nil)
    let error = GATTError.timeout(GATTTimeoutError(waitingFor: what, handle: handle, handleName: handleName, after: limit))
    let wakeup = clock.schedule(at: clock.now().advanced(by: limit)) {
        if once.finish(.failure(error)) { started.current?.cancel() }
    }
    defer { wakeup.cancel() }
    let worker = Task {
        do { once.finish(.success(try await work())) } catch { once.finish(.failure(error)) }
    }
    started.withLock { $0 = worker }
    if once.isFinished { worker.cancel() }
    return try await withTaskCancellationHandler {
        try await once.value()
    } onCancel: {
        worker.cancel()
    }
}

extension GATTClock {
    /// Suspends until `deadline` on this clock. Task cancellation ends the sleep at once with `CancellationError`.
    public func sleep(until deadline: ClockInstant) async throws(CancellationError) {
        let once = OnceBox<Void>()
        let wakeup = schedule(at: deadline) { once.finish(.success(())) }
        defer { wakeup.cancel() }
        do {
            try await once.value()
        } catch {
            throw CancellationError()
        }
    }

    /// Suspends for `duration` on this clock.
    public func sleep(for duration: Duration) async throws(CancellationError) {
        try await sleep(until: now().advanced(by: duration))
    }
}
