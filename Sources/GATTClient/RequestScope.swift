// Requests one task runs back to back (`GATTClient.withBackToBackRequests`), under one cancellation handler instead
// of one each (adding and removing a handler takes the task's status record lock). On the bearer's reader thread,
// where the task continues after a response (`BearerExecutor`), each request reads its own response there
// (`ATTTransport.readInline`) and takes the outcome from the scope without suspending: no continuation, no job, no
// executor hop, so no status record lock either, per round trip.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ATTStack
import LinuxBluetooth
import Synchronization

/// The requests of the task that opened the scope, one at a time: the request in flight (its cancellation handler
/// cancels it) and how its outcome reaches the task. On the reader thread the task reads its response inline
/// (`ATTTransport.readInline`) and a success delivered there is handed over through `succeededID` alone; any
/// other outcome, or one delivered on another thread, waits in `outcome` for the task (which may suspend for it).
final class RequestScope: Sendable {
    let client: GATTClient
    /// The operation ID of the task's request in the engine, 0 when none may be cancelled.
    let inFlight = Atomic<UInt64>(0)
    /// The ID of the task's last request whose outcome was delivered: an inline read of its response ends.
    let resolvedID = Atomic<UInt64>(0)
    /// The ID of the task's last request that succeeded while its task read inline on this thread (no lock).
    let succeededID = Atomic<UInt64>(0)
    /// The thread reading the request's response inline (`ATTEngine.readResponseInline`), 0 when none.
    let readingThread = Atomic<UInt>(0)
    /// Set by the scope's cancellation handler, before it cancels the request in flight.
    let cancelled = Atomic<Bool>(false)
    /// How many outcomes the task waited for (suspended), as opposed to taking them on its own inline read.
    let waits = Atomic<Int>(0)

    /// An outcome delivered before the task took it, or the task suspended waiting for one.
    struct Outcome {
        var delivered: (id: UInt64, result: Result<ATTPDU, GATTError>)?
        var waiting: (id: UInt64, continuation: EngineContinuation<ATTPDU>)?
    }
    /// Guards the outcomes that do not go through `succeededID`; a continuation leaves it before it is resumed.
    let outcome = Lock(Outcome())

    init(client: GATTClient) { self.client = client }

    /// The scope's cancellation handler: the request in flight is released at once, as its own handler would.
    func cancel() {
        cancelled.store(true, ordering: .sequentiallyConsistent)
        let id = inFlight.load(ordering: .sequentiallyConsistent)
        if id != 0 { client.cancelRequest(id) }
    }

    /// Whether the task that opened the scope is cancelled (as Task.isCancelled inside it).
    var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }

    /// The engine delivers request `id`'s outcome (once). A success on the thread that reads it inline (the task
    /// itself, below in its stack) needs no lock; anything else is kept for the task or resumes it, and an inline
    /// read on another thread is interrupted so that the task takes it at once.
    func deliver(_ id: UInt64, _ result: Result<ATTPDU, GATTError>) {
        let me = UInt(pthread_self())
        let reader = readingThread.load(ordering: .sequentiallyConsistent)
        if reader == me, case .success(.writeResponse) = result {
            succeededID.store(id, ordering: .relaxed)
            resolvedID.store(id, ordering: .relaxed)
            return
        }
        let waiter: EngineContinuation<ATTPDU>? = outcome.withLock { o in
            if let w = o.waiting, w.id == id {
                o.waiting = nil
                return w.continuation
            }
            o.delivered = (id, result)
            return nil
        }
        resolvedID.store(id, ordering: .sequentiallyConsistent)
        if let waiter { waiter.resume(with: result.mapError { $0 as any Error }) }
        if reader != 0, reader != me { client.interruptInlineReads() }
    }

    /// Request `id`'s outcome, after the task's inline read: at once when it was delivered, else when it is.
    @inline(__always)
    nonisolated(nonsending) func take(_ id: UInt64) async throws(GATTError) -> ATTPDU {
        if succeededID.load(ordering: .relaxed) == id { return .writeResponse }
        return try await wait(id)
    }

    /// The outcome of request `id` when it did not come back on the task's own inline read: kept, or waited for.
    nonisolated(nonsending) private func wait(_ id: UInt64) async throws(GATTError) -> ATTPDU {
        waits.wrappingAdd(1, ordering: .relaxed)
        do {
            return try await withEngineContinuation { (c: EngineContinuation<ATTPDU>) in
                let ready: Result<ATTPDU, GATTError>? = outcome.withLock { o in
                    if let d = o.delivered, d.id == id {
                        o.delivered = nil
                        return d.result
                    }
                    o.waiting = (id, c)
                    return nil
                }
                if let ready { c.resume(with: ready.mapError { $0 as any Error }) }
            }
        } catch {
            throw GATTError.from(error, operation: "a Write Request")
        }
    }
}

/// The Write Requests of one task run back to back (`GATTClient.withBackToBackRequests`). Not Sendable: it belongs
/// to the task it was given to (another task's request made through it would escape the task's cancellation).
public final class BackToBackRequests {
    public let client: GATTClient
    let scope: RequestScope
    /// The task's requests are encoded here one after another (so they allocate once, not once each).
    let buffer = ATTEncodingBuffer()

    init(client: GATTClient) {
        self.client = client
        scope = RequestScope(client: client)
    }

    /// `GATTClient.write(handle:value:)`: one Write Request (Part G §4.9.3), its cancellation the scope's.
    nonisolated(nonsending) public func write(handle: UInt16, value: [UInt8]) async throws(GATTError) {
        try await client.write(handle: handle, value: value, scope: scope, buffer: buffer)
    }
}

extension GATTClient {
    /// Runs `body`, whose Write Requests go back to back through the `BackToBackRequests` it is given: the task
    /// continues on the bearer's reader thread as soon as each response arrives (as inside
    /// `withTaskExecutorPreference(client.bearerExecutor)`), and one cancellation handler covers them all (cancelling
    /// the task releases the request in flight at once, as ever). Keep `body` short: while it runs inline on the
    /// reader thread no PDU is read.
    public func withBackToBackRequests<T>(_ body: (BackToBackRequests) async throws -> T) async throws -> T {
        let requests = BackToBackRequests(client: self)
        return try await withTaskCancellationHandler {
            try await withTaskExecutorPreference(bearerExecutor) { try await body(requests) }
        } onCancel: { [scope = requests.scope] in
            scope.cancel()
        }
    }

    /// Stops the inline reads of every bearer of this client (`ATTTransport.interruptInlineRead`): a request read
    /// inline was resumed from another thread.
    func interruptInlineReads() {
        engine.transport.interruptInlineRead()
        guard enhancedCount.load(ordering: .acquiring) > 0 else { return }
        for e in enhanced.withLock({ $0 }) { e.transport.interruptInlineRead() }
    }

    /// Cancels the request with operation ID `id` on whichever bearer holds it (IDs are unique per client).
    func cancelRequest(_ id: UInt64) {
        engine.cancel(id)
        guard enhancedCount.load(ordering: .acquiring) > 0 else { return }
        for e in enhanced.withLock({ $0 }) { e.cancel(id) }
    }
}
