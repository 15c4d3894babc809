// The notification fan-out (Core Spec 5.4 Vol 3 Part F §3.4.7): every value the peer pushes goes to the
// catch-all stream and to each stream subscribed to its handle, in arrival order, on the link's event loop.
import ATTStack

extension ATTEngine {
    func deliver(handle: UInt16, value: [UInt8], kind: GATTNotification.Kind) {
        // An enhanced bearer's values join the unenhanced bearer's path, in the order this reader received them.
        if let target = notificationTarget {
            return target.onLoop { target.deliver(handle: handle, value: value, kind: kind) }
        }
        let (catchAll, sinks, watchers, handlers) = state.access { s in
            s.stats.notificationsReceived += 1
            return (s.catchAll, s.subscribers[handle], s.watchers, s.valueHandlers)
        }
        if !handlers.isEmpty {
            let n = GATTNotification(handle: handle, value: value, kind: kind)
            for h in handlers { h(n) }
        }
        // Every drop is counted; an event is reported once per burst (when a stream starts dropping).
        var dropCount = 0
        var burstStarts: [UInt16?] = []
        func note(_ d: NotificationSink.Delivery, _ stream: UInt16?) {
            if case .dropped(let first) = d {
                dropCount += 1
                if first { burstStarts.append(stream) }
            }
        }
        if let catchAll { note(catchAll.deliver(handle: handle, value: value, kind: kind), nil) }
        for w in watchers { note(w.deliver(handle: handle, value: value, kind: kind), nil) }
        if let sinks {
            for sink in sinks { note(sink.deliver(handle: handle, value: value, kind: kind), handle) }
        }
        if dropCount > 0 {
            state.access { $0.stats.droppedNotifications += dropCount }
            for d in burstStarts { events?(.notificationDropped(handle: handle, stream: d)) }
        }
    }

    /// Arms a per-handle stream before anything is written, so no value that arrives afterwards is missed.
    func addSubscriber(handle: UInt16) throws(GATTError) -> (GATTNotificationStream, NotificationSink) {
        let (stream, sink) = NotificationSink.make(id: makeID(), handle: handle, limit: streamLimit)
        let refused: String? = onLoopSync { s in
            if let r = s.closedReason { return r }
            s.subscribers[handle, default: []].append(sink)
            return nil
        }
        if let refused {
            throw .disconnected(GATTDisconnectedError(reason: refused, during: "subscribing to handle \(ATTHex.handle(handle))"))
        }
        sink.continuation.onTermination = { _ in self.removeSubscriber(sink) }
        return (stream, sink)
    }

    /// A further catch-all stream: every value from now on, until its consumer ends it or the bearer closes.
    func addWatcher() throws(GATTError) -> GATTNotificationStream {
        let (stream, sink) = NotificationSink.make(id: makeID(), handle: nil, limit: streamLimit)
        let refused: String? = onLoopSync { s in
            if let r = s.closedReason { return r }
            s.watchers.append(sink)
            return nil
        }
        if let refused {
            throw .disconnected(GATTDisconnectedError(reason: refused, during: "the notification stream"))
        }
        sink.continuation.onTermination = { _ in self.removeSubscriber(sink) }
        return stream
    }

    /// Adds a handler told each value on the loop, before the streams, for as long as the bearer is open.
    func addValueHandler(_ body: @escaping @Sendable (GATTNotification) -> Void) {
        onLoopSync { s in s.valueHandlers.append(body) }
    }

    /// A stream's consumer ended it (from any thread): it leaves the fan-out, on the loop.
    func removeSubscriber(_ sink: NotificationSink) {
        onLoop {
            self.state.access { s in
                guard let handle = sink.handle else {
                    s.watchers.removeAll { $0 === sink }
                    return
                }
                s.subscribers[handle]?.removeAll { $0 === sink }
                if s.subscribers[handle]?.isEmpty == true { s.subscribers[handle] = nil }
            }
        }
    }

    /// Ends every stream of `handle` (after an unsubscribe).
    func finishSubscribers(handle: UInt16) {
        let sinks: [NotificationSink] = onLoopSync { s in s.subscribers.removeValue(forKey: handle) ?? [] }
        for sink in sinks { sink.continuation.finish() }
    }

    func subscriberCount(handle: UInt16) -> Int { onLoopSync { $0.subscribers[handle]?.count ?? 0 } }
}
