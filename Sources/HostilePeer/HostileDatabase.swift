// The hostile peer's small GATT database and its well-behaved answers (Core Spec 5.4 Vol 3 Part F §3.4, Part G
// §3 for the declarations): the scenarios corrupt these answers, so everything they leave alone is correct.
import ATTStack

/// The attributes the hostile peer serves (Core Spec 5.4 Vol 3 Part G §3): Generic Access, and a service 0xFFF0
/// with a 300-byte readable, writable, notifying and indicating value (0x0008, CCCD 0x0009) and a short one (0x000B).
public struct HostileDatabase: Sendable {
    public struct Attribute: Sendable {
        public var handle: UInt16
        public var type: UInt16
        public var value: [UInt8]
        public var writable: Bool
    }

    /// The Device Name value handle ("hostile-peer").
    public static let deviceNameHandle: UInt16 = 0x0003
    /// The 300-byte value: read, write, notify, indicate.
    public static let longValueHandle: UInt16 = 0x0008
    /// Its Client Characteristic Configuration descriptor.
    public static let cccdHandle: UInt16 = 0x0009
    /// A short value ("short"): read, write, write without response.
    public static let shortValueHandle: UInt16 = 0x000B
    /// The handle of the marker notification sent after unsolicited responses.
    public static let markerHandle: UInt16 = 0x00FF
    /// The long value's initial bytes.
    public static let longValue: [UInt8] = (0..<300).map { UInt8($0 & 0xFF) }

    public var attributes: [Attribute]

    public init() {
        attributes = [
            Attribute(handle: 0x0001, type: 0x2800, value: [0x00, 0x18], writable: false),
            Attribute(handle: 0x0002, type: 0x2803, value: [0x02, 0x03, 0x00, 0x00, 0x2A], writable: false),
            Attribute(handle: 0x0003, type: 0x2A00, value: Array("hostile-peer".utf8), writable: false),
            Attribute(handle: 0x0004, type: 0x2803, value: [0x02, 0x05, 0x00, 0x01, 0x2A], writable: false),
            Attribute(handle: 0x0005, type: 0x2A01, value: [0x00, 0x00], writable: false),
            Attribute(handle: 0x0006, type: 0x2800, value: [0xF0, 0xFF], writable: false),
            Attribute(handle: 0x0007, type: 0x2803, value: [0x3A, 0x08, 0x00, 0xF1, 0xFF], writable: false),
            Attribute(handle: 0x0008, type: 0xFFF1, value: HostileDatabase.longValue, writable: true),
            Attribute(handle: 0x0009, type: 0x2902, value: [0x00, 0x00], writable: true),
            Attribute(handle: 0x000A, type: 0x2803, value: [0x0E, 0x0B, 0x00, 0xF2, 0xFF], writable: false),
            Attribute(handle: 0x000B, type: 0xFFF2, value: Array("short".utf8), writable: true),
        ]
    }

    func index(_ handle: UInt16) -> Int? { attributes.firstIndex { $0.handle == handle } }

    /// Each service: (start, end, uuid bytes).
    var services: [(start: UInt16, end: UInt16, uuid: [UInt8])] {
        let starts = attributes.filter { $0.type == 0x2800 }
        return starts.enumerated().map { i, a in
            let end = i + 1 < starts.count ? starts[i + 1].handle - 1 : attributes.last!.handle
            return (a.handle, end, a.value)
        }
    }
}

/// How discovery responses are bent.
enum DiscoveryMode {
    case normal
    /// The elements in reverse order.
    case backwards
    /// The list for `start` replaced by the list for this start (the first request's).
    case from(UInt16)
}

func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
func u16(_ b: [UInt8], _ i: Int) -> UInt16 { i + 1 < b.count ? UInt16(b[i]) | UInt16(b[i + 1]) << 8 : 0 }

/// An Error Response (Core Spec 5.4 Vol 3 Part F §3.4.1.1).
func errorResponse(_ request: UInt8, _ handle: UInt16, _ code: UInt8) -> [UInt8] {
    [0x01, request] + le16(handle) + [code]
}

