// Server-initiated values: Handle Value Notification, Multiple Handle Value Notification and Handle Value
// Indication (Core Spec 5.4 Vol 3 Part F §3.4.7), delivered in arrival order on one path per bearer.
import ATTStack
import Synchronization

/// One value the server pushed: a notification or an indication (Core Spec 5.4 Vol 3 Part F §3.4.7).
public struct GATTNotification: Sendable, Equatable, CustomStringConvertible {
    /// How the value came.
    public enum Kind: String, Sendable, Equatable {
        /// Handle Value Notification (0x1B), or one part of a Multiple Handle Value Notification (0x23).
        case notification
        /// Handle Value Indication (0x1D); the client confirmed it after delivering it.
        case indication
    }
    /// The attribute handle of the characteristic value.
    public var handle: UInt16
    /// The value bytes.
    public var value: [UInt8]
    public var kind: Kind
    /// How many values for this stream were dropped, because its buffer was full, between the previous value this
    /// stream delivered and this one. Zero unless the consumer fell behind.
    public var droppedBefore: Int

    public init(handle: UInt16, value: [UInt8], kind: Kind, droppedBefore: Int = 0) {
        self.handle = handle
        self.value = value
        self.kind = kind
        self.droppedBefore = droppedBefore
    }

    public var description: String {
        var s = "\(kind.rawValue) handle \(ATTHex.handle(handle)) [\(ATTHex.string(value, separator: " ", uppercase: true))]"
        if droppedBefore > 0 { s += " (\(droppedBefore) dropped before this one: buffer full)" }
        return s
    }
}

/// An ordered stream of notifications and indications (one handle's, or the bearer's catch-all). It ends when
/// the bearer closes, by throwing a `GATTError.disconnected` that names the stream and the reason.
/// Buffered up to a bound; an overflow is counted in `GATTNotification.droppedBefore` and in `droppedCount`.
public struct GATTNotificationStream: AsyncSequence, Sendable {
    public typealias Element = GATTNotification
    let base: AsyncThrowingStream<GATTNotification, any Error>
    let sink: NotificationSink

    /// How many values this stream dropped because its buffer was full.
    public var droppedCount: Int { sink.dropped.load(ordering: .relaxed) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<GATTNotification, any Error>.AsyncIterator
        /// The next value, nil when the stream was finished by its consumer; throws `GATTError` when the bearer closed.
        public mutating func next() async throws -> GATTNotification? {
            try await base.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator()) }

    /// Ends the stream from the consumer's side: what is buffered is still read, nothing more is delivered, and the
    /// fan-out forgets it (a `notificationStream()` whose reader stopped without being cancelled).
    public func finish() { sink.continuation.finish() }
}

/// The producer side of one notification stream. Yields happen only on the link's event loop (the engine
/// delivers inbound PDUs there, one at a time), so the counters only need atomicity, not ordering.
final class NotificationSink: Sendable {
    let id: UInt64
    /// The handle this sink listens to; nil for the catch-all.
    let handle: UInt16?
    let continuation: AsyncThrowingStream<GATTNotification, any Error>.Continuation
    /// Values dropped since the last value that was enqueued (reported with the next one).
    let pendingDropped = Atomic<Int>(0)
    /// Values dropped in total.
    let dropped = Atomic<Int>(0)

    init(id: UInt64, handle: UInt16?, continuation: AsyncThrowingStream<GATTNotification, any Error>.Continuation) {
        self.id = id
        self.handle = handle
        self.continuation = continuation
    }

    /// What one delivery did.
    enum Delivery {
        case enqueued
        /// The buffer was full: the value was dropped (and counted); `firstOfBurst` when the previous one was not.
        case dropped(firstOfBurst: Bool)
    }

    /// Delivers one value, or drops and counts it when the buffer is full.
    @discardableResult
    func deliver(handle: UInt16, value: [UInt8], kind: GATTNotification.Kind) -> Delivery {
        let pending = pendingDropped.load(ordering: .relaxed)
        let n = GATTNotification(handle: handle, value: value, kind: kind, droppedBefore: pending)
        switch continuation.yield(n) {
        case .enqueued:
            if pending > 0 { pendingDropped.subtract(pending, ordering: .relaxed) }
            return .enqueued
        case .dropped:
            pendingDropped.add(1, ordering: .relaxed)
            dropped.add(1, ordering: .relaxed)
            return .dropped(firstOfBurst: pending == 0)
        case .terminated:
            return .enqueued
        @unknown default:
            return .enqueued
        }
    }

    static func make(id: UInt64, handle: UInt16?, limit: Int) -> (GATTNotificationStream, NotificationSink) {
        let (stream, continuation) = AsyncThrowingStream<GATTNotification, any Error>.makeStream(
            bufferingPolicy: .bufferingOldest(max(1, limit)))
        let sink = NotificationSink(id: id, handle: handle, continuation: continuation)
        return (GATTNotificationStream(base: stream, sink: sink), sink)
    }
}
