// The kernel's Bluetooth Management interface (HCI_CHANNEL_CONTROL; the protocol is BlueZ's doc/mgmt-api.txt, the
// kernel side net/bluetooth/mgmt.c). `mirror discover` scans through it, not through raw LE Set Scan Enable: the
// kernel takes a raw active scan's Command Complete as its own discovery (hci_event.c le_set_scan_enable_complete
// sets DISCOVERY_FINDING) and never clears it, after which it starts no passive scan for a connect, so every later
// `mirror gatt ADDR` on that adapter waited 30 s for a connection the kernel never tried.

import ATTStack
import LinkCore
import CBlueZSocket
import Glibc

/// A management command (mgmt-api.txt): its opcode, the controller index it targets, and its name for errors.
public struct ManagementCommand: Sendable, Equatable {
    public var opcode: UInt16
    public var index: UInt16
    public var name: String
    public var parameters: [UInt8]

    /// Address types for Start/Stop Discovery: bit 1 LE public, bit 2 LE random (BR/EDR, bit 0, is not asked).
    public static let leDiscoveryTypes: UInt8 = 0x06

    /// Start Discovery (0x0023): the kernel runs an active LE scan and reports Device Found events; for an LE-only
    /// discovery it stops by itself after about 10 s (DISCOV_LE_TIMEOUT) with a Discovering event.
    public static func startDiscovery(index: Int) -> ManagementCommand {
        ManagementCommand(opcode: 0x0023, index: UInt16(index), name: "Start Discovery", parameters: [leDiscoveryTypes])
    }

    /// Stop Discovery (0x0024).
    public static func stopDiscovery(index: Int) -> ManagementCommand {
        ManagementCommand(opcode: 0x0024, index: UInt16(index), name: "Stop Discovery", parameters: [leDiscoveryTypes])
    }

    /// The packet: opcode, index and parameter length, little-endian, then the parameters.
    var packet: [UInt8] {
        let n = UInt16(parameters.count)
        return [UInt8(opcode & 0xFF), UInt8(opcode >> 8), UInt8(index & 0xFF), UInt8(index >> 8),
                UInt8(n & 0xFF), UInt8(n >> 8)] + parameters
    }
}

/// What a refused management status usually means for discovery, and what to do.
func managementStatusAdvice(_ status: UInt8, adapter: String) -> String {
    switch status {
    case 0x0A: return "another discovery runs on \(adapter) (bluetoothd's, from `bluetoothctl scan on`, or another program's): stop it, or wait about 10 s for it to end"
    case 0x0F: return "\(adapter) is not powered: `sudo btmgmt -i \(adapter) power on`"
    case 0x0C, 0x0B: return "the kernel does not have LE enabled on \(adapter): `sudo btmgmt -i \(adapter) le on`"
    case 0x14: return "the management socket is not trusted: the process held no CAP_NET_ADMIN when it opened it (setcap cap_net_raw,cap_net_admin+ep on the binary, or run as root)"
    default: return "see `btmon` for what the controller answered"
    }
}

/// One management event (mgmt-api.txt "Events") this tool reads.
public enum ManagementEvent: Sendable, Equatable {
    /// Command Complete (0x0001) and Command Status (0x0002): the command's opcode, the status and return parameters.
    case commandComplete(opcode: UInt16, index: UInt16, status: UInt8, returnParameters: [UInt8])
    /// Device Found (0x0012): the advertiser, its RSSI, whether it is connectable, and its advertising and scan
    /// response data merged (EIR) as one LE advertising report.
    case deviceFound(index: UInt16, report: LEAdvertisingReport)
    /// Discovering (0x0013): discovery on `index` started or stopped.
    case discovering(index: UInt16, on: Bool)
    /// A pairing event (ManagementPairing.swift): a connection, a request to answer, a failure.
    case pairing(index: UInt16, PairingEvent)
    /// New Long Term Key (0x000A): whether to store it, and the key (ManagementKeys.swift).
    case newLongTermKey(index: UInt16, storeHint: Bool, key: LongTermKey)
    /// New Identity Resolving Key (0x0018): the resolvable private address it resolved (00:… when none), the key.
    case newIdentityResolvingKey(index: UInt16, storeHint: Bool, randomAddress: BluetoothAddress, key: IdentityResolvingKey)
    /// New Signature Resolving Key (0x0019).
    case newSignatureResolvingKey(index: UInt16, storeHint: Bool, key: SignatureResolvingKey)
    case other(code: UInt16, index: UInt16)