extension HostileDatabase {
    /// The start handle of a discovery request (for `DiscoveryMode.from`), nil for other requests.
    static func discoveryStart(_ pdu: [UInt8]) -> UInt16? {
        switch pdu.first {
        case 0x04, 0x06, 0x08, 0x10: return pdu.count >= 3 ? u16(pdu, 1) : nil
        default: return nil
        }
    }

    /// The discovery answers (Find Information, Find By Type Value, Read By Type, Read By Group Type).
    func discovery(_ pdu: [UInt8], mtu: Int, mode: DiscoveryMode) -> [UInt8] {
        let op = pdu[0]
        guard pdu.count >= 5 else { return errorResponse(op, 0, 0x04) }
        var start = u16(pdu, 1)
        let end = u16(pdu, 3)
        guard start != 0, start <= end else { return errorResponse(op, start, 0x01) }
        if case .from(let s) = mode { start = s }
        // Elements as (handle, bytes); the PDU is opcode (+ a length/format byte) + elements.
        var elements: [(UInt16, [UInt8])] = []
        var header: [UInt8] = [op + 1]
        switch op {
        case 0x10:  // Read By Group Type: primary services (16-bit UUIDs here).
            guard pdu.count == 7, u16(pdu, 5) == 0x2800 else { return errorResponse(op, start, 0x0A) }
            for s in services where s.start >= start && s.start <= end {
                elements.append((s.start, le16(s.start) + le16(s.end) + s.uuid))
            }
            header.append(6)
        case 0x06:  // Find By Type Value: services whose UUID matches.
            guard u16(pdu, 5) == 0x2800 else { return errorResponse(op, start, 0x0A) }
            let value = Array(pdu[7...])
            for s in services where s.start >= start && s.start <= end && s.uuid == value {
                elements.append((s.start, le16(s.start) + le16(s.end)))
            }
        case 0x08:  // Read By Type: attributes of one 16-bit type with values of one length.
            guard pdu.count == 7 else { return errorResponse(op, start, 0x0A) }
            let type = u16(pdu, 5)
            var length: Int?
            for a in attributes where a.handle >= start && a.handle <= end && a.type == type {
                let v = Array(a.value.prefix(min(mtu - 4, 253)))
                if let length, length != v.count { break }
                length = v.count
                elements.append((a.handle, le16(a.handle) + v))
            }
            header.append(UInt8(2 + (length ?? 0)))
        case 0x04:  // Find Information: every attribute's 16-bit type.
            for a in attributes where a.handle >= start && a.handle <= end {
                elements.append((a.handle, le16(a.handle) + le16(a.type)))
            }
            header.append(0x01)
        default:
            return errorResponse(op, start, 0x06)
        }
        // As many as fit in ATT_MTU.
        var fitted: [(UInt16, [UInt8])] = []
        var used = header.count
        for e in elements {
            if used + e.1.count > mtu { break }
            used += e.1.count
            fitted.append(e)
        }
        guard !fitted.isEmpty else { return errorResponse(op, start, 0x0A) }
        if case .backwards = mode {
            if fitted.count >= 2 {
                fitted.reverse()
            } else if start > 1 {
                // One element: put it before the start handle.
                var b = fitted[0].1
                b[0] = UInt8((start - 1) & 0xFF)
                b[1] = UInt8((start - 1) >> 8)
                fitted[0].1 = b
            }
        }
        return header + fitted.flatMap(\.1)
    }
}

/// A well-behaved ATT server over `HostileDatabase` with no I/O (Core Spec 5.4 Vol 3 Part F §3.4): the answer to
/// each request, the MTU it agreed, the prepared-write queue. The hostile peer and the engine fuzzer answer with it.
public struct WellBehavedServer: Sendable {
    public var db = HostileDatabase()
    /// The ATT_MTU this server agreed (23 until Exchange MTU).
    public var mtu = 23
    /// The Server Rx MTU it offers.
    public var serverRxMTU: Int
    var prepared: [(handle: UInt16, offset: Int, value: [UInt8])] = []

