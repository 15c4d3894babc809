// The HCI events and commands that describe and change one LE link (Core Spec 5.4 Vol 4 Part E §7.7, §7.8):
// their decoded values, their parsers (called by HCIEvent.parse) and the command encoders.

import ATTStack
import LinkCore

/// One entry of Number Of Completed Packets (§7.7.19).
public struct HCICompletedPackets: Sendable, Equatable {
    public var handle: UInt16
    public var count: UInt16
    public init(handle: UInt16, count: UInt16) { self.handle = handle; self.count = count }
}

/// LE Connection Complete (§7.7.65.1) and LE Enhanced Connection Complete v1 (§7.7.65.10) / v2 (§7.7.65.10 v2).
public struct LEConnectionComplete: Sendable, Equatable {
    /// 0x01 LE Connection Complete, 0x0A Enhanced v1, 0x29 Enhanced v2.
    public var subevent: UInt8
    public var status: UInt8
    public var handle: UInt16
    /// The local role: 0x00 central, 0x01 peripheral.
    public var role: UInt8
    public var peerAddressType: UInt8
    public var peerAddress: BluetoothAddress
    /// Units of 1.25 ms.
    public var intervalUnits: UInt16
    public var peripheralLatency: UInt16
    /// Units of 10 ms.
    public var supervisionTimeoutUnits: UInt16

    /// "LE Connection Complete", "LE Enhanced Connection Complete", "LE Enhanced Connection Complete v2".
    public var eventName: String {
        switch subevent {
        case 0x0A: return "LE Enhanced Connection Complete"
        case 0x29: return "LE Enhanced Connection Complete v2"
        default: return "LE Connection Complete"
        }
    }
}

/// LE Connection Update Complete (§7.7.65.3).
public struct LEConnectionUpdateComplete: Sendable, Equatable {
    public var status: UInt8
    public var handle: UInt16
    /// Units of 1.25 ms.
    public var intervalUnits: UInt16
    public var peripheralLatency: UInt16
    /// Units of 10 ms.
    public var supervisionTimeoutUnits: UInt16
}

/// LE Data Length Change (§7.7.65.7): the link layer's new maximum payloads (octets) and their air times (µs).
public struct LEDataLengthChange: Sendable, Equatable {
    public var handle: UInt16
    public var maxTxOctets: UInt16
    public var maxTxTime: UInt16
    public var maxRxOctets: UInt16
    public var maxRxTime: UInt16
}

extension HCIEvent {
    /// The connection handle the event is about (nil for Command Complete/Status, reports, other events).
    /// Number Of Completed Packets gives its first handle.
    public var connectionHandle: UInt16? {
        switch self {
        case .disconnectionComplete(_, let h, _), .encryptionChange(_, let h, _), .lePHYUpdateComplete(_, let h, _, _): return h
        case .numberOfCompletedPackets(let entries): return entries.first?.handle
        case .leConnectionComplete(let c): return c.handle
        case .leConnectionUpdateComplete(let u): return u.handle
        case .leDataLengthChange(let d): return d.handle
        case .commandComplete, .commandStatus, .leAdvertisingReports, .other: return nil
        }
    }


    /// Disconnection Complete, Encryption Change, Number Of Completed Packets; nil when the length is wrong.
    static func parseLinkEvent(code: UInt8, _ p: [UInt8]) -> HCIEvent? {
        switch code {
        case 0x05:
            guard p.count == 4 else { return nil }
            return .disconnectionComplete(status: p[0], handle: p.littleEndianUInt16(at: 1) & 0x0FFF, reason: p[3])
        case 0x08:
            guard p.count == 4 else { return nil }
            return .encryptionChange(status: p[0], handle: p.littleEndianUInt16(at: 1) & 0x0FFF, enabled: p[3])
        default: // 0x13: Num_Handles, then Connection_Handle[i] and Num_Completed_Packets[i] in pairs, as the kernel reads it
            guard let n = p.first, p.count == 1 + 4 * Int(n) else { return nil }
            return .numberOfCompletedPackets((0..<Int(n)).map {
                HCICompletedPackets(handle: p.littleEndianUInt16(at: 1 + 4 * $0) & 0x0FFF, count: p.littleEndianUInt16(at: 3 + 4 * $0))
            })
        }
    }