    /// Parses one management packet; nil when shorter than its header says.
    public static func parse(_ p: [UInt8]) -> ManagementEvent? {
        guard p.count >= 6 else { return nil }
        let code = p.littleEndianUInt16(at: 0), index = p.littleEndianUInt16(at: 2)
        let length = Int(p.littleEndianUInt16(at: 4))
        guard p.count >= 6 + length else { return nil }
        let d = Array(p[6..<(6 + length)])
        switch code {
        case 0x0001 where d.count >= 3, 0x0002 where d.count >= 3:
            return .commandComplete(opcode: d.littleEndianUInt16(at: 0), index: index, status: d[2],
                                    returnParameters: Array(d.dropFirst(3)))
        case 0x0012 where d.count >= 14:
            // Address (6, little-endian), address type, RSSI, flags (bit 2: not connectable), EIR length, EIR.
            guard let type = LEAddressType(rawValue: d[6]) else { return .other(code: code, index: index) }
            let flags = d.littleEndianUInt32(at: 8)
            let eirLength = Int(d.littleEndianUInt16(at: 12))
            let eir = Array(d.dropFirst(14).prefix(eirLength))
            let report = LEAdvertisingReport(eventType: flags & 0x04 != 0 ? 3 : 0, addressType: type,
                                             address: BluetoothAddress(uncheckedBytes: d[0..<6].reversed()),
                                             data: eir, rssi: Int8(bitPattern: d[7]))
            return .deviceFound(index: index, report: report)
        case 0x0013 where d.count >= 2:
            return .discovering(index: index, on: d[1] != 0)
        case 0x000A, 0x0018, 0x0019: return parseKeyEvent(code: code, index: index, d) ?? .other(code: code, index: index)
        default:
            if let event = PairingEvent.parse(code: code, d) { return .pairing(index: index, event) }
            return .other(code: code, index: index)
        }
    }
}

/// A socket on the management channel: the one owner of its descriptor.
public final class ManagementSocket: Sendable {
    let fd: Int32
    /// Only for messages: the adapter the caller works on.
    let adapter: String

    /// Opens and binds the socket on the capability keeper while it lives (Privilege): the kernel trusts a
    /// management socket, and so lets it start discovery, only when its binder held CAP_NET_ADMIN.
    public init(adapter: String) throws(TransportError) {
        self.adapter = adapter
        fd = try Privilege.perform { () -> Result<Int32, TransportError> in
            let fd = cbz_mgmt_open()
            if fd < 0 {
                return .failure(.socket(lastSocketError("socket/bind(BTPROTO_HCI, HCI_CHANNEL_CONTROL)", "opening the Bluetooth management socket", .hci(adapter: adapter))))
            }
            return .success(fd)
        }.get()
    }

    /// Takes ownership of `fd` (tests drive the protocol over an AF_UNIX socketpair).
    init(adopting fd: Int32, adapter: String) {
        self.fd = fd
        self.adapter = adapter
    }

    deinit { _ = cbz_close(fd) }

    /// Sends `command` (any thread may: a trusted socket's commands need no capability at the send).
    public func send(_ command: ManagementCommand) throws(TransportError) {
        let packet = command.packet
        let r = packet.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }
        if r < 0 {
            throw .socket(lastSocketError("send", "sending \(command.name) to the Bluetooth management socket", .hci(adapter: adapter)))
        }
    }

    /// The next event within `timeout` seconds, or nil when none came.
    public func nextEvent(timeout: Double) throws(TransportError) -> ManagementEvent? {
        try nextDatagram(fd, timeout: timeout, capacity: 1024, what: "a Bluetooth management event", adapter: adapter,
                         parse: ManagementEvent.parse)
    }

    /// Sends `command` and waits up to `timeout` seconds for its Command Complete or Status; a refusal is an error.
    /// Events other than the answer go to `other` (a Device Found may come first).
    @discardableResult
    public func run(_ command: ManagementCommand, timeout: Double = 2,
                    other: (ManagementEvent) -> Void = { _ in }) throws(TransportError) -> [UInt8] {
        try send(command)
        let adapter = adapter
        let answer = try firstAnswer(within: timeout, next: nextEvent) { (event) throws(TransportError) -> [UInt8]? in
            if case .commandComplete(let opcode, let index, let status, let ret) = event, opcode == command.opcode, index == command.index {
                if status != 0 {
                    throw .managementCommandFailed(command: command.name, adapter: adapter, status: status,
                                                   detail: managementStatusAdvice(status, adapter: adapter))
                }
                return ret
            }
            other(event)
            return nil
        }
        if let answer { return answer }
        throw .managementCommandFailed(command: command.name, adapter: adapter, status: nil,
                                       detail: "no Command Complete or Command Status from the kernel within \(bearerSeconds(timeout)) s")
    }
}
