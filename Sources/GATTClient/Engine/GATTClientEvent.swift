// What the ATT engine reports that no caller waits for, and its counters (Core Spec 5.4 Vol 3 Part F §3.3):
// the public side of the engine, apart from its state machine.
import ATTStack

/// Something the engine reports that no caller waits for: a peer's protocol violation, an answer to a peer's
/// request, dropped notifications. Hand a closure to `GATTClient.Configuration.events` to log them.
public enum GATTClientEvent: Sendable, Equatable, CustomStringConvertible {
    /// The peer sent something ATT forbids; `failed` names the operation it failed, if any.
    case protocolViolation(GATTProtocolViolation, failed: String?)
    /// A response, timeout or cancellation that found no operation to resolve (a late response, a stale timer):
    /// logged and dropped, never resumes another operation.
    case dropped(String)
    /// The client answered a request of the peer (Exchange MTU Response, or Error Response Request Not Supported).
    case answeredPeerRequest(request: [UInt8], answer: [UInt8])
    /// The ATT_MTU changed (Exchange MTU).
    case mtuChanged(Int)
    /// A notification stream's buffer was full and it started dropping values (first of a burst; every drop is
    /// counted in `GATTClientStatistics.droppedNotifications` and in the next value's `droppedBefore`).
    /// `stream` is the handle of the per-handle stream, nil for the catch-all stream.
    case notificationDropped(handle: UInt16, stream: UInt16?)

    public var description: String {
        switch self {
        case .protocolViolation(let v, let failed):
            return failed.map { "\(v.description) (failed \($0))" } ?? v.description
        case .dropped(let s): return "dropped: \(s)"
        case .answeredPeerRequest(let req, let ans): return "answered the peer's [\(ATTHex.string(req, separator: " ", uppercase: true))] with [\(ATTHex.string(ans, separator: " ", uppercase: true))]"
        case .mtuChanged(let m): return "ATT_MTU is now \(m)"
        case .notificationDropped(let h, let stream):
            return "buffer full: the \(stream.map { "handle \(ATTHex.handle($0))" } ?? "catch-all") stream started dropping values (first: handle \(ATTHex.handle(h)))"
        }
    }
}

/// Counters of what the engine dropped or refused, for diagnostics and tests.
public struct GATTClientStatistics: Sendable, Equatable {
    public var protocolViolations = 0
    public var droppedEvents = 0
    public var droppedNotifications = 0
    public var peerRequestsAnswered = 0
    public var indicationsConfirmed = 0
    public var notificationsReceived = 0
}

extension GATTClientStatistics {
    /// Both bearers' counts together (a client's sum over its bearers).
    func adding(_ o: GATTClientStatistics) -> GATTClientStatistics {
        GATTClientStatistics(protocolViolations: protocolViolations + o.protocolViolations,
                             droppedEvents: droppedEvents + o.droppedEvents,
                             droppedNotifications: droppedNotifications + o.droppedNotifications,
                             peerRequestsAnswered: peerRequestsAnswered + o.peerRequestsAnswered,
                             indicationsConfirmed: indicationsConfirmed + o.indicationsConfirmed,
                             notificationsReceived: notificationsReceived + o.notificationsReceived)
    }
}