    /// The LE Meta subevents of a link (p[0] is the subevent code); nil when too short for its fields.
    static func parseLEMetaLinkEvent(_ p: [UInt8]) -> HCIEvent? {
        switch p[0] {
        case 0x01, 0x0A, 0x29:
            // Enhanced adds the local and peer resolvable private addresses (12 bytes) before the interval;
            // v2 adds the advertising handle and sync handle after the clock accuracy.
            let rpa = p[0] == 0x01 ? 0 : 12
            let length = 19 + rpa + (p[0] == 0x29 ? 3 : 0)
            guard p.count >= length else { return nil }
            let at = 12 + rpa
            return .leConnectionComplete(LEConnectionComplete(
                subevent: p[0], status: p[1], handle: p.littleEndianUInt16(at: 2) & 0x0FFF, role: p[4], peerAddressType: p[5],
                peerAddress: BluetoothAddress(uncheckedBytes: p[6..<12].reversed()),
                intervalUnits: p.littleEndianUInt16(at: at), peripheralLatency: p.littleEndianUInt16(at: at + 2), supervisionTimeoutUnits: p.littleEndianUInt16(at: at + 4)))
        case 0x03:
            guard p.count >= 10 else { return nil }
            return .leConnectionUpdateComplete(LEConnectionUpdateComplete(
                status: p[1], handle: p.littleEndianUInt16(at: 2) & 0x0FFF, intervalUnits: p.littleEndianUInt16(at: 4), peripheralLatency: p.littleEndianUInt16(at: 6),
                supervisionTimeoutUnits: p.littleEndianUInt16(at: 8)))
        case 0x07:
            guard p.count >= 11 else { return nil }
            return .leDataLengthChange(LEDataLengthChange(
                handle: p.littleEndianUInt16(at: 1) & 0x0FFF, maxTxOctets: p.littleEndianUInt16(at: 3), maxTxTime: p.littleEndianUInt16(at: 5), maxRxOctets: p.littleEndianUInt16(at: 7),
                maxRxTime: p.littleEndianUInt16(at: 9)))
        default: // 0x0C
            guard p.count >= 6 else { return nil }
            return .lePHYUpdateComplete(status: p[1], handle: p.littleEndianUInt16(at: 2) & 0x0FFF, txPHY: p[4], rxPHY: p[5])
        }
    }
}

/// A command parameter outside what the Core Spec allows: the encoder refuses to build the command.
public struct HCIParameterError: Error, Sendable, Equatable, CustomStringConvertible {
    public var command: String
    public var parameter: String
    public var value: String
    /// The allowed range, in the parameter's units: "0x0006-0x0C80 (7.5 ms to 4 s in 1.25 ms units)".
    public var allowed: String

    public var description: String { "\(command): \(parameter) \(value) is outside \(allowed)" }
}

extension HCICommand {
    static func check(_ ok: Bool, _ command: String, _ parameter: String, _ value: some BinaryInteger,
                      _ allowed: String) throws(HCIParameterError) {
        if !ok {
            throw HCIParameterError(command: command, parameter: parameter, value: ATTHex.handle(UInt16(truncatingIfNeeded: value)), allowed: allowed)
        }
    }

    /// A connection handle (§5.4.2): 12 bits, 0x0000-0x0EFF.
    static func checkHandle(_ handle: UInt16, _ command: String) throws(HCIParameterError) {
        try check(handle <= 0x0EFF, command, "Connection_Handle", handle, "0x0000-0x0EFF")
    }

    /// LE Connection Update (§7.8.18): the interval range (1.25 ms units), the peripheral latency (connection
    /// events), the supervision timeout (10 ms units), which must exceed (1 + latency) x interval max x 2;
    /// CE lengths 0 (no preference). Answered by Command Status, then LE Connection Update Complete.
    public static func leConnectionUpdate(handle: UInt16, intervalMinUnits: UInt16, intervalMaxUnits: UInt16, latency: UInt16,
                                          supervisionTimeoutUnits: UInt16) throws(HCIParameterError) -> HCICommand {
        let name = "LE Connection Update"
        try checkHandle(handle, name)
        let interval = "0x0006-0x0C80 (7.5 ms to 4 s in 1.25 ms units)"
        try check((0x0006...0x0C80).contains(intervalMinUnits), name, "Connection_Interval_Min", intervalMinUnits, interval)
        try check((0x0006...0x0C80).contains(intervalMaxUnits), name, "Connection_Interval_Max", intervalMaxUnits, interval)
        try check(intervalMinUnits <= intervalMaxUnits, name, "Connection_Interval_Min", intervalMinUnits,
                  "0x0006-\(ATTHex.handle(intervalMaxUnits)) (at most Connection_Interval_Max)")
        try check(latency <= 0x01F3, name, "Max_Latency", latency, "0x0000-0x01F3 (0 to 499 connection events)")
        try check((0x000A...0x0C80).contains(supervisionTimeoutUnits), name, "Supervision_Timeout", supervisionTimeoutUnits,
                  "0x000A-0x0C80 (100 ms to 32 s in 10 ms units)")
        // Timeout (ms) > (1 + latency) x interval max (ms) x 2, in integers: units x 10 > (1 + latency) x units x 1.25 x 2.
        let floor = (1 + Int(latency)) * Int(intervalMaxUnits) * 25 / 10
        try check(Int(supervisionTimeoutUnits) * 10 > floor, name, "Supervision_Timeout", supervisionTimeoutUnits,
                  "more than (1 + Max_Latency) x Connection_Interval_Max x 2 = \(floor) ms")
        var p = le16(handle) + le16(intervalMinUnits) + le16(intervalMaxUnits) + le16(latency) + le16(supervisionTimeoutUnits)
        p += [0, 0, 0, 0] // Min_CE_Length, Max_CE_Length
        return HCICommand(ogf: leOGF, ocf: 0x0013, name: name, parameters: p)
    }

