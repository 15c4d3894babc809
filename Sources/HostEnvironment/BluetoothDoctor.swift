// `mirror doctor`: what this machine offers for raw ATT, and what to do about each gap.

import CBlueZSocket
import LinuxBluetooth
import LinkCore
import FoundationEssentials
import Glibc
import JSON

/// One finding of the doctor: what was checked, how it stands, what it means, and what to do.
public struct DoctorFinding: Sendable, Equatable {
    public enum Status: String, Sendable {
        case ok, info, warning, problem
    }
    /// "kernel", "rfkill", "adapters", "adapter hci0", "capabilities", "bluetoothd".
    public var check: String
    public var status: Status
    public var detail: String
    /// The command or step that fixes it; nil when nothing needs doing.
    public var action: String?

    public init(check: String, status: Status, detail: String, action: String? = nil) {
        self.check = check
        self.status = status
        self.detail = detail
        self.action = action
    }

    /// The finding as a JSON object, keys sorted; `action` only when there is one.
    public var jsonValue: JSONValue {
        .sortedObject([("check", .string(check)), ("status", .string(status.rawValue)), ("detail", .string(detail))]
                      + (action.map { [("action", .string($0))] } ?? []))
    }
}

/// The doctor's report: every finding, with text and JSON renderings.
public struct DoctorReport: Sendable, Equatable {
    public var findings: [DoctorFinding]

    /// No finding is a problem (warnings allowed).
    public var isHealthy: Bool { !findings.contains { $0.status == .problem } }

    public var text: String {
        var s = ""
        for f in findings {
            let tag: String
            switch f.status {
            case .ok: tag = "ok     "
            case .info: tag = "info   "
            case .warning: tag = "warning"
            case .problem: tag = "PROBLEM"
            }
            s += "\(tag)  \(f.check): \(f.detail)\n"
            if let a = f.action { s += "         do: \(a)\n" }
        }
        s += isHealthy ? "doctor: ready for raw ATT\n" : "doctor: not ready for raw ATT (see PROBLEM lines)\n"
        return s
    }

    public init(findings: [DoctorFinding]) { self.findings = findings }

    /// The report as one line of JSON, keys sorted: every finding, and whether it is healthy.
    public var json: String { jsonValue.compact }

    public var jsonValue: JSONValue {
        .sortedObject([("findings", .array(findings.map(\.jsonValue))), ("healthy", .bool(isHealthy))])
    }
}

/// Examines kernel Bluetooth support, rfkill, the adapters, this process's and binary's capabilities, and
/// bluetoothd; each piece is a function of what it observed so that tests can feed it.
public enum BluetoothDoctor {
    /// Runs every check on this machine.
    public static func run() -> DoctorReport {
        var findings: [DoctorFinding] = []
        let probe = cbz_l2cap_socket()
        let probeErrno: Int32 = probe < 0 ? cbz_errno() : 0
        if probe >= 0 { _ = cbz_close(probe) }
        findings.append(kernelFinding(socketErrno: probeErrno, moduleLoaded: FileManager.default.fileExists(atPath: "/sys/module/bluetooth")))
        findings += rfkillFindings(readRFKill())
        if probeErrno != EAFNOSUPPORT {
            let adapters: Result<[HCIAdapter], TransportError> = Result { () throws(TransportError) in try HCIAdapter.list() }
            findings += adapterFindings(adapters)
        }
        findings.append(capabilityFinding(Capabilities.checkRawHCI(), kernelHasBluetooth: probeErrno != EAFNOSUPPORT))
        findings.append(daemonFinding(pid: BluetoothDaemon.runningPID()))
        findings.append(unixTargetsFinding)
        return DoctorReport(findings: findings)
    }

    /// Said on every machine: a unix: target is an AF_UNIX socket, so what the findings above lack does not matter to it.
    public static let unixTargetsFinding = DoctorFinding(
        check: "unix targets", status: .info,
        detail: "unix:PATH targets (mirror-sim, hostile-peer) need no Bluetooth, adapter or capability: every command works against them on this machine")

    /// Whether an AF_BLUETOOTH L2CAP socket opens (`socketErrno` 0) or why not.
    public static func kernelFinding(socketErrno: Int32, moduleLoaded: Bool) -> DoctorFinding {
        if socketErrno == 0 {
            return DoctorFinding(check: "kernel", status: .ok, detail: "Bluetooth sockets open (AF_BLUETOOTH, L2CAP): raw ATT over CID 4 is possible")
        }
        if socketErrno == EAFNOSUPPORT {
            let module = moduleLoaded ? "" : " (/sys/module/bluetooth is absent)"
            return DoctorFinding(check: "kernel", status: .problem,
                                 detail: "this kernel has no Bluetooth support: socket(AF_BLUETOOTH) fails with EAFNOSUPPORT\(module)",
                                 action: "load the module (`sudo modprobe bluetooth`), or boot a kernel built with CONFIG_BT (Debian's stock kernel has it)")
        }
        let e = socketError("socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP)", socketErrno, "probing Bluetooth sockets", .l2cap(peer: "any"))
        return DoctorFinding(check: "kernel", status: .problem, detail: e.description,
                             action: e.advice.isEmpty ? nil : e.advice)
    }

    /// One rfkill switch of type bluetooth.
    public struct RFKillSwitch: Sendable, Equatable {
        public var name: String
        public var soft: Bool
        public var hard: Bool
        public init(name: String, soft: Bool, hard: Bool) { self.name = name; self.soft = soft; self.hard = hard }
    }

