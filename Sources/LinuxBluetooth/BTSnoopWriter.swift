// btsnoop capture of ATT traffic, in the Linux monitor format that btmon writes and Wireshark/tshark read.

import CBlueZSocket
import Glibc

/// Writes ATT PDUs to a btsnoop file (datalink 2001, the BlueZ monitor format). A socket-level stack never
/// sees HCI, so each PDU is wrapped in a synthetic HCI ACL header (Core Spec 5.4 Vol 4 Part E §5.4.2) and an
/// L2CAP basic header on CID 4 (Vol 3 Part A §3.1); each bearer gets its own adapter index, announced by a
/// "new index" record before its first packet. Safe to share between bearers: one lock guards the fd.
public final class BTSnoopWriter: Sendable {
    /// Whether a PDU went out or came in.
    public enum Direction: Sendable { case sent, received }

    /// The file written to.
    public let path: String
    /// The made-up ACL connection handle the records carry, unless `setConnectionHandle` gave the link's real one.
    public static let aclHandle: UInt16 = 0x0040
    /// Microseconds from 0000-01-01 to 1970-01-01, the btsnoop epoch offset.
    static let epochOffset: Int64 = 0x00DC_DDB3_0F2F_8000

    private struct State {
        var fd: Int32
        var nextIndex: UInt16 = 0
        /// The real connection handle per index (an LE bearer's link), for the ACL headers.
        var handles: [UInt16: UInt16] = [:]
        /// The first write error; later writes are skipped.
        var failure: SocketError?
    }
    // Guards the fd, the index counter and the first failure.
    private let state: Lock<State>

    /// Creates (or truncates) `path` and writes the btsnoop header.
    public init(path: String) throws(TransportError) {
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
        // ACL header: handle with PB=10 (start, automatically flushable), data length; L2CAP: length, CID 4.
        let handle = (state.withLock { $0.handles[index] } ?? Self.aclHandle) | 0x2000
        let l2len = UInt16(truncatingIfNeeded: pdu.count)
        let acllen = UInt16(truncatingIfNeeded: pdu.count + 4)
        let headers: (UInt64) = UInt64(handle & 0xFF) | UInt64(handle >> 8) << 8
            | UInt64(acllen & 0xFF) << 16 | UInt64(acllen >> 8) << 24
            | UInt64(l2len & 0xFF) << 32 | UInt64(l2len >> 8) << 40
            | UInt64(0x04) << 48 | UInt64(0x00) << 56
        withUnsafeBytes(of: headers.littleEndian) { h in
            appendRecord(index: index, opcode: direction == .sent ? 4 : 5, timestamp: unixMicroseconds, parts: h, pdu)
        }
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
            state.withLock { s in
                guard s.fd >= 0, s.failure == nil else { return }
                if cbz_write_all(s.fd, buf.baseAddress, total) < 0 {
                    s.failure = lastSocketError("write", "writing a btsnoop record to \(path)", .local)
                }
            }
        }
    }
}

extension Array where Element == UInt8 {
    mutating func snoopAppendBE32(_ v: UInt32) {
        append(UInt8(v >> 24)); append(UInt8(v >> 16 & 0xFF)); append(UInt8(v >> 8 & 0xFF)); append(UInt8(v & 0xFF))
    }
}
