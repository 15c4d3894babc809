// btsnoop capture of ATT traffic, in the Linux monitor format that btmon writes and Wireshark/tshark read.

import ATTStack
import LinkCore
import CBlueZSocket
import Glibc

/// Writes ATT PDUs to a btsnoop file (datalink 2001, the BlueZ monitor format). A socket-level stack never
/// sees HCI, so each PDU is wrapped in a synthetic HCI ACL header (Core Spec 5.4 Vol 4 Part E §5.4.2) and an
/// L2CAP basic header on CID 4 (Vol 3 Part A §3.1); each bearer gets its own adapter index, announced by a
/// "new index" record before its first packet. An Enhanced ATT bearer's PDUs go on its link's index with the
/// ECRED channel's CID in the L2CAP header, after a synthesized channel opening on the signaling channel (see
/// `openCreditBasedChannel`). Safe to share between bearers: one lock guards the fd.
public final class BTSnoopWriter: Sendable {
    /// Whether a PDU went out or came in.
    public enum Direction: Sendable { case sent, received }

    /// The file written to.
    public let path: String
    /// The made-up ACL connection handle the records carry, unless `setConnectionHandle` gave the link's real one.
    /// 0x0000: btmon 5.66 (Debian 12) records a connection only when the reading machine has the capture's hciN
    /// (hci_devba), finds handle 0 even so (its free slots are handle 0), and crashes on an ATT Read By Type Request
    /// for a handle it has no connection for (fixed in BlueZ 5.67, commit 35947e267). The cost: on handle 0 its
    /// L2CAP channel table keeps one dynamic channel, so it decodes only the last Enhanced ATT bearer opened as ATT.
    public static let aclHandle: UInt16 = 0x0000
    /// The LE signaling channel (Core Spec 5.4 Vol 3 Part A §2.1) and the Enhanced ATT SPSM (Assigned Numbers).
    public static let leSignalingCID: UInt16 = 0x0005
    public static let eattPSM: UInt16 = 0x0027
    /// Microseconds from 0000-01-01 to 1970-01-01, the btsnoop epoch offset.
    static let epochOffset: Int64 = 0x00DC_DDB3_0F2F_8000

    private struct State {
        var fd: Int32
        var nextIndex: UInt16 = 0
        /// The real connection handle per index (an LE bearer's link), for the ACL headers.
        var handles: [UInt16: UInt16] = [:]
        /// The identifier of the last synthesized signaling request (Vol 3 Part A §4: nonzero, one per request).
        var signalingIdentifier: UInt8 = 0
        /// The first write error; later writes are skipped.
        var failure: SocketError?
        /// Told the first write error once, when it happens (the CLI prints it and fails the command).
        var onFailure: (@Sendable (SocketError) -> Void)?
    }
    // Guards the fd, the index counter and the first failure.
    private let state: Lock<State>

    /// Creates (or truncates) `path` and writes the btsnoop header. SIGXFSZ is ignored from here on, so that a
    /// file size limit (RLIMIT_FSIZE) fails the write with EFBIG, reported, instead of killing the process.
    public init(path: String) throws(TransportError) {
        signal(SIGXFSZ, SIG_IGN)
        let fd = cbz_create_file(path)
        if fd < 0 { throw .socket(lastSocketError("open", "creating the btsnoop file \(path)", .local)) }
        var header: [UInt8] = Array("btsnoop".utf8) + [0]
        header.snoopAppendBE32(1)     // version
        header.snoopAppendBE32(2001)  // datalink: Linux monitor
        if cbz_write_all(fd, header, header.count) < 0 {
            let e = lastSocketError("write", "writing the btsnoop header to \(path)", .local)
            _ = cbz_close(fd)
            throw .socket(e)
        }
        self.path = path
        self.state = Lock(State(fd: fd))
    }

    deinit { close() }

    /// The first error met while writing records (records after it are not written), or nil.
    public var failure: SocketError? { state.withLock { $0.failure } }

    /// Calls `handler` with the first write error when it happens (at once if one already did); records after it
    /// are not written, so a truncated capture is never silent.
    public func onFailure(_ handler: @escaping @Sendable (SocketError) -> Void) {
        let already = state.withLock { s -> SocketError? in
            if s.failure == nil { s.onFailure = handler }
            return s.failure
        }
        if let already { handler(already) }
    }

    /// Closes the file. Later writes are ignored.
    public func close() {
        state.withLock { s in
            if s.fd >= 0 { _ = cbz_close(s.fd) }
            s.fd = -1
        }
    }