    public init(serverRxMTU: Int = 517) { self.serverRxMTU = serverRxMTU }

    /// The answer to `pdu` (nil for commands and confirmations, which are not answered).
    public mutating func answer(_ pdu: [UInt8]) -> [UInt8]? {
        guard !pdu.isEmpty else { return nil }
        return answer(pdu, mode: .normal)
    }

    /// The well-behaved answer to a request (Core Spec 5.4 Vol 3 Part F §3.4).
    mutating func answer(_ pdu: [UInt8], mode: DiscoveryMode) -> [UInt8]? {
        let op = pdu[0]
        switch op {
        case 0x02:
            guard pdu.count == 3 else { return errorResponse(op, 0, 0x04) }
            mtu = max(23, min(Int(u16(pdu, 1)), serverRxMTU))
            return [0x03] + le16(UInt16(clamping: serverRxMTU))
        case 0x04, 0x06, 0x08, 0x10:
            return db.discovery(pdu, mtu: mtu, mode: mode)
        case 0x0A:
            guard pdu.count == 3 else { return errorResponse(op, 0, 0x04) }
            let h = u16(pdu, 1)
            guard let i = db.index(h) else { return errorResponse(op, h, 0x01) }
            return [0x0B] + db.attributes[i].value.prefix(mtu - 1)
        case 0x0C:
            guard pdu.count == 5 else { return errorResponse(op, 0, 0x04) }
            let h = u16(pdu, 1)
            let offset = Int(u16(pdu, 3))
            guard let i = db.index(h) else { return errorResponse(op, h, 0x01) }
            let v = db.attributes[i].value
            guard offset <= v.count else { return errorResponse(op, h, 0x07) }
            return [0x0D] + v[offset...].prefix(mtu - 1)
        case 0x0E, 0x20:
            var out: [UInt8] = [op + 1]
            var i = 1
            while i + 1 < pdu.count {
                let h = u16(pdu, i)
                guard let a = db.index(h) else { return errorResponse(op, h, 0x01) }
                let v = db.attributes[a].value
                out += op == 0x20 ? le16(UInt16(v.count)) + v : v
                i += 2
            }
            return Array(out.prefix(mtu))
        case 0x12:
            guard pdu.count >= 3 else { return errorResponse(op, 0, 0x04) }
            let h = u16(pdu, 1)
            guard let i = db.index(h) else { return errorResponse(op, h, 0x01) }
            guard db.attributes[i].writable else { return errorResponse(op, h, 0x03) }
            db.attributes[i].value = Array(pdu[3...])
            return [0x13]
        case 0x16:
            guard pdu.count >= 5 else { return errorResponse(op, 0, 0x04) }
            let h = u16(pdu, 1)
            guard let i = db.index(h) else { return errorResponse(op, h, 0x01) }
            guard db.attributes[i].writable else { return errorResponse(op, h, 0x03) }
            prepared.append((h, Int(u16(pdu, 3)), Array(pdu[5...])))
            return [0x17] + pdu[1...]
        case 0x18:
            guard pdu.count == 2 else { return errorResponse(op, 0, 0x04) }
            if pdu[1] == 0x01 {
                for p in prepared {
                    guard let i = db.index(p.handle) else { continue }
                    var v = db.attributes[i].value
                    if v.count < p.offset + p.value.count { v += [UInt8](repeating: 0, count: p.offset + p.value.count - v.count) }
                    v.replaceSubrange(p.offset..<(p.offset + p.value.count), with: p.value)
                    db.attributes[i].value = v
                }
            }
            prepared = []
            return [0x19]
        case 0x52:
            // Write Command: applied, never answered.
            if pdu.count >= 3, let i = db.index(u16(pdu, 1)), db.attributes[i].writable { db.attributes[i].value = Array(pdu[3...]) }
            return nil
        default:
            if op & 0x40 != 0 || op == 0x1E { return nil }
            return errorResponse(op, 0, 0x06)
        }
    }
}
