// A listen: subscribe (the 0x12 resync included), ask for robust caching, then take every notification and
// indication until a count, a duration, the caller's cancellation or the link's end (Core Spec 5.4 Vol 3 Part G
// §4.10, §4.11). The procedure behind `mirror listen`; it prints nothing.
import GATTClient
import LinkCore

/// How many values a listen's stream dropped (GATTNotificationStream's bound): those before every subscription was
/// armed (the stream is read only from then on) and those after, when the reader fell behind the peer.
public final class NotificationDrops: Sendable {
    // Guards the stream watched and its drop count when the subscriptions completed.
    private let state = Lock<(stream: GATTNotificationStream?, atSubscribed: Int?)>((nil, nil))

    /// A counter that watches no stream yet (every count 0).
    public init() {}

    /// Counts the drops of `stream` from now on.
    public func watch(_ stream: GATTNotificationStream) { state.withLock { $0 = (stream, nil) } }

    /// From here on a drop is the reader's: the values before were buffered while subscribing.
    public func subscriptionsCompleted() { state.withLock { $0.atSubscribed = $0.stream?.droppedCount } }

    /// The drops after the subscriptions completed (the reader fell behind) and before.
    public var counts: (fellBehind: Int, beforeSubscribed: Int) {
        state.withLock { s in
            let total = s.stream?.droppedCount ?? 0
            let before = s.atSubscribed ?? total
            return (total - before, before)
        }
    }

    /// Every drop, before and after the subscriptions completed.
    public var total: Int { counts.fellBehind + counts.beforeSubscribed }
}

extension CharacteristicLookup {
    /// Subscribes to `references` (all that notify or indicate when empty: `subscribingResynchronized`, with the
    /// 0x12 retry), enables robust caching, then calls `handler` with each value read from `stream` (the caller's,
    /// armed before the first CCCD write) and its target, until `count` arrived, `duration` passed after the
    /// subscriptions were armed, the task is cancelled or the link ends; returns how many were handled.
    /// `subscribed` is told each subscription with the value read right after it; `armed` once every CCCD write is
    /// answered, before the wait; `finishing` ends the stream at `duration` when the caller shares it (the shell's
    /// router; default: `stream.finish()`). If the link ends while subscribing, what arrived before is handled, then the
    /// error thrown. `handler` runs off the link's loop: a slow reader never stalls the link (the stream buffers).
    public func listen(_ references: [CharacteristicReference], on stream: GATTNotificationStream,
                       preferIndications: Bool = false, count: Int? = nil, duration: Duration? = nil,
                       drops: NotificationDrops? = nil,
                       locate: ((CharacteristicReference) async throws -> CharacteristicCatalog.Entry)? = nil,
                       subscribed: (CharacteristicCatalog.Entry, GATTSubscriptionMode, [UInt8]?) -> Void = { _, _, _ in },
                       armed: () -> Void = {},
                       finishing: (@Sendable () -> Void)? = nil,
                       _ handler: @escaping @Sendable (GATTNotification, CharacteristicCatalog.Entry?) -> Void) async throws -> Int {
        drops?.watch(stream)
        // Each value handle's target (its label and UUID), from the latest resolution.
        var targets: [UInt16: CharacteristicCatalog.Entry] = [:]
        // Whether an error came while subscribing (not while resolving or resynchronizing).
        var subscribing = false
        do {
            _ = try await subscribingResynchronized(
                references, preferIndications: preferIndications, locate: locate,
                targeted: { entries in
                    targets = Dictionary(entries.map { ($0.characteristic.valueHandle, $0) }, uniquingKeysWith: { a, _ in a })
                    subscribing = true
                },
                resynchronizing: { subscribing = false },
                subscribed: subscribed)
        } catch {
            // The link ended while subscribing: what arrived before it did is handled (the stream ends after them).
            if subscribing, case .disconnected? = error as? GATTError {
                var received = 0
                do {
                    for try await n in stream {
                        handler(n, targets[n.handle])
                        received += 1
                        if let count, received >= count { return received }
                    }
                } catch {}
            }
            throw error
        }
        // Robust caching for the wait that follows (the peer answers 0x12 instead of serving moved handles).
        try await database.enableRobustCaching()
        drops?.subscriptionsCompleted()
        let finalTargets = targets
        armed()
        if let count, count <= 0 { return 0 }
        // `duration`: the stream is ended from the consumer's side when it is up (what is buffered is still read).
        let timer = duration.map { limit in
            Task {
                try? await MonotonicClock().sleep(for: limit)
                if !Task.isCancelled {
                    if let finishing { finishing() } else { stream.finish() }
                }
            }
        }
        defer { timer?.cancel() }
        // The values are handled off the link's loop: a stalled reader must never stop the loop reading the link (the
        // stream buffers what comes meanwhile and counts what it drops: NotificationDrops), so the handler runs on the pool.
        let reader = Task(executorPreference: globalConcurrentExecutor) { () async throws -> Int in
            var received = 0
            for try await n in stream {
                handler(n, finalTargets[n.handle])
                received += 1
                if let count, received >= count { break }
            }
            return received
        }
        return try await withTaskCancellationHandler { try await reader.value } onCancel: { reader.cancel() }
    }
}