    /// Announces a new adapter index ("new index", opcode 0) named after the bearer and returns it.
    /// A system note (opcode 12) carries the full label.
    @discardableResult
    public func addIndex(label: String, address: BluetoothAddress = .any) -> UInt16 {
        let index = state.withLock { s -> UInt16 in
            defer { s.nextIndex &+= 1 }
            return s.nextIndex
        }
        var payload: [UInt8] = [0x00, 0x00]               // type: primary controller; bus: virtual
        payload += address.bytes.reversed()               // bdaddr_t, little-endian
        var name = Array("att\(index)".utf8.prefix(7))
        name += [UInt8](repeating: 0, count: 8 - name.count)
        payload += name
        let note = Array("index \(index): \(label)".utf8) + [0]
        let now = Self.timestamp()
        payload.withUnsafeBytes { appendRecord(index: index, opcode: 0, timestamp: now, parts: $0, nil) }
        note.withUnsafeBytes { appendRecord(index: index, opcode: 12, timestamp: now, parts: $0, nil) }
        return index
    }

    /// From now on the ATT PDUs of `index` carry `handle` in their ACL header (the link's HCI handle), so that
    /// Wireshark puts them on the same connection as the link's HCI events.
    public func setConnectionHandle(_ handle: UInt16, index: UInt16) {
        state.withLock { $0.handles[index] = handle & 0x0FFF }
    }

    /// Records one HCI command (opcode 2) or event (opcode 3) of the link on `index`: the packet after its H4 type byte.
    public func write(index: UInt16, hci record: HCILinkRecord) {
        guard record.packet.count > 1 else { return }
        let opcode: UInt16
        switch record.kind {
        case .command: opcode = 2
        case .event: opcode = 3
        }
        record.packet.dropFirst().withUnsafeBytes { appendRecord(index: index, opcode: opcode, timestamp: record.timestampMicroseconds, parts: $0, nil) }
    }

    /// Records one ATT PDU as an ACL packet (opcode 4 sent, 5 received) on `index`, timestamped now.
    public func write(index: UInt16, direction: Direction, pdu: UnsafeRawBufferPointer) {
        write(index: index, direction: direction, pdu: pdu, timestamp: Self.timestamp())
    }

    /// Records one ATT PDU with a given timestamp (microseconds since 1970).
    public func write(index: UInt16, direction: Direction, pdu: UnsafeRawBufferPointer, timestamp unixMicroseconds: Int64) {
        let headers = aclHeader(index: index, l2capPayload: pdu.count, cid: 0x0004)
        withUnsafeBytes(of: headers.littleEndian) { h in
            appendRecord(index: index, opcode: direction == .sent ? 4 : 5, timestamp: unixMicroseconds, parts: h, pdu)
        }
    }

    /// Records one ATT PDU of an Enhanced ATT bearer, timestamped now: one K-frame on the channel's CID (a sent PDU
    /// carries the peer's CID, a received one ours), its SDU Length field first (Vol 3 Part A §3.4.3).
    public func write(index: UInt16, direction: Direction, pdu: UnsafeRawBufferPointer, channel: (local: UInt16, remote: UInt16)) {
        write(index: index, direction: direction, pdu: pdu, channel: channel, timestamp: Self.timestamp())
    }

    /// Records one ATT PDU of an Enhanced ATT bearer with a given timestamp (microseconds since 1970).
    public func write(index: UInt16, direction: Direction, pdu: UnsafeRawBufferPointer,
                      channel: (local: UInt16, remote: UInt16), timestamp unixMicroseconds: Int64) {
        var headers = aclHeaderBytes(index: index, l2capPayload: 2 + pdu.count,
                                cid: direction == .sent ? channel.remote : channel.local)
        headers.snoopAppendLE16(UInt16(truncatingIfNeeded: pdu.count))
        headers.withUnsafeBytes { h in
            appendRecord(index: index, opcode: direction == .sent ? 4 : 5, timestamp: unixMicroseconds, parts: h, pdu)
        }
    }