    /// LE Set PHY (§7.8.49): the PHYs this host prefers in each direction (bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded),
    /// All_PHYs 0 (a preference for both), no Coded option. Answered by Command Status, then LE PHY Update Complete.
    public static func leSetPHY(handle: UInt16, txPHYs: UInt8, rxPHYs: UInt8) throws(HCIParameterError) -> HCICommand {
        let name = "LE Set PHY"
        try checkHandle(handle, name)
        try check(txPHYs != 0 && txPHYs & ~0x07 == 0, name, "TX_PHYs", txPHYs, "0x01-0x07 (bits: 1M, 2M, Coded)")
        try check(rxPHYs != 0 && rxPHYs & ~0x07 == 0, name, "RX_PHYs", rxPHYs, "0x01-0x07 (bits: 1M, 2M, Coded)")
        return HCICommand(ogf: leOGF, ocf: 0x0032, name: name, parameters: le16(handle) + [0x00, txPHYs, rxPHYs, 0x00, 0x00])
    }

    /// LE Set Data Length (§7.8.33): the largest payload (octets) and its air time (µs) the host suggests for TX.
    /// Answered by Command Complete (status, handle), then LE Data Length Change if the link's values changed.
    public static func leSetDataLength(handle: UInt16, txOctets: UInt16, txTime: UInt16) throws(HCIParameterError) -> HCICommand {
        let name = "LE Set Data Length"
        try checkHandle(handle, name)
        try check((0x001B...0x00FB).contains(txOctets), name, "TX_Octets", txOctets, "0x001B-0x00FB (27 to 251 octets)")
        try check((0x0148...0x4290).contains(txTime), name, "TX_Time", txTime, "0x0148-0x4290 (328 to 17040 µs)")
        return HCICommand(ogf: leOGF, ocf: 0x0022, name: name, parameters: le16(handle) + le16(txOctets) + le16(txTime))
    }

    /// LE Read PHY (§7.8.47): Command Complete with status, handle, TX PHY, RX PHY.
    public static func leReadPHY(handle: UInt16) throws(HCIParameterError) -> HCICommand {
        try checkHandle(handle, "LE Read PHY")
        return HCICommand(ogf: leOGF, ocf: 0x0030, name: "LE Read PHY", parameters: le16(handle))
    }

    /// LE Read Buffer Size v1 (§7.8.2): Command Complete with status, LE ACL data length (2), LE ACL packets (1);
    /// a length of 0 means LE shares the BR/EDR buffers.
    public static let leReadBufferSize = HCICommand(ogf: leOGF, ocf: 0x0002, name: "LE Read Buffer Size")

    /// The TX_Time that carries `octets` on `phy` (Vol 6 Part B §2.1, §2.2: preamble, access address, header, payload,
    /// MIC, CRC; Coded at S=8, its worst case), clamped to LE Set Data Length's range: 1M (octets + 14) x 8 µs,
    /// 2M (octets + 15) x 4 µs, Coded 976 + 64 x octets µs.
    public static func dataLengthTxTime(octets: Int, phy: LinkPHY) -> UInt16 {
        let micros: Int
        switch phy {
        case .le1M: micros = (octets + 14) * 8
        case .le2M: micros = (octets + 15) * 4
        case .leCoded: micros = 976 + 64 * octets
        }
        return UInt16(min(max(micros, 0x0148), 0x4290))
    }
}

