// A btsnoop capture read back by the two readers a user has: btmon -r (BlueZ, Debian's bluez) and tshark -r
// (Wireshark, Debian's tshark), both installed by tools/setup.sh. A test fails when either is missing.
import Foundation

/// What btmon and tshark made of one capture.
public struct CaptureReading: Sendable {
    public var btmon: ToolRun
    public var tshark: ToolRun
    /// The ATT opcodes btmon decoded, in order ("0x08"), from its "ATT: Read By Type Request (0x08) len 6" lines.
    public var btmonATTOpcodes: [String]
    /// The ATT opcodes tshark decoded, in order, with the channel each came on: [CID, opcode] ("0x0004", "0x08").
    public var tsharkATT: [[String]]

    /// Why a user could not read the capture: a reader that crashed or failed, or decoded no ATT PDU. Empty when
    /// both read it.
    public var problems: [String] {
        var p: [String] = []
        for (name, run) in [("btmon", btmon), ("tshark", tshark)] {
            if let signal = run.signal { p.append("\(name) was killed by signal \(signal): \(run.stderr.suffix(300))") }
            else if run.status != 0 { p.append("\(name) exited with \(run.status): \(run.stderr.suffix(300))") }
        }
        if btmonATTOpcodes.isEmpty { p.append("btmon decoded no ATT PDU: \(btmon.stdout.suffix(600))") }
        if tsharkATT.isEmpty { p.append("tshark decoded no ATT PDU: \(tshark.stdout.suffix(600))") }
        return p
    }

    /// Reads `path` with `/usr/bin/btmon -r` and `/usr/bin/tshark -r` (ATT on the Enhanced ATT PSM too: Debian 12's
    /// tshark 4.0 does not know PSM 0x0027), each within 60 s.
    public static func read(_ path: String) throws -> CaptureReading {
        let btmon = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/btmon"), ["-r", path])
        let tshark = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/tshark"),
                                         ["-r", path, "-d", "btl2cap.psm==0x0027,btatt", "-Y", "btatt", "-T", "fields",
                                          "-E", "separator=;", "-e", "btl2cap.cid", "-e", "btatt.opcode"])
        let opcodes = btmon.stdout.split(separator: "\n").compactMap { line -> String? in
            guard let m = line.firstMatch(of: /^\s+ATT: .* \((0x[0-9a-f]{2})\) len \d+$/) else { return nil }
            return String(m.1)
        }
        let att = tshark.stdout.split(separator: "\n").map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
        return CaptureReading(btmon: btmon, tshark: tshark, btmonATTOpcodes: opcodes, tsharkATT: att)
    }
}