    /// Records the opening of an Enhanced ATT bearer on `index` (its link's): an LE Credit Based Connection
    /// Request naming SPSM 0x0027 and our CID (sent) and its successful Response with the peer's (received), on the
    /// signaling channel (Vol 3 Part A §4.22, §4.23). The kernel's real exchange (ECRED, §4.25) never reaches a
    /// socket-level tool; this one is what lets Wireshark tie the dynamic CIDs to the PSM, so it decodes them as ATT
    /// (a Wireshark without EATT's PSM: `-d btl2cap.psm==0x0027,btatt`). MTU and MPS are the bearer's MTU (one
    /// K-frame per PDU, as recorded); the credits are not known here and say 0.
    public func openCreditBasedChannel(index: UInt16, channel: (local: UInt16, remote: UInt16), mtu: Int,
                                       psm: UInt16 = BTSnoopWriter.eattPSM) {
        let identifier = state.withLock { s -> UInt8 in
            s.signalingIdentifier = s.signalingIdentifier == 0xFF ? 1 : s.signalingIdentifier + 1
            return s.signalingIdentifier
        }
        let m = UInt16(clamping: mtu)
        let now = Self.timestamp()
        // Code 0x14: SPSM, Source CID, MTU, MPS, Initial Credits. Code 0x15: Destination CID, MTU, MPS, credits, Result.
        for (code, fields, direction) in [(UInt8(0x14), [psm, channel.local, m, m, 0], Direction.sent),
                                          (UInt8(0x15), [channel.remote, m, m, 0, 0x0000], Direction.received)] {
            var record = aclHeaderBytes(index: index, l2capPayload: 4 + 2 * fields.count, cid: Self.leSignalingCID)
            record += [code, identifier]
            record.snoopAppendLE16(UInt16(2 * fields.count))
            for f in fields { record.snoopAppendLE16(f) }
            record.withUnsafeBytes { appendRecord(index: index, opcode: direction == .sent ? 4 : 5, timestamp: now, parts: $0, nil) }
        }
    }

    /// What a synthesized LE Connection Complete event says (Core Spec 5.4 Vol 4 Part E §7.7.65.1), in the event's
    /// units. Readers tie a handle's ACL packets to a connection by this event: btmon 5.66 crashes at an ATT
    /// Read By Type Request on a handle without one; Wireshark names the link's addresses from it.
    public struct LinkOpening: Sendable, Equatable {
        public var handle: UInt16
        public var role: LinkRole
        public var peerAddressType: LEAddressType
        public var peer: BluetoothAddress
        /// Connection_Interval (1.25 ms units), Peripheral_Latency (events), Supervision_Timeout (10 ms units).
        public var interval: UInt16
        public var latency: UInt16
        public var supervisionTimeout: UInt16
        /// Why it is synthesized: the system note recorded before it says so.
        public var reason: String

        public init(handle: UInt16, role: LinkRole, peerAddressType: LEAddressType, peer: BluetoothAddress,
                    interval: UInt16 = LinkOpening.defaultInterval, latency: UInt16 = 0,
                    supervisionTimeout: UInt16 = LinkOpening.defaultSupervisionTimeout, reason: String) {
            self.handle = handle & 0x0FFF
            self.role = role
            self.peerAddressType = peerAddressType
            self.peer = peer
            self.interval = interval
            self.latency = latency
            self.supervisionTimeout = supervisionTimeout
            self.reason = reason
        }

        /// Linux's default LE connection parameters (hci_core.c: le_conn_min_interval 0x0018, 30 ms;
        /// le_supv_timeout 0x002a, 420 ms), for values nothing saw.
        public static let defaultInterval: UInt16 = 0x0018
        public static let defaultSupervisionTimeout: UInt16 = 0x002A
        /// The made-up peer of a link that has no radio (unix:, a socketpair): a static random address (two top
        /// bits 11, Vol 6 Part B §1.3.2.1) whose first octet has the locally administered bit, so that no reader
        /// names a vendor for it (Wireshark called C0:00:00 "WesternD").
        public static let noRadioPeer = BluetoothAddress(bytes: [0xC2, 0x00, 0x00, 0x00, 0x00, 0x01])!

        /// A link with no radio (`label`: "unix:/tmp/mirror-sim.sock"): this host central on the made-up handle
        /// (`BTSnoopWriter.aclHandle`) to `noRadioPeer`, with Linux's default parameters.
        public static func noRadio(label: String) -> LinkOpening {
            LinkOpening(handle: BTSnoopWriter.aclHandle, role: .central, peerAddressType: .random, peer: noRadioPeer,
                        reason: "\(label) has no radio link; the handle, the peer C2:00:00:00:00:01 and the parameters are made up")
        }

        /// The event's packet (from its event code on, as btsnoop records an event): LE Meta (0x3E), subevent 0x01.
        var eventPacket: [UInt8] {
            var p: [UInt8] = [0x3E, 19, 0x01, 0x00]      // event code, parameter length, subevent, status: success
            p.snoopAppendLE16(handle)
            p += [role == .central ? 0x00 : 0x01, peerAddressType == .public ? 0x00 : 0x01]
            p += peer.bytes.reversed()                    // BD_ADDR, least significant octet first
            p.snoopAppendLE16(interval)
            p.snoopAppendLE16(latency)
            p.snoopAppendLE16(supervisionTimeout)
            p.append(0x00)                                // Central_Clock_Accuracy: 500 ppm
            return p
        }
    }

