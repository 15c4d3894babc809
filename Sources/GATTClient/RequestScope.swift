// Requests one task runs back to back (`GATTClient.withBackToBackRequests`): resumed on the bearer's reader thread
// (`BearerExecutor`) and covered by one cancellation handler instead of one each. Adding and removing a handler takes
// the task's status record lock, and so does every hop that looks up the task's executor preference: a request
// made here takes that lock twice per round trip instead of five times.
import Synchronization

/// The request in flight of the task that opened the scope; the scope's cancellation handler cancels that request.
final class RequestScope: Sendable {
    /// The operation ID of the task's request in the engine, 0 when none may be cancelled.
    let inFlight = Atomic<UInt64>(0)

    /// The scope's cancellation handler: the request in flight is released at once, as its own handler would.
    func cancel(_ client: GATTClient) {
        let id = inFlight.load(ordering: .sequentiallyConsistent)
        if id != 0 { client.cancelRequest(id) }
    }
}

/// The Write Requests of one task run back to back (`GATTClient.withBackToBackRequests`). Not Sendable: it belongs
/// to the task it was given to (another task's request made through it would escape the task's cancellation).
public final class BackToBackRequests {
    public let client: GATTClient
    let scope = RequestScope()

    init(client: GATTClient) { self.client = client }

    /// `GATTClient.write(handle:value:)`: one Write Request (Part G §4.9.3), its cancellation the scope's.
    nonisolated(nonsending) public func write(handle: UInt16, value: [UInt8]) async throws(GATTError) {
        try await client.write(handle: handle, value: value, scope: scope)
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
            scope.cancel(self)
        }
    }

    /// Cancels the request with operation ID `id` on whichever bearer holds it (IDs are unique per client).
    func cancelRequest(_ id: UInt64) {
        engine.cancel(id)
        guard enhancedCount.load(ordering: .acquiring) > 0 else { return }
        for e in enhanced.withLock({ $0 }) { e.cancel(id) }
    }
}
