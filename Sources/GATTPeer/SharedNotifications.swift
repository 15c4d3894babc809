// One connection's notifications and indications shared by several consumers at once (`mirror shell`): a listen's
// claim on every value while it runs, and subscriptions kept in the background, each value handed to one of them
// (NotificationRouter) as the GATT client delivers it (Core Spec Vol 3 Part G §4.10, §4.11). It prints nothing.
import GATTClient
import GATTVocabulary
import LinkCore

/// The consumers sharing one connection's values: a listen's claim, else each background subscription's route.
public final class SharedNotifications: Sendable {
    /// A subscription kept in the background until `unsubscribe` or `endAll`.
    public struct Subscription: Sendable {
        public var characteristic: GATTCharacteristic
        /// Its label (`CharacteristicCatalog.Entry.label`), when it has one.
        public var label: String?
        /// The task that hands each value to the caller; it ends after the last value once the subscription has ended.
        public var task: Task<Void, Never>
    }

    /// What `subscribe` did: the mode armed and the value read right after the CCCD write (when readable).
    public struct Subscribed: Sendable {
        public var mode: GATTSubscriptionMode
        public var value: [UInt8]?
    }

    /// The one delivery path from the client's values to the consumers.
    public let router: NotificationRouter
    private let client: GATTClient
    /// The claim of the listen running, if any (`listenStream`).
    private let listenClaim = Lock<UInt64?>(nil)
    /// The background subscriptions, by value handle.
    private let subscriptions = Lock<[UInt16: Subscription]>([:])

    /// The consumers of `client`'s values, for the client's lifetime.
    public init(client: GATTClient) {
        self.client = client
        router = NotificationRouter(client: client)
    }

    /// A listen's stream: a `GATTClient.notificationStream()` armed in the same turn of the loop as a claim on the
    /// router (every value the stream has is the listen's, no background subscription's), holding `count` values
    /// (nil: until `endListen`).
    public func listenStream(count: Int?) throws(GATTError) -> GATTNotificationStream {
        let (id, armed) = router.claim(count: count) { [client] in
            Result { () throws(GATTError) -> GATTNotificationStream in try client.notificationStream() }
        }
        switch armed {
        case .success(let stream):
            listenClaim.withLock { $0 = id }
            return stream
        case .failure(let error):
            router.release(id)
            throw error
        }
    }

    /// Ends a listen's stream: its claim released in the same turn of the loop as the stream is finished (a value
    /// delivered before is the listen's, one after a background subscription's).
    public func endListen(_ stream: GATTNotificationStream) {
        if let id = listenClaim.withLock({ $0 }) {
            router.release(id) { stream.finish() }
        } else {
            stream.finish()
        }
    }

    /// Subscribes to `entry` in the background: its route on the router made before the CCCD write (no value is
    /// missed), then each value the route is given handed to `deliver`, off the link's loop, until the subscription
    /// ends; then, when the route dropped values (its reader fell behind), `dropped` with those after the subscription
    /// completed and those before. Returns nil, subscribing nothing, when `entry` is subscribed already.
    public func subscribe(_ entry: CharacteristicCatalog.Entry, preferIndications: Bool,
                          deliver: @escaping @Sendable (GATTNotification) -> Void,
                          dropped: @escaping @Sendable (_ fellBehind: Int, _ beforeSubscribed: Int) -> Void) async throws -> Subscribed? {
        try await withLinkLoop(client.eventLoop) { () async throws -> Subscribed? in
            try await subscribeOnLoop(entry, preferIndications: preferIndications, deliver: deliver, dropped: dropped)
        }
    }

    private func subscribeOnLoop(_ entry: CharacteristicCatalog.Entry, preferIndications: Bool,
                                 deliver: @escaping @Sendable (GATTNotification) -> Void,
                                 dropped: @escaping @Sendable (Int, Int) -> Void) async throws -> Subscribed? {
        let c = entry.characteristic
        if subscriptions.withLock({ $0[c.valueHandle] != nil }) { return nil }
        let router = self.router
        let routed = router.route(handle: c.valueHandle)
        let value: [UInt8]?, stream: GATTNotificationStream
        do {
            (value, stream) = try await client.subscribe(to: c, preferIndications: preferIndications)
        } catch {
            router.endRoute(handle: c.valueHandle)
            throw error
        }
        // The route was made before the CCCD write; what it dropped until now came before the subscription completed.
        let droppedBeforeSubscribed = routed.droppedCount
        // The subscription ends with the client's stream (unsubscribe, or the connection's end): then its route does,
        // after the values it holds.
        Task {
            do { for try await _ in stream {} } catch {}
            router.endRoute(handle: c.valueHandle)
        }
        let task = Task {
            for await n in routed { deliver(n) }
            let total = routed.droppedCount
            if total > 0 { dropped(total - droppedBeforeSubscribed, droppedBeforeSubscribed) }
        }
        subscriptions.withLock { $0[c.valueHandle] = Subscription(characteristic: c, label: entry.label, task: task) }
        return Subscribed(mode: GATTSubscriptionMode(for: c.properties, preferIndications: preferIndications) ?? .notify, value: value)
    }

    /// The value handles subscribed in the background, in order.
    public var subscribedHandles: [UInt16] { subscriptions.withLock { $0.keys.sorted() } }

    /// Whether any background subscription holds.
    public var isSubscribed: Bool { subscriptions.withLock { !$0.isEmpty } }

    /// Ends the background subscription of `valueHandle` (its CCCD cleared); nil when there is none.
    public func unsubscribe(valueHandle: UInt16) async throws -> Subscription? {
        guard let sub = subscriptions.withLock({ $0[valueHandle] }) else { return nil }
        try await withLinkLoop(client.eventLoop) { () async throws in try await client.unsubscribe(from: sub.characteristic) }
        _ = subscriptions.withLock { $0.removeValue(forKey: valueHandle) }
        return sub
    }

    /// Forgets every background subscription (the connection ended, or is about to) and returns them: each task
    /// ends after the values its route holds once the connection's end has ended its stream.
    public func endAll() -> [Subscription] {
        subscriptions.withLock { s in
            defer { s = [:] }
            return Array(s.values)
        }
    }
}