    /// Records a synthesized LE Connection Complete for `index`'s link, after a system note naming it synthesized
    /// and why, and puts its handle on the index's ACL packets. Call it before the index's first ACL packet.
    public func openLink(index: UInt16, _ link: LinkOpening) {
        setConnectionHandle(link.handle, index: index)
        let note = Array("synthesized LE Connection Complete for handle \(ATTHex.handle(link.handle)): \(link.reason)".utf8) + [0]
        let now = Self.timestamp()
        note.withUnsafeBytes { appendRecord(index: index, opcode: 12, timestamp: now, parts: $0, nil) }
        link.eventPacket.withUnsafeBytes { appendRecord(index: index, opcode: 3, timestamp: now, parts: $0, nil) }
    }

    /// The ACL header (handle with PB=10: start, automatically flushable; data length) and the basic L2CAP header
    /// (length, CID) of a payload of `l2capPayload` octets, as the 8 octets of a UInt64 in little-endian order.
    private func aclHeader(index: UInt16, l2capPayload: Int, cid: UInt16) -> UInt64 {
        let handle = (state.withLock { $0.handles[index] } ?? Self.aclHandle) | 0x2000
        let l2len = UInt16(truncatingIfNeeded: l2capPayload)
        let acllen = UInt16(truncatingIfNeeded: l2capPayload + 4)
        return UInt64(handle) | UInt64(acllen) << 16 | UInt64(l2len) << 32 | UInt64(cid) << 48
    }

    /// `aclHeader` as bytes, for records that carry more header (an SDU length, a signaling command).
    private func aclHeaderBytes(index: UInt16, l2capPayload: Int, cid: UInt16) -> [UInt8] {
        withUnsafeBytes(of: aclHeader(index: index, l2capPayload: l2capPayload, cid: cid).littleEndian) { Array($0) }
    }

    /// Microseconds since 1970 from CLOCK_REALTIME.
    static func timestamp() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }

    private func appendRecord(index: UInt16, opcode: UInt16, timestamp: Int64,
                              parts first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer?) {
        let length = first.count + (second?.count ?? 0)
        let total = 24 + length
        withUnsafeTemporaryAllocation(byteCount: total, alignment: 8) { buf in
            func be32(_ v: UInt32, at o: Int) { withUnsafeBytes(of: v.bigEndian) { buf.baseAddress!.advanced(by: o).copyMemory(from: $0.baseAddress!, byteCount: 4) } }
            be32(UInt32(length), at: 0)                                // original length
            be32(UInt32(length), at: 4)                                // included length
            be32(UInt32(index) << 16 | UInt32(opcode), at: 8)          // flags: index, opcode
            be32(0, at: 12)                                            // cumulative drops
            withUnsafeBytes(of: (timestamp + Self.epochOffset).bigEndian) {
                buf.baseAddress!.advanced(by: 16).copyMemory(from: $0.baseAddress!, byteCount: 8)
            }
            if first.count > 0 { buf.baseAddress!.advanced(by: 24).copyMemory(from: first.baseAddress!, byteCount: first.count) }
            if let second, second.count > 0 {
                buf.baseAddress!.advanced(by: 24 + first.count).copyMemory(from: second.baseAddress!, byteCount: second.count)
            }
            let failed = state.withLock { s -> (SocketError, (@Sendable (SocketError) -> Void)?)? in
                guard s.fd >= 0, s.failure == nil else { return nil }
                guard cbz_write_all(s.fd, buf.baseAddress, total) < 0 else { return nil }
                let e = lastSocketError("write", "writing a btsnoop record to \(path)", .local)
                s.failure = e
                return (e, s.onFailure)
            }
            // Told outside the lock: the handler prints.
            if let (e, handler) = failed { handler?(e) }
        }
    }
}

extension Array where Element == UInt8 {
    mutating func snoopAppendLE16(_ v: UInt16) {
        append(UInt8(v & 0xFF)); append(UInt8(v >> 8))
    }

    mutating func snoopAppendBE32(_ v: UInt32) {
        append(UInt8(v >> 24)); append(UInt8(v >> 16 & 0xFF)); append(UInt8(v >> 8 & 0xFF)); append(UInt8(v & 0xFF))
    }
}