    static func readRFKill() -> [RFKillSwitch] {
        let base = "/sys/class/rfkill"
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: base) else { return [] }
        func read(_ p: String) -> String {
            ((try? String(contentsOfFile: p, encoding: .utf8)) ?? "").trimmingWhitespace
        }
        return entries.sorted().compactMap { e in
            guard read("\(base)/\(e)/type") == "bluetooth" else { return nil }
            return RFKillSwitch(name: read("\(base)/\(e)/name"), soft: read("\(base)/\(e)/soft") == "1", hard: read("\(base)/\(e)/hard") == "1")
        }
    }

    /// Blocked radios: soft blocks can be lifted, hard ones are a switch.
    public static func rfkillFindings(_ switches: [RFKillSwitch]) -> [DoctorFinding] {
        switches.compactMap { s in
            if s.hard {
                return DoctorFinding(check: "rfkill \(s.name)", status: .problem, detail: "the radio is hard-blocked (a hardware switch or firmware setting)",
                                     action: "turn the Bluetooth/wireless switch on")
            }
            if s.soft {
                return DoctorFinding(check: "rfkill \(s.name)", status: .problem, detail: "the radio is soft-blocked",
                                     action: "`sudo rfkill unblock bluetooth`")
            }
            return nil
        }
    }

    /// The adapters: none, down, no LE, or ready.
    public static func adapterFindings(_ list: Result<[HCIAdapter], TransportError>) -> [DoctorFinding] {
        switch list {
        case .failure(let e):
            return [DoctorFinding(check: "adapters", status: .problem, detail: "cannot list adapters: \(e.description)")]
        case .success(let adapters) where adapters.isEmpty:
            return [DoctorFinding(check: "adapters", status: .problem, detail: "the kernel has Bluetooth but no controller is attached",
                                  action: "plug in an adapter (or check `dmesg` for its driver); in a VM, `btvirt -l2 -L` creates two virtual LE controllers")]
        case .success(let adapters):
            return adapters.map { a in
                let radio = !a.featuresKnown ? "LE support unknown until powered" : a.supportsLE ? (a.supportsBREDR ? "LE+BR/EDR" : "LE") : "no LE"
                let what = "\(a.address), \(radio), ACL \(a.aclMTU)x\(a.aclPackets), \(a.bus)"
                if !a.isUp {
                    return DoctorFinding(check: "adapter \(a.name)", status: .warning, detail: "down (\(what))",
                                         action: "`sudo btmgmt -i \(a.name) power on` (or `sudo hciconfig \(a.name) up`)")
                }
                if !a.supportsLE && a.featuresKnown {
                    return DoctorFinding(check: "adapter \(a.name)", status: .warning, detail: "up but without LE (\(what)): it cannot reach an LE peripheral",
                                         action: "use an adapter with Bluetooth 4.0 LE or later (--adapter)")
                }
                return DoctorFinding(check: "adapter \(a.name)", status: .ok, detail: "up (\(what))")
            }
        }
    }

    /// Capabilities: none are needed for ATT; raw HCI work needs CAP_NET_RAW and CAP_NET_ADMIN. On a kernel without
    /// Bluetooth (`kernelHasBluetooth` false) nothing Bluetooth works whatever the capabilities, and it says so.
    public static func capabilityFinding(_ check: CapabilityCheck, kernelHasBluetooth: Bool = true) -> DoctorFinding {
        let file = check.fileCapabilities.map { "the binary carries \($0.description)" } ?? "the binary carries no file capabilities"
        let allowed = kernelHasBluetooth
            ? "scan, advertise and adapter up work; an ATT connection needs none"
            : "they would allow scan, advertise and adapter up, but this kernel has no Bluetooth (see kernel), so none of them (nor an LE connection) works here"
        if let why = check.droppedBecause, let started = check.startedWith, started.contains(check.required) {
            return DoctorFinding(check: "capabilities", status: .ok,
                                 detail: "this process started with \(started.intersection(check.required).description) (\(file)) and dropped every capability \(why), as every command does once its privileged sockets are open: \(allowed)")
        }
        if check.isSatisfied {
            return DoctorFinding(check: "capabilities", status: .ok,
                                 detail: "this process has \(check.required.description) (\(file)): \(allowed)")
        }
        let lacking = kernelHasBluetooth
            ? "ATT connections work without them; scan, advertise and adapter up need them"
            : "scan, advertise and adapter up need them, and a kernel with Bluetooth (see kernel); only unix: targets work here"
        return DoctorFinding(check: "capabilities", status: .info,
                             detail: "this process lacks \(check.missing.description) (\(file)): \(lacking)",
                             action: "`\(check.setcapCommand)`, or run as root")
    }

    /// bluetoothd and what it means for raw ATT.
    public static func daemonFinding(pid: Int?) -> DoctorFinding {
        guard let pid else {
            return DoctorFinding(check: "bluetoothd", status: .ok, detail: "not running: connections this tool opens are its own")
        }
        return DoctorFinding(check: "bluetoothd", status: .warning,
                             detail: "running (pid \(pid)): it may connect to a known peer first and then owns that link's ATT channel (our connect fails with EBUSY), it sends its own Exchange MTU and GATT requests on links it owns, and its adapter management races raw HCI scan/advertise",
                             action: "for raw ATT stop it: `sudo systemctl stop bluetooth` (or free one peer: `bluetoothctl disconnect ADDRESS`)")
    }
}
