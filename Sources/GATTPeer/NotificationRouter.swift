// One ordered delivery path from a connection's notifications and indications (Core Spec Vol 3 Part F §3.4.7) to the
// printers that share it, so that each value is printed once: a claim (`mirror shell`'s listen, which prints every
// value while it runs) or the route of its handle (a background subscription). Decided per value, on the link's
// loop, when the GATT client delivers it (`GATTClient.onValue`, before its streams), never by when a consumer ends.
import ATTStack
import GATTClient
import LinkCore

/// A route's values: those of one handle that no claim held when they were delivered, in arrival order.
public struct RoutedNotifications: AsyncSequence, Sendable {
    public typealias Element = GATTNotification
    let base: AsyncStream<GATTNotification>
    let counts: Lock<(pending: Int, total: Int)>

    /// How many values this route dropped because its buffer was full (its reader fell behind).
    public var droppedCount: Int { counts.withLock { $0.total } }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<GATTNotification>.AsyncIterator
        public mutating func next() async -> GATTNotification? { await base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator()) }
}

/// Hands each value a connection delivers to exactly one consumer, decided as it is delivered: the claim while it
/// holds (its own stream has the value: a `GATTClient.notificationStream()` armed with the claim), else the route of
/// the value's handle, else none. Deliveries, claims and their releases are ordered on the link's loop.
public final class NotificationRouter: Sendable {
    private struct Route {
        let continuation: AsyncStream<GATTNotification>.Continuation
        let counts: Lock<(pending: Int, total: Int)>
    }

    private struct Claim {
        let id: UInt64
        /// Values it holds before it lets go by itself (a listen's --count); nil: until released.
        var remaining: Int?
    }

    private struct State {
        var routes: [UInt16: Route] = [:]
        var claim: Claim?
        var nextID: UInt64 = 1
    }

    private let state = Lock(State())
    /// Where deliveries happen (the client's loop); nil for a router fed by hand (`deliver`), its calls in order.
    private let loop: EventLoop?

    /// A router fed by `client`'s values on its loop, for the client's lifetime.
    public init(client: GATTClient) {
        loop = client.eventLoop
        client.onValue { [weak self] n in self?.deliver(n) }
    }

    /// A router fed only by `deliver`, in the caller's order (tests).
    public init() { loop = nil }

    /// One value, as it is delivered: to the claim while it holds (counting it down), else to its handle's route.
    public func deliver(_ n: GATTNotification) {
        state.withLock { s in
            if var claim = s.claim {
                if let remaining = claim.remaining {
                    claim.remaining = remaining - 1
                    s.claim = remaining > 1 ? claim : nil
                }
                return
            }
            guard let route = s.routes[n.handle] else { return }
            var value = n
            value.droppedBefore = route.counts.withLock { $0.pending }
            switch route.continuation.yield(value) {
            case .dropped: route.counts.withLock { $0.pending += 1; $0.total += 1 }
            case .enqueued, .terminated: route.counts.withLock { $0.pending = 0 }
            @unknown default: break
            }
        }
    }

    /// A route for `handle`'s values from now until `endRoute(handle:)`, buffered up to `limit` (then dropped, counted;
    /// by default a GATT client stream's bound, `GATTClient.Configuration.notificationBufferLimit`'s 1024).
    /// A second route for the same handle replaces the first, which ends.
    public func route(handle: UInt16, limit: Int = 1024) -> RoutedNotifications {
        let (stream, continuation) = AsyncStream<GATTNotification>.makeStream(bufferingPolicy: .bufferingOldest(limit))
        let counts = Lock<(pending: Int, total: Int)>((0, 0))
        let old = onLoop { self.state.withLock { s in
            defer { s.routes[handle] = Route(continuation: continuation, counts: counts) }
            return s.routes[handle]
        } }
        old?.continuation.finish()
        return RoutedNotifications(base: stream, counts: counts)
    }

    /// Ends `handle`'s route: what it holds is still read, nothing more is routed to it.
    public func endRoute(handle: UInt16) {
        let route = onLoop { self.state.withLock { $0.routes.removeValue(forKey: handle) } }
        route?.continuation.finish()
    }

    /// Claims every value from now, for `count` values (nil: until `release`), and runs `arm` in the same turn of the
    /// loop: what `arm` opens (the claimer's stream) sees exactly the values the claim holds from the first. Returns
    /// the claim's id and what `arm` returned. A claim replaces any before it.
    public func claim<T: Sendable>(count: Int?, arming arm: @escaping @Sendable () -> T) -> (id: UInt64, armed: T) {
        onLoop {
            let id = self.state.withLock { s in
                defer { s.nextID += 1 }
                s.claim = Claim(id: s.nextID, remaining: count.map { max($0, 0) })
                if s.claim?.remaining == 0 { s.claim = nil }
                return s.nextID
            }
            return (id, arm())
        }
    }

    /// Releases claim `id` if it still holds, and runs `then` in the same turn of the loop (the claimer's stream
    /// finished there): a value delivered after is routed, one before is the claimer's.
    public func release(_ id: UInt64, then: @escaping @Sendable () -> Void = {}) {
        onLoop {
            self.state.withLock { s in if s.claim?.id == id { s.claim = nil } }
            then()
        }
    }

    /// Whether a claim holds now (tests).
    public var claimed: Bool { state.withLock { $0.claim != nil } }

    private func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        guard let loop else { return body() }
        return loop.sync(body)
    }
}