extension HCIEvent {
    /// One line for --trace: the event's name and the fields that describe the link (Vol 4 Part E §7.7).
    public var summary: String {
        func ms(_ units: UInt16, _ unit: Double) -> String {
            let v = Double(units) * unit
            return v == v.rounded() ? "\(Int(v)) ms" : "\(v) ms"
        }
        func status(_ s: UInt8) -> String { s == 0 ? "" : " status \(HCIStatus.describe(s))" }
        func phy(_ v: UInt8) -> String { LinkPHY(hciValue: v)?.rawValue ?? ATTHex.byte(v) }
        switch self {
        case .commandComplete(let opcode, let ret):
            return "Command Complete \(HCICommand.name(ofOpcode: opcode))\(ret.first.map { status($0) } ?? "")"
                + (ret.count > 1 ? " [\(ATTHex.string(Array(ret.dropFirst()), separator: " "))]" : "")
        case .commandStatus(let opcode, let s):
            return "Command Status \(HCICommand.name(ofOpcode: opcode))\(s == 0 ? " pending" : status(s))"
        case .leAdvertisingReports(let reports):
            return "LE Advertising Report (\(reports.count))"
        case .disconnectionComplete(let s, let handle, let reason):
            return "Disconnection Complete handle \(ATTHex.handle(handle)) reason \(HCIStatus.describe(reason))\(status(s))"
        case .encryptionChange(let s, let handle, let enabled):
            return "Encryption Change handle \(ATTHex.handle(handle)) \(enabled != 0 ? "on" : "off")\(status(s))"
        case .numberOfCompletedPackets(let list):
            return "Number Of Completed Packets " + list.map { "handle \(ATTHex.handle($0.handle)): \($0.count)" }.joined(separator: ", ")
        case .leConnectionComplete(let c):
            return "\(c.eventName) handle \(ATTHex.handle(c.handle)) \(c.role == 0 ? "central" : "peripheral") peer \(c.peerAddress) "
                + "interval \(ms(c.intervalUnits, 1.25)) latency \(c.peripheralLatency) timeout \(ms(c.supervisionTimeoutUnits, 10))\(status(c.status))"
        case .leConnectionUpdateComplete(let u):
            return "LE Connection Update Complete handle \(ATTHex.handle(u.handle)) interval \(ms(u.intervalUnits, 1.25)) "
                + "latency \(u.peripheralLatency) timeout \(ms(u.supervisionTimeoutUnits, 10))\(status(u.status))"
        case .leDataLengthChange(let d):
            return "LE Data Length Change handle \(ATTHex.handle(d.handle)) TX \(d.maxTxOctets) octets \(d.maxTxTime) us, RX \(d.maxRxOctets) octets \(d.maxRxTime) us"
        case .lePHYUpdateComplete(let s, let handle, let tx, let rx):
            return "LE PHY Update Complete handle \(ATTHex.handle(handle)) TX \(phy(tx)) RX \(phy(rx))\(status(s))"
        case .other(let code, let p):
            return "HCI event \(ATTHex.byte(code)) [\(ATTHex.string(p, separator: " "))]"
        }
    }
}

extension HCILinkRecord {
    /// One line for --trace: "HCI > LE Set PHY [40 00 00 02 02 00 00]" or "HCI < LE PHY Update Complete ...".
    public var summary: String {
        switch kind {
        case .command(let c): return "HCI > \(c.name)" + (c.parameters.isEmpty ? "" : " [\(ATTHex.string(c.parameters, separator: " "))]")
        case .event(let e): return "HCI < \(e.summary)"
        }
    }
}

extension HCICommand {
    /// The names of the commands this tool and the kernel send on a link's behalf, for answers that carry only an
    /// opcode (Vol 4 Part E §7.8); anything else as "opcode 0x2013 (OGF 0x08, OCF 0x0013)".
    static let knownNames: [UInt16: String] = [
        0x2002: "LE Read Buffer Size", 0x2006: "LE Set Advertising Parameters", 0x2008: "LE Set Advertising Data",
        0x200A: "LE Set Advertising Enable", 0x200B: "LE Set Scan Parameters", 0x200C: "LE Set Scan Enable",
        0x200D: "LE Create Connection", 0x2013: "LE Connection Update", 0x2016: "LE Read Remote Features",
        0x2022: "LE Set Data Length", 0x2030: "LE Read PHY", 0x2032: "LE Set PHY", 0x2043: "LE Extended Create Connection",
        0x0406: "Disconnect",
    ]

    public static func name(ofOpcode opcode: UInt16) -> String {
        knownNames[opcode] ?? "opcode \(ATTHex.handle(opcode)) (OGF \(ATTHex.byte(UInt8(opcode >> 10))), OCF \(ATTHex.handle(opcode & 0x03FF)))"
    }
}
