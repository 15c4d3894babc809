// Reads btsnoop captures (RFC 1761's snoop layout as BlueZ and Android write it): the Linux monitor format btmon and
// this tool write (datalink 2001: each record an adapter index and an opcode) and the H4 format of Android's HCI snoop
// log (datalink 1002: each record an H4 packet, its first byte the packet type). Every record is checked against the
// file before it is read: a length past the file's end, or above the largest HCI packet, is an error naming the
// record, never a read of gigabytes.
import Glibc

/// What went wrong reading a capture: the record (1-based) and its byte offset when one was at fault.
public struct CaptureError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: String
    public var record: Int?
    public var offset: Int?

    public init(_ problem: String, record: Int? = nil, offset: Int? = nil) {
        self.problem = problem
        self.record = record
        self.offset = offset
    }

    public var description: String {
        guard let record else { return problem }
        return "record \(record) (at byte \(offset ?? 0)): \(problem)"
    }
}

/// One HCI packet of a capture, as the controller's host saw it (Core Spec 5.4 Vol 4 Part E §5.4).
public struct HCIPacket: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case command, event
        /// ACL data from the host (sent) or to it (received).
        case aclSent, aclReceived
    }

    public var kind: Kind
    /// The adapter index (monitor format); 0 in an H4 capture, which holds one controller.
    public var adapter: UInt16
    /// The packet without its H4 type byte.
    public var bytes: [UInt8]
    /// Microseconds since 1970.
    public var timestamp: Int64
    /// The record it came from (1-based).
    public var record: Int
}

/// A btsnoop file read whole into packets; records of other kinds (SCO, notes, index announcements) are skipped.
public struct BTSnoopCapture: Sendable {
    /// The datalinks read: H4 (Android's snoop log) and the Linux monitor (btmon, this tool).
    public enum Datalink: UInt32, Sendable { case h4 = 1002, monitor = 2001 }

    public let datalink: Datalink
    public let packets: [HCIPacket]
    /// The records read, the skipped included.
    public let records: Int

    /// The largest record taken: an HCI ACL packet's 4-byte header and 65,535 bytes of data, with its type byte
    /// (Vol 4 Part E §5.4.2); a monitor record's payload is no larger.
    public static let largestRecord = 1 + 4 + 65_535
    /// Microseconds from 0000-01-01 to 1970-01-01, the btsnoop epoch offset.
    static let epochOffset: Int64 = 0x00DC_DDB3_0F2F_8000

    /// Reads the capture at `path`. Throws `CaptureError` for a file that is not btsnoop, an unknown datalink, or a
    /// record whose lengths do not fit (truncated, too long, past the file's end).
    public init(path: String) throws(CaptureError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw CaptureError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { throw CaptureError("\(path) is not a regular file") }
        try self.init(name: path, size: Int(st.st_size)) { count, offset in
            var out = [UInt8](repeating: 0, count: count)
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
            return n == count ? out : nil
        }
    }

    /// Reads a capture held in memory (the fuzz target's input), as `init(path:)` reads a file.
    public init(bytes: [UInt8], name: String = "the capture") throws(CaptureError) {
        try self.init(name: name, size: bytes.count) { count, offset in
            offset + count <= bytes.count ? Array(bytes[offset..<offset + count]) : nil
        }
    }

    /// The one parser: `read(count, offset)` gives that many bytes at that offset, or nil; it is never asked for more
    /// than a record header or `largestRecord` bytes, whatever a record claims.
    init(name: String, size: Int, read: (Int, Int) -> [UInt8]?) throws(CaptureError) {
        guard size >= 16, let header = read(16, 0) else { throw CaptureError("\(name) is shorter than a btsnoop header (16 bytes)") }
        guard Array(header[0..<8]) == Array("btsnoop\0".utf8) else { throw CaptureError("\(name) is not a btsnoop capture (no \"btsnoop\" magic)") }
        let version = Self.be32(header, 8), link = Self.be32(header, 12)
        guard version == 1 else { throw CaptureError("btsnoop version \(version), this reader takes version 1") }
        guard let datalink = Datalink(rawValue: link) else {
            throw CaptureError("btsnoop datalink \(link): this reader takes 1002 (H4, Android's snoop log) and 2001 (Linux monitor, btmon)")
        }
        self.datalink = datalink
        var packets: [HCIPacket] = []
        var offset = 16, record = 0
        while offset < size {
            record += 1
            guard offset + 24 <= size, let r = read(24, offset) else {
                throw CaptureError("truncated: \(size - offset) bytes left, a record header is 24", record: record, offset: offset)
            }
            let original = Int(Self.be32(r, 0)), included = Int(Self.be32(r, 4)), flags = Self.be32(r, 8)
            guard included <= original else {
                throw CaptureError("included length \(included) above the original length \(original)", record: record, offset: offset)
            }
            guard included <= Self.largestRecord else {
                throw CaptureError("length \(included) is above the largest HCI packet (\(Self.largestRecord) bytes)", record: record, offset: offset)
            }
            guard offset + 24 + included <= size, let data = read(included, offset + 24) else {
                throw CaptureError("truncated: the record says \(included) bytes, the file has \(size - offset - 24) left", record: record, offset: offset)
            }
            let microseconds = Int64(bitPattern: UInt64(Self.be32(r, 16)) << 32 | UInt64(Self.be32(r, 20))) &- Self.epochOffset
            if let p = Self.packet(data, flags: flags, datalink: datalink, timestamp: microseconds, record: record) { packets.append(p) }
            offset += 24 + included
        }
        self.packets = packets
        records = record
    }

    static func be32(_ b: [UInt8], _ o: Int) -> UInt32 {
        UInt32(b[o]) << 24 | UInt32(b[o + 1]) << 16 | UInt32(b[o + 2]) << 8 | UInt32(b[o + 3])
    }

    /// The record's HCI packet, or nil for a record of another kind.
    static func packet(_ data: [UInt8], flags: UInt32, datalink: Datalink, timestamp: Int64, record: Int) -> HCIPacket? {
        switch datalink {
        case .monitor:
            // flags: the adapter index in the high 16 bits, the opcode in the low (BlueZ monitor/bt.h).
            let kind: HCIPacket.Kind
            switch flags & 0xFFFF {
            case 2: kind = .command
            case 3: kind = .event
            case 4: kind = .aclSent
            case 5: kind = .aclReceived
            default: return nil
            }
            return HCIPacket(kind: kind, adapter: UInt16(flags >> 16), bytes: data, timestamp: timestamp, record: record)
        case .h4:
            // The first byte is the H4 packet type (Vol 4 Part A §2); flags bit 0: received (1) or sent (0).
            guard let type = data.first else { return nil }
            let received = flags & 1 == 1
            let kind: HCIPacket.Kind
            switch type {
            case 0x01: kind = .command
            case 0x02: kind = received ? .aclReceived : .aclSent
            case 0x04: kind = .event
            default: return nil
            }
            return HCIPacket(kind: kind, adapter: 0, bytes: Array(data.dropFirst()), timestamp: timestamp, record: record)
        }
    }
}
