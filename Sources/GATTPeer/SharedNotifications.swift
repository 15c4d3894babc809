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
        // Handed on off the link's loop: a stalled consumer must never stop the loop reading the link (the route buffers).
        let task = Task(executorPreference: globalConcurrentExecutor) {
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

    /// Ends the background subscription of `valueHandle` (its CCCD cleared); nil when there is none. Returns once
    /// every value received before the CCCD write's answer has been handed to `deliver` (its task has ended), so a
    /// caller that goes on, or exits, loses none: the client's stream ended with the write, its route after the
    /// values it holds.
    public func unsubscribe(valueHandle: UInt16) async throws -> Subscription? {
        guard let sub = subscriptions.withLock({ $0[valueHandle] }) else { return nil }
        try await withLinkLoop(client.eventLoop) { () async throws in try await client.unsubscribe(from: sub.characteristic) }
        _ = subscriptions.withLock { $0.removeValue(forKey: valueHandle) }
        await sub.task.value
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

/// The stream a procedure (a listen, the mirror's scan, a Wi-Fi join) reads its notifications from. One-shot (no
/// `shared`): the GATT client's catch-all, which holds what came since the connect. Shared (`mirror shell`): a
/// stream of its own from now on, since the catch-all holds every value since the connect and ends for good with
/// its first reader; a listen's is claimed on the router (`SharedNotifications.listenStream`).
public struct ProcedureNotifications: Sendable {
    public let client: GATTClient
    /// The connection's shared consumers; nil one-shot.
    public let shared: SharedNotifications?

    public init(client: GATTClient, shared: SharedNotifications?) {
        self.client = client
        self.shared = shared
    }

    /// The notifications a procedure reads from its start.
    public func stream() throws(GATTError) -> GATTNotificationStream {
        shared == nil ? client.notifications : try client.notificationStream()
    }

    /// Ends a stream `stream()` gave, once its procedure is done with it (a shared connection's own streams only:
    /// the one-shot catch-all ends with the connection).
    public func end(_ stream: GATTNotificationStream) {
        if shared != nil { stream.finish() }
    }

    /// A listen's stream holding `count` values (nil: until `endListen`): shared, claimed on the router.
    public func listenStream(count: Int?) throws(GATTError) -> GATTNotificationStream {
        guard let shared else { return try stream() }
        return try shared.listenStream(count: count)
    }

    /// Ends a listen's stream: shared, with its claim; one-shot the stream is finished when `finish` (a duration
    /// is up), else left to the connection's end.
    public func endListen(_ stream: GATTNotificationStream, finish: Bool = false) {
        guard let shared else {
            if finish { stream.finish() }
            return
        }
        shared.endListen(stream)
    }
}

/// How many values the background subscriptions' consumer took, and how many a `wait` counted: one for a program's
/// life, across its connections (`mirror shell`'s `wait`: a value taken after the previous wait counts, even one
/// that came before the wait began, so write-then-wait never misses the answer to the write).
public final class DeliveryTally: Sendable {
    private struct State {
        var taken = 0
        var counted = 0
        var waiter: (count: Int, continuation: CheckedContinuation<Void, Never>)?
    }

    private let state = Lock(State())

    /// No value taken yet.
    public init() {}

    /// One value taken (after its consumer is done with it): a wait waiting for it may go on.
    public func add() {
        state.withLock { d -> CheckedContinuation<Void, Never>? in
            d.taken += 1
            guard let w = d.waiter, d.taken - d.counted >= w.count else { return nil }
            d.waiter = nil
            return w.continuation
        }?.resume()
    }

    /// The values taken that no wait counted yet.
    public var uncounted: Int { state.withLock { $0.taken - $0.counted } }

    /// Waits until `count` values no wait counted yet were taken, at most `limit` on `clock`, or until the task is
    /// cancelled; counts them when they came. Returns whether they came, and how many are left uncounted then.
    public func awaitValues(_ count: Int, within limit: Duration,
                            clock: any GATTClock = MonotonicClock()) async -> (arrived: Bool, uncounted: Int) {
        // GATTClient's one deadline: armed before the wait, first to finish wins, so a late value and the limit
        // cannot both count; the limit's timeout and a cancellation are "not arrived".
        let arrived = (try? await withDeadline(limit, waitingFor: "\(count) values", clock: clock) {
            await self.taken(count)
            return !Task.isCancelled
        }) ?? false
        let left = state.withLock { d in
            if arrived { d.counted += count }
            return d.taken - d.counted
        }
        return (arrived, left)
    }

    /// Returns once `count` values are taken and not yet counted, or when the task is cancelled.
    private func taken(_ count: Int) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { d -> Bool in
                    if d.taken - d.counted >= count || Task.isCancelled { return true }
                    d.waiter = (count, c)
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            state.withLock { d in defer { d.waiter = nil }; return d.waiter?.continuation }?.resume()
        }
    }
}
