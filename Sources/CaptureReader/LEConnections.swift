// The LE connections of a capture and the ATT PDUs on each: connections from LE (Enhanced) Connection Complete
// (Core Spec 5.4 Vol 4 Part E §7.7.65.1, §7.7.65.10) to Disconnection Complete (§7.7.5), ACL data reassembled into
// L2CAP frames per connection and direction (Vol 4 Part E §5.4.2 packet boundary flags; Vol 3 Part A §3.1 the basic
// header), and the frames on the ATT fixed channel (CID 0x0004) kept as ATT PDUs.
import ATTStack

/// One LE connection seen in a capture, with its ATT PDUs in order.
public struct CapturedConnection: Sendable {
    /// One ATT PDU, from this host (the capture's side: the client) or from the peer.
    public struct PDU: Sendable {
        public var fromPeer: Bool
        public var bytes: [UInt8]
        /// Microseconds since 1970.
        public var timestamp: Int64
        public var record: Int
    }

    /// Its number in the capture (1-based, in order of the connections' opening), as `--connection N` takes it.
    public var number: Int
    public var adapter: UInt16
    public var handle: UInt16
    /// The peer's address as the event gives it ("C2:00:00:00:00:01") and whether it is random.
    public var peer: String
    public var peerIsRandom: Bool
    /// This host's role on the link: central (it connected) or peripheral.
    public var isCentral: Bool
    public var pdus: [PDU] = []
    /// L2CAP frames on ATT that could not be reassembled (a continuation with no start, a frame cut short).
    public var brokenFrames = 0
}

extension CapturedConnection {
    /// Whether `token` names this connection as `mirror clone --connection` takes it: its number, or the peer's
    /// address in either case.
    public func isNamed(by token: String) -> Bool { String(number) == token || peer == token.uppercased() }
}

/// Follows the capture's LE connections and the ATT on each.
public enum LEConnectionTracker {
    /// The connections of `capture` that carried ATT: the ones a device can be rebuilt from.
    public static func connectionsWithATT(of capture: BTSnoopCapture) -> [CapturedConnection] {
        connections(of: capture).filter { !$0.pdus.isEmpty }
    }

    /// The connections of `capture`, each with its ATT PDUs. ACL data of a handle with no LE connection open is left
    /// out (an ATT PDU on a BR/EDR link or one the capture began after).
    public static func connections(of capture: BTSnoopCapture) -> [CapturedConnection] {
        var all: [CapturedConnection] = []
        var open: [UInt32: Int] = [:]           // adapter << 16 | handle -> index in `all`
        struct Partial { var expected: Int; var bytes: [UInt8]; var record: Int; var timestamp: Int64 }
        var partial: [UInt64: Partial] = [:]    // key, direction -> the frame being reassembled
        for p in capture.packets {
            switch p.kind {
            case .event:
                guard p.bytes.count >= 2 else { continue }
                let code = p.bytes[0], params = Array(p.bytes.dropFirst(2))
                if code == 0x3E, let sub = params.first, sub == 0x01 || sub == 0x0A, params.count >= 12, params[1] == 0x00 {
                    // LE Connection Complete / Enhanced: status, handle, role, peer address type, peer address.
                    let handle = UInt16(params[2]) | UInt16(params[3] & 0x0F) << 8
                    let address = params[6..<12].reversed().map { ATTHex.fixed(UInt64($0), digits: 2, lowercase: false) }.joined(separator: ":")
                    let key = UInt32(p.adapter) << 16 | UInt32(handle)
                    all.append(CapturedConnection(number: all.count + 1, adapter: p.adapter, handle: handle, peer: address,
                                                  peerIsRandom: params[5] & 0x01 == 1, isCentral: params[4] == 0x00))
                    open[key] = all.count - 1
                } else if code == 0x05, params.count >= 4, params[0] == 0x00 {
                    let handle = UInt16(params[1]) | UInt16(params[2] & 0x0F) << 8
                    open[UInt32(p.adapter) << 16 | UInt32(handle)] = nil
                }
            case .aclSent, .aclReceived:
                guard p.bytes.count >= 4 else { continue }
                let handle = UInt16(p.bytes[0]) | UInt16(p.bytes[1] & 0x0F) << 8
                let boundary = (p.bytes[1] >> 4) & 0x03
                guard let index = open[UInt32(p.adapter) << 16 | UInt32(handle)] else { continue }
                let data = Array(p.bytes.dropFirst(4))
                let fromPeer = p.kind == .aclReceived
                let key = UInt64(p.adapter) << 32 | UInt64(handle) << 1 | (fromPeer ? 1 : 0)
                var frame: Partial
                if boundary == 0x01 {
                    // A continuing fragment (§5.4.2): it belongs to the frame begun before on this handle and direction.
                    guard var started = partial[key] else { all[index].brokenFrames += 1; continue }
                    started.bytes += data
                    frame = started
                } else {
                    if partial[key] != nil { all[index].brokenFrames += 1 }
                    guard data.count >= 4 else { all[index].brokenFrames += 1; partial[key] = nil; continue }
                    frame = Partial(expected: 4 + Int(UInt16(data[0]) | UInt16(data[1]) << 8), bytes: data, record: p.record, timestamp: p.timestamp)
                }
                if frame.bytes.count < frame.expected { partial[key] = frame; continue }
                partial[key] = nil
                guard frame.bytes.count == frame.expected else { all[index].brokenFrames += 1; continue }
                let cid = UInt16(frame.bytes[2]) | UInt16(frame.bytes[3]) << 8
                guard cid == 0x0004 else { continue }
                all[index].pdus.append(.init(fromPeer: fromPeer, bytes: Array(frame.bytes.dropFirst(4)), timestamp: frame.timestamp, record: frame.record))
            case .command:
                continue
            }
        }
        return all
    }
}
