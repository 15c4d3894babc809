// Linux capabilities: what the process and its binary hold, what raw HCI work needs, and dropping them all.

import CBlueZSocket
import LinkCore
import FoundationEssentials

/// A set of Linux capabilities (capabilities(7)) as a bit mask: bit n is capability n.
public struct CapabilitySet: Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public static let netAdmin = CapabilitySet(rawValue: 1 << UInt64(CBZ_CAP_NET_ADMIN))
    public static let netRaw = CapabilitySet(rawValue: 1 << UInt64(CBZ_CAP_NET_RAW))
    /// What raw HCI work needs: scan, advertise, adapter up/down.
    public static let rawHCI = CapabilitySet(rawValue: netAdmin.rawValue | netRaw.rawValue)

    public var isEmpty: Bool { rawValue == 0 }
    public func contains(_ other: CapabilitySet) -> Bool { rawValue & other.rawValue == other.rawValue }
    public func subtracting(_ other: CapabilitySet) -> CapabilitySet { CapabilitySet(rawValue: rawValue & ~other.rawValue) }
    public func intersection(_ other: CapabilitySet) -> CapabilitySet { CapabilitySet(rawValue: rawValue & other.rawValue) }

    /// The capability numbers in the set.
    public var numbers: [Int] { (0..<64).filter { rawValue & (1 << UInt64($0)) != 0 } }

    /// libcap's names: ["cap_net_admin", "cap_net_raw"].
    public var names: [String] {
        numbers.map { n in
            var buf = [CChar](repeating: 0, count: 64)
            if cbz_cap_name(Int32(n), &buf, buf.count) == 0 {
                return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            return "cap_\(n)"
        }
    }

    /// "cap_net_admin,cap_net_raw", or "none".
    public var description: String { isEmpty ? "none" : names.joined(separator: ",") }
}

/// The three capability sets of a process or a file.
public struct CapabilityState: Sendable, Equatable {
    public var effective: CapabilitySet
    public var permitted: CapabilitySet
    public var inheritable: CapabilitySet
}

/// Reads and drops capabilities (libcap); says what raw HCI work is missing and the `setcap` line that grants it.
/// An L2CAP CID 4 socket needs no capability at all.
public enum Capabilities {
    /// The running process's sets.
    public static func process() throws(TransportError) -> CapabilityState {
        var e: UInt64 = 0, p: UInt64 = 0, i: UInt64 = 0
        if cbz_cap_process(&e, &p, &i) < 0 {
            throw .socket(lastSocketError("capget", "reading this process's capabilities", .local))
        }
        return CapabilityState(effective: .init(rawValue: e), permitted: .init(rawValue: p), inheritable: .init(rawValue: i))
    }

    /// A file's capabilities (security.capability), or nil when it carries none.
    public static func file(_ path: String) throws(TransportError) -> CapabilityState? {
        var e: UInt64 = 0, p: UInt64 = 0, i: UInt64 = 0
        var present: Int32 = 0
        if cbz_cap_file(path, &e, &p, &i, &present) < 0 {
            throw .socket(lastSocketError("getxattr(security.capability)", "reading the file capabilities of \(path)", .local))
        }
        if present == 0 { return nil }
        return CapabilityState(effective: .init(rawValue: e), permitted: .init(rawValue: p), inheritable: .init(rawValue: i))
    }

    /// The running binary (/proc/self/exe resolved), for the `setcap` line.
    public static func executablePath() -> String {
        var buf = [CChar](repeating: 0, count: 4097)
        let n = cbz_self_exe(&buf, buf.count)
        if n <= 0 { return "/proc/self/exe" }
        return String(decoding: buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether this process can do raw HCI work now: what is missing and the command that grants it.
    public static func checkRawHCI() -> CapabilityCheck {
        let path = executablePath()
        let fileCaps = try? file(path)
        // While the keeper lives, the process can still do what it started with (Privilege.perform); after the
        // drop, nothing, and the check says when they were dropped rather than asking for a setcap that is there.
        let kept = Privilege.isKept ? Privilege.startedWith?.effective : nil
        let have = kept ?? (try? process())?.effective ?? CapabilitySet(rawValue: 0)
        var check = CapabilityCheck(required: .rawHCI, effective: have, fileCapabilities: fileCaps?.permitted,
                                    executable: path)
        if let started = Privilege.startedWith?.effective, !started.intersection(.rawHCI).isEmpty, kept == nil {
            check.droppedBecause = Privilege.droppedBecause
            check.startedWith = started
        }
        return check
    }

    /// Keeps only `set` of what the calling thread holds (the keeper as root keeps CAP_NET_RAW and CAP_NET_ADMIN,
    /// not all of root's); the other threads are not touched (capabilities are per thread).
    public static func keepOnly(_ set: CapabilitySet) throws(TransportError) {
        if cbz_cap_keep_only(set.rawValue) < 0 {
            throw .socket(lastSocketError("capset", "keeping only \(set) on the capability keeper", .local))
        }
    }

    /// Drops every capability (ambient, bounding where allowed, effective, permitted, inheritable).
    /// Call it once the privileged sockets (raw HCI) are open: they keep working, nothing new can be opened.
    public static func dropAll() throws(TransportError) {
        if cbz_cap_drop_all() < 0 {
            throw .socket(lastSocketError("capset", "dropping this process's capabilities", .local))
        }
    }
}

/// The result of checking for the capabilities raw HCI work needs.
public struct CapabilityCheck: Sendable, Equatable {
    public var required: CapabilitySet
    public var effective: CapabilitySet
    /// The binary's permitted file capabilities, nil when it has none.
    public var fileCapabilities: CapabilitySet?
    public var executable: String
    /// When this process started with some of `required` and dropped them (Privilege): when ("at start", "after the
    /// connect") and what it started with.
    public var droppedBecause: String?
    public var startedWith: CapabilitySet?

    /// What `required` has that the process does not.
    public var missing: CapabilitySet { required.subtracting(effective) }
    public var isSatisfied: Bool { missing.isEmpty }
    /// `sudo setcap cap_net_raw,cap_net_admin+ep /path/to/binary`.
    public var setcapCommand: String { "sudo setcap cap_net_raw,cap_net_admin+ep \(executable)" }

    /// One sentence: fine, or what is missing and what to run.
    public var summary: String {
        if isSatisfied { return "this process has \(required.description): raw HCI work (scan, advertise, adapter up) is allowed" }
        if let why = droppedBecause, let started = startedWith {
            return "this process started with \(started.intersection(required).description) and dropped every capability \(why) (least privilege: mirror keeps them only until its privileged sockets are open); the binary carries \(fileCapabilities?.description ?? "none")"
        }
        return "this process lacks \(missing.description) (needed only for raw HCI work: scan, advertise, adapter up; an ATT connection needs none): run `\(setcapCommand)`, or run as root"
    }
}

/// bluetoothd, BlueZ's daemon, as seen from /proc.
public enum BluetoothDaemon {
    /// The pid of a running bluetoothd (from /proc/*/comm), or nil.
    public static func runningPID() -> Int? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        for entry in entries {
            guard let pid = Int(entry) else { continue }
            guard let comm = try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8) else { continue }
            if comm.trimmingWhitespace == "bluetoothd" { return pid }
        }
        return nil
    }
}
