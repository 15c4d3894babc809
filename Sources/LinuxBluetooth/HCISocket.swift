// Raw HCI: LE advertising (to be a connectable peripheral) and LE scanning (to find devices).
// The socket, its filter and the ioctls live in the C shim; commands and events are Swift over raw bytes.

import ATTStack
import LinkCore
import CBlueZSocket
import Glibc

/// One HCI command (Core Spec 5.4 Vol 4 Part E §5.4.1): OGF, OCF, parameters, and its name for errors.
public struct HCICommand: Sendable, Equatable {
    public var ogf: UInt16
    public var ocf: UInt16
    public var name: String
    public var parameters: [UInt8]

    public init(ogf: UInt16, ocf: UInt16, name: String, parameters: [UInt8] = []) {
        self.ogf = ogf
        self.ocf = ocf
        self.name = name
        self.parameters = parameters
    }

    /// The 16-bit opcode: OGF in the top 6 bits, OCF in the low 10.
    public var opcode: UInt16 { ogf << 10 | (ocf & 0x03FF) }

    static let leOGF: UInt16 = 0x08

    /// LE Set Advertising Parameters (§7.8.5): connectable undirected (ADV_IND) on all three channels.
    public static func leSetAdvertisingParameters(intervalMilliseconds: Double = 100) -> HCICommand {
        let units = UInt16(clamping: Int((intervalMilliseconds / 0.625).rounded()))
        let interval = min(max(units, 0x0020), 0x4000)
        var p: [UInt8] = []
        p += [UInt8(interval & 0xFF), UInt8(interval >> 8)]   // min interval
        p += [UInt8(interval & 0xFF), UInt8(interval >> 8)]   // max interval
        p += [0x00]                                           // ADV_IND
        p += [0x00]                                           // own address: public
        p += [0x00] + [UInt8](repeating: 0, count: 6)         // peer address type and address (unused)
        p += [0x07]                                           // channels 37, 38, 39
        p += [0x00]                                           // no filter
        return HCICommand(ogf: leOGF, ocf: 0x0006, name: "LE Set Advertising Parameters", parameters: p)
    }

    /// LE Set Advertising Data (§7.8.7): up to 31 bytes of AD structures, zero-padded.
    public static func leSetAdvertisingData(_ data: [UInt8]) -> HCICommand {
        HCICommand(ogf: leOGF, ocf: 0x0008, name: "LE Set Advertising Data", parameters: significantPart(data))
    }

    /// LE Set Scan Response Data (§7.8.8): up to 31 bytes of AD structures, zero-padded.
    public static func leSetScanResponseData(_ data: [UInt8]) -> HCICommand {
        HCICommand(ogf: leOGF, ocf: 0x0009, name: "LE Set Scan Response Data", parameters: significantPart(data))
    }

    /// Both data commands' parameters: the significant part's length, then 31 octets (the first 31 of `data`,
    /// zero-padded; Vol 3 Part C §11: the non-significant part is zeros).
    static func significantPart(_ data: [UInt8]) -> [UInt8] {
        let d = Array(data.prefix(31))
        return [UInt8(d.count)] + d + [UInt8](repeating: 0, count: 31 - d.count)
    }

    /// LE Set Advertising Enable (§7.8.9).
    public static func leSetAdvertisingEnable(_ on: Bool) -> HCICommand {
        HCICommand(ogf: leOGF, ocf: 0x000A, name: "LE Set Advertising Enable", parameters: [on ? 1 : 0])
    }

    /// LE Set Scan Parameters (§7.8.10): active or passive, 10 ms interval and window.
    public static func leSetScanParameters(active: Bool) -> HCICommand {
        HCICommand(ogf: leOGF, ocf: 0x000B, name: "LE Set Scan Parameters",
                   parameters: [active ? 1 : 0, 0x10, 0x00, 0x10, 0x00, 0x00, 0x00])
    }

    /// LE Set Scan Enable (§7.8.11).
    public static func leSetScanEnable(_ on: Bool, filterDuplicates: Bool = false) -> HCICommand {
        HCICommand(ogf: leOGF, ocf: 0x000C, name: "LE Set Scan Enable", parameters: [on ? 1 : 0, filterDuplicates ? 1 : 0])
    }

    /// AD structures for a connectable peripheral: Flags (LE General Discoverable, BR/EDR not supported)
    /// and the Complete Local Name, cut to fit 31 bytes (Core Spec Supplement Part A §1.2, §1.3).
    public static func advertisingData(name: String?) -> [UInt8] {
        var ad: [UInt8] = [0x02, 0x01, 0x06]
        if let name, !name.isEmpty {
            let bytes = Array(name.utf8.prefix(31 - ad.count - 2))
            ad += [UInt8(bytes.count + 1), bytes.count < name.utf8.count ? 0x08 : 0x09] + bytes
        }
        return ad
    }
}

/// One LE advertising report (Core Spec 5.4 Vol 4 Part E §7.7.65.2).
public struct LEAdvertisingReport: Sendable, Equatable {
    /// 0 ADV_IND, 1 ADV_DIRECT_IND, 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND, 4 SCAN_RSP.
    public var eventType: UInt8
    public var addressType: LEAddressType
    public var address: BluetoothAddress
    public var data: [UInt8]
    /// dBm; 127 means not available.
    public var rssi: Int8

    public init(eventType: UInt8, addressType: LEAddressType, address: BluetoothAddress, data: [UInt8], rssi: Int8 = 127) {
        self.eventType = eventType
        self.addressType = addressType
        self.address = address
        self.data = data
        self.rssi = rssi
    }

    /// The PDU type's name (Vol 6 Part B §2.3).
    public var kind: String {
        switch eventType {
        case 0: "ADV_IND"
        case 1: "ADV_DIRECT_IND"
        case 2: "ADV_SCAN_IND"
        case 3: "ADV_NONCONN_IND"
        case 4: "SCAN_RSP"
        default: "event type \(eventType)"
        }
    }

    /// The advertising data a peripheral serves again (not a scan response).
    public var isAdvertisingData: Bool { eventType != 4 }

    /// The RSSI in dBm, nil for 127, "not available" (Vol 4 Part E §7.7.65.2).
    public var knownRSSI: Int? { rssi == 127 ? nil : Int(rssi) }

    /// Whether a central can connect (ADV_IND or ADV_DIRECT_IND).
    public var isConnectable: Bool { eventType == 0 || eventType == 1 }

    /// The Complete (0x09) or Shortened (0x08) Local Name from the AD structures, if any.
    public var localName: String? {
        var i = 0
        while i < data.count {
            let len = Int(data[i])
            if len == 0 || i + 1 + len > data.count { break }
            let type = data[i + 1]
            if type == 0x09 || type == 0x08 {
                return String(decoding: data[(i + 2)..<(i + 1 + len)], as: UTF8.self)
            }
            i += 1 + len
        }
        return nil
    }
}

/// An HCI event (Core Spec 5.4 Vol 4 Part E §5.4.4, §7.7), from a raw packet.
public enum HCIEvent: Sendable, Equatable {
    /// Command Complete (0x0E): the opcode and its return parameters (status first).
    case commandComplete(opcode: UInt16, returnParameters: [UInt8])
    /// Command Status (0x0F).
    case commandStatus(opcode: UInt16, status: UInt8)
    /// LE Meta (0x3E) subevent 0x02: advertising reports; also subevent 0x0D's legacy PDUs (extended scanning, §7.7.65.13).
    case leAdvertisingReports([LEAdvertisingReport])
    /// Disconnection Complete (0x05, §7.7.5): the handle and the reason (an HCI status code).
    case disconnectionComplete(status: UInt8, handle: UInt16, reason: UInt8)
    /// Encryption Change v1 (0x08, §7.7.8): `enabled` 0 off, 1 on (AES-CCM on LE).
    case encryptionChange(status: UInt8, handle: UInt16, enabled: UInt8)
    /// Number Of Completed Packets (0x13, §7.7.19): packets per handle the controller has sent or flushed.
    case numberOfCompletedPackets([HCICompletedPackets])
    /// LE Connection Complete (subevent 0x01, §7.7.65.1) or LE Enhanced Connection Complete v1/v2 (0x0A, 0x29).
    case leConnectionComplete(LEConnectionComplete)
    /// LE Connection Update Complete (subevent 0x03, §7.7.65.3).
    case leConnectionUpdateComplete(LEConnectionUpdateComplete)
    /// LE Data Length Change (subevent 0x07, §7.7.65.7).
    case leDataLengthChange(LEDataLengthChange)
    /// LE PHY Update Complete (subevent 0x0C, §7.7.65.12): PHY values 1 LE 1M, 2 LE 2M, 3 LE Coded.
    case lePHYUpdateComplete(status: UInt8, handle: UInt16, txPHY: UInt8, rxPHY: UInt8)
    /// Anything else: event code and parameters.
    case other(code: UInt8, parameters: [UInt8])

    /// LE Extended Advertising Report (§7.7.65.13), as a controller with extended scanning gives the kernel's scan:
    /// its legacy PDUs (Event_Type bit 4) as the legacy report's types; an extended PDU's data is left out.
    static func parseExtendedAdvertisingReports(_ p: [UInt8]) -> HCIEvent? {
        guard p.count >= 2 else { return nil }
        // §7.7.65.13's Event_Type of a legacy PDU (bit 4 set) to the legacy report's Event_Type (§7.7.65.2).
        let legacy: [UInt16: UInt8] = [0x13: 0, 0x15: 1, 0x12: 2, 0x10: 3, 0x1B: 4, 0x1A: 4]
        var reports: [LEAdvertisingReport] = []
        var i = 2
        for _ in 0..<Int(p[1]) {
            guard i + 24 <= p.count else { return nil }
            let type = p.littleEndianUInt16(at: i), addrType = p[i + 2]
            let address = BluetoothAddress(uncheckedBytes: p[(i + 3)..<(i + 9)].reversed())
            let rssi = Int8(bitPattern: p[i + 13])
            let len = Int(p[i + 23])
            guard i + 24 + len <= p.count else { return nil }
            if let eventType = legacy[type] {
                reports.append(LEAdvertisingReport(eventType: eventType, addressType: addrType & 0x01 == 0 ? .public : .random,
                                                   address: address, data: Array(p[(i + 24)..<(i + 24 + len)]), rssi: rssi))
            }
            i += 24 + len
        }
        return .leAdvertisingReports(reports)
    }

    /// Parses an HCI event packet: 0x04, event code, parameter length, parameters. Nil if malformed.
    public static func parse(_ packet: [UInt8]) -> HCIEvent? {
        guard packet.count >= 3, packet[0] == 0x04 else { return nil }
        let code = packet[1]
        let plen = Int(packet[2])
        guard packet.count >= 3 + plen else { return nil }
        let p = Array(packet[3..<(3 + plen)])
        switch code {
        case 0x0E:
            guard p.count >= 3 else { return nil }
            return .commandComplete(opcode: p.littleEndianUInt16(at: 1), returnParameters: Array(p[3...]))
        case 0x0F:
            guard p.count >= 4 else { return nil }
            return .commandStatus(opcode: p.littleEndianUInt16(at: 2), status: p[0])
        case 0x05, 0x08, 0x13:
            return parseLinkEvent(code: code, p)
        case 0x3E where p.first.map { [0x01, 0x03, 0x07, 0x0A, 0x0C, 0x29].contains($0) } == true:
            return parseLEMetaLinkEvent(p)
        case 0x3E where p.first == 0x02:
            // Reports are laid out one after another, as BlueZ and the kernel read them.
            guard p.count >= 2 else { return nil }
            var reports: [LEAdvertisingReport] = []
            var i = 2
            for _ in 0..<Int(p[1]) {
                guard i + 9 <= p.count else { return nil }
                let eventType = p[i], addrType = p[i + 1]
                let address = BluetoothAddress(uncheckedBytes: p[(i + 2)..<(i + 8)].reversed())
                let len = Int(p[i + 8])
                guard i + 9 + len + 1 <= p.count else { return nil }
                let data = Array(p[(i + 9)..<(i + 9 + len)])
                let rssi = Int8(bitPattern: p[i + 9 + len])
                reports.append(LEAdvertisingReport(eventType: eventType, addressType: addrType & 0x01 == 0 ? .public : .random,
                                                   address: address, data: data, rssi: rssi))
                i += 10 + len
            }
            return .leAdvertisingReports(reports)
        case 0x3E where p.first == 0x0D:
            return parseExtendedAdvertisingReports(p)
        default:
            return .other(code: code, parameters: p)
        }
    }
}

/// A raw HCI socket on one controller (HCI_CHANNEL_RAW, every event passed by its filter): sends HCI
/// commands and reads HCI events. Binding needs no capability, but without CAP_NET_RAW the kernel keeps only its
/// security filter's events and refuses LE commands with EPERM (net/bluetooth/hci_sock.c hci_sock_bind,
/// hci_sock_setsockopt_old, hci_sock_sendmsg). One owner of one fd; `send` from any thread, one reader.
public final class HCISocket: Sendable {
    public let adapter: HCIAdapter
    let fd: Int32

    /// Opens a raw HCI socket on `adapter` ("hci0", "0" or its address).
    public init(adapter selector: String) throws(TransportError) {
        let a = try HCIAdapter.resolve(selector)
        // On the capability keeper while it lives (Privilege): the bind is where the kernel trusts the socket.
        let opened = Privilege.perform { () -> Result<Int32, TransportError> in
            let fd = cbz_hci_open_raw(Int32(a.index))
            if fd < 0 {
                return .failure(.socket(lastSocketError("socket/bind(BTPROTO_HCI, HCI_CHANNEL_RAW)", "opening a raw HCI socket on \(a.name)", .hci(adapter: a.name))))
            }
            return .success(fd)
        }
        self.adapter = a
        self.fd = try opened.get()
    }

    /// Takes ownership of `fd` as the raw HCI socket of `adapter`: any datagram socket that carries HCI packets
    /// (the tests drive commands and events over an AF_UNIX socketpair, as no controller is needed for that).
    init(adopting fd: Int32, adapter: HCIAdapter) {
        self.adapter = adapter
        self.fd = fd
    }

    deinit { _ = cbz_close(fd) }

    /// Sends one command packet.
    /// Sends one command packet, on the capability keeper while it lives: the kernel checks CAP_NET_RAW for an
    /// LE command at each send (hci_sock_sendmsg), so the thread that sends must hold it.
    public func send(_ command: HCICommand) throws(TransportError) {
        try Privilege.perform { [fd, adapter] () -> Result<Void, TransportError> in
            let r = command.parameters.withUnsafeBufferPointer {
                cbz_hci_send_command(fd, command.ogf, command.ocf, $0.baseAddress, UInt8(clamping: $0.count))
            }
            if r < 0 { return .failure(.socket(lastSocketError("write", "sending \(command.name) to \(adapter.name)", .hci(adapter: adapter.name)))) }
            return .success(())
        }.get()
    }

    /// Sets the socket's event filter (HCI_FILTER) on the capability keeper while it lives: without CAP_NET_RAW at
    /// this call the kernel cuts the filter down to its security filter (hci_sock_setsockopt_old).
    public func setEventFilter(_ events: [UInt8]) throws(TransportError) {
        try Privilege.perform { [fd, adapter] () -> Result<Void, TransportError> in
            if cbz_hci_set_event_filter(fd, events, Int32(events.count)) < 0 {
                return .failure(.socket(lastSocketError("setsockopt(HCI_FILTER)", "filtering the link events on \(adapter.name)", .hci(adapter: adapter.name))))
            }
            return .success(())
        }.get()
    }

    /// The next event within `timeout` seconds, or nil when none came.
    public func nextEvent(timeout: Double) throws(TransportError) -> HCIEvent? {
        try nextDatagram(fd, timeout: timeout, capacity: 260, what: "an HCI event from \(adapter.name)", adapter: adapter.name,
                         parse: HCIEvent.parse)
    }

    /// Sends `command` and waits for its Command Complete (or Command Status); a non-zero status is an error.
    /// Returns the return parameters after the status byte.
    @discardableResult
    public func run(_ command: HCICommand, timeout: Double = 2) throws(TransportError) -> [UInt8] {
        try send(command)
        let answer = try firstAnswer(within: timeout, next: nextEvent) { (event) throws(TransportError) -> [UInt8]? in
            switch event {
            case .commandComplete(let opcode, let ret) where opcode == command.opcode:
                guard let status = ret.first else { return [] }
                if status != 0 {
                    throw .hciCommandFailed(command: command.name, adapter: adapter.name, status: status, detail: hciStatusMeaning(status))
                }
                return Array(ret.dropFirst())
            case .commandStatus(let opcode, let status) where opcode == command.opcode:
                if status != 0 {
                    throw .hciCommandFailed(command: command.name, adapter: adapter.name, status: status, detail: hciStatusMeaning(status))
                }
                return []
            default:
                return nil
            }
        }
        if let answer { return answer }
        throw .hciCommandFailed(command: command.name, adapter: adapter.name, status: nil,
                                detail: "no answer (Command Complete or Command Status) within \(bearerSeconds(timeout)) s: the controller is not responding; check it with `btmgmt -i \(adapter.name) info` and reset it with `sudo hciconfig \(adapter.name) reset`")
    }
}

/// Makes an adapter a connectable LE peripheral (legacy advertising, ADV_IND) through raw HCI.
public enum LEAdvertiser {
    /// Starts advertising `name` on `adapter`; a central can then connect and open ATT on CID 4.
    public static func start(adapter: String, name: String?, intervalMilliseconds: Double = 100) throws(TransportError) {
        try start(adapter: adapter, data: HCICommand.advertisingData(name: name), intervalMilliseconds: intervalMilliseconds)
    }

    /// Starts advertising these AD structures (a device's recorded ones, `mirror-sim --from`), and the scan response
    /// data when given (Vol 4 Part E §7.8.7, §7.8.8: each at most 31 bytes).
    public static func start(adapter: String, data: [UInt8], scanResponse: [UInt8]? = nil,
                             intervalMilliseconds: Double = 100) throws(TransportError) {
        let hci = try HCISocket(adapter: adapter)
        // Stop first: parameters cannot change while advertising (Command Disallowed is fine here).
        _ = try? hci.run(.leSetAdvertisingEnable(false))
        try hci.run(.leSetAdvertisingParameters(intervalMilliseconds: intervalMilliseconds))
        try hci.run(.leSetAdvertisingData(data))
        if let scanResponse { try hci.run(.leSetScanResponseData(scanResponse)) }
        try hci.run(.leSetAdvertisingEnable(true))
    }

    /// Stops advertising on `adapter`.
    public static func stop(adapter: String) throws(TransportError) {
        let hci = try HCISocket(adapter: adapter)
        try hci.run(.leSetAdvertisingEnable(false))
    }
}

/// Finds advertising LE devices through the kernel's management interface (Start Discovery, Device Found), so that
/// the kernel's own discovery state stays true (Management.swift says why not raw LE Set Scan Enable).
public enum LEScanner {
    /// A running scan's stop switch: `stop()`, from any thread (a signal's handler), sends Stop Discovery and ends
    /// the scan with what it has seen.
    public final class Stopper: Sendable {
        // Guards the scan's management socket and adapter index (nil until the scan opened it) and whether
        // `stop` was called.
        private let state = Lock<(socket: ManagementSocket?, index: Int, stopped: Bool)>((nil, 0, false))

        public init() {}

        public var isStopped: Bool { state.current.stopped }

        /// Ends the scan: Stop Discovery on its socket (the scan itself waits for the kernel's answer).
        public func stop() {
            let (socket, index) = state.withLock { s -> (ManagementSocket?, Int) in
                s.stopped = true
                return (s.socket, s.index)
            }
            try? socket?.send(.stopDiscovery(index: index))
        }

        /// Whether the scan may start (false once stopped).
        func attach(_ socket: ManagementSocket, index: Int) -> Bool {
            state.withLock { s in
                s.socket = socket
                s.index = index
                return !s.stopped
            }
        }
    }

    /// Scans for `seconds` and returns one report per address (the last seen, keeping a name an earlier one
    /// carried), in the order first seen. `opened` runs once the management socket is bound (the capabilities
    /// are needed no longer). The kernel ends an LE discovery by itself after about 10 s: a longer scan starts
    /// it again.
    public static func scan(adapter selector: String, seconds: Double, stopper: Stopper = Stopper(),
                            opened: () -> Void = {}) throws(TransportError) -> [LEAdvertisingReport] {
        let adapter = try HCIAdapter.resolve(selector)
        let mgmt = try ManagementSocket(adapter: adapter.name)
        opened()
        var order: [BluetoothAddress] = []
        var seen: [BluetoothAddress: LEAdvertisingReport] = [:]
        func take(_ event: ManagementEvent) {
            guard case .deviceFound(let index, let r) = event, index == adapter.index else { return }
            if let old = seen[r.address] {
                var new = r
                if new.localName == nil, let name = old.localName { new.data += HCICommand.advertisingData(name: name).dropFirst(3) }
                seen[r.address] = new
            } else {
                order.append(r.address)
                seen[r.address] = r
            }
        }
        guard stopper.attach(mgmt, index: adapter.index) else { return [] }
        try mgmt.run(.startDiscovery(index: adapter.index), other: take)
        // Rejected (0x0B) when the discovery already ended: nothing to stop.
        defer { _ = try? mgmt.run(.stopDiscovery(index: adapter.index), other: take) }
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline, !stopper.isStopped {
            let left = ContinuousClock.now.duration(to: deadline)
            let s = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            guard let event = try mgmt.nextEvent(timeout: s) else { break }
            switch event {
            case .discovering(let index, false) where index == adapter.index:
                if stopper.isStopped { return order.compactMap { seen[$0] } }
                try mgmt.run(.startDiscovery(index: adapter.index), other: take)
            default:
                take(event)
            }
        }
        return order.compactMap { seen[$0] }
    }
}

/// The next datagram on a raw Bluetooth socket (HCI or management) within `timeout` seconds that `parse` takes, or
/// nil when none came: poll, then recv, for `HCISocket` and `ManagementSocket` alike.
func nextDatagram<T>(_ fd: Int32, timeout: Double, capacity: Int, what: String, adapter: String,
                     parse: ([UInt8]) -> T?) throws(TransportError) -> T? {
    let deadline = ContinuousClock.now + .milliseconds(Int((timeout * 1000).rounded()))
    var buffer = [UInt8](repeating: 0, count: capacity)
    while true {
        let remaining = ContinuousClock.now.duration(to: deadline)
        let ms = max(0, Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000))
        // A pairing's or a command's answer may be awaited on the link's loop: signals are taken meanwhile.
        let n = BlockingWait.poll(fd: fd, events: Int16(CBZ_POLLIN), timeoutMilliseconds: ms)
        if n < 0 {
            throw .socket(lastSocketError("poll", "waiting for \(what)", .hci(adapter: adapter)))
        }
        if n == 0 { return nil }
        var truncated: Int32 = 0
        let got = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
        if got < 0 {
            if cbz_errno() == EAGAIN { continue }
            throw .socket(lastSocketError("recv", "reading \(what)", .hci(adapter: adapter)))
        }
        if let item = parse(Array(buffer.prefix(got))) { return item }
    }
}

/// Reads datagrams from `fd`, each to `body`, until `wake` (an eventfd) is signalled or the socket ends: the one
/// reader loop of the threads that serve a raw Bluetooth socket (the link monitor's, the pairing agent's). Returns the
/// syscall that failed ("poll", "recv") with errno still set, or nil for a wake-up or an end.
func readDatagrams(_ fd: Int32, wake: Int32, capacity: Int, _ body: ([UInt8]) -> Void) -> String? {
    readDatagrams(fd, wake: wake, capacity: capacity, receive: { fd, buffer in
        var truncated: Int32 = 0
        return (cbz_recv_datagram(fd, buffer.baseAddress, buffer.count, &truncated), false)
    }, { packet, _ in body(packet) })
}

/// readDatagrams for a socket with HCI_DATA_DIR on (cbz_hci_open_acl_watch): each datagram with whether it came
/// from the controller.
func readDirectedDatagrams(_ fd: Int32, wake: Int32, capacity: Int, _ body: ([UInt8], _ incoming: Bool) -> Void) -> String? {
    readDatagrams(fd, wake: wake, capacity: capacity, receive: { fd, buffer in
        var incoming: Int32 = 1
        let got = cbz_hci_recv_directed(fd, buffer.baseAddress, buffer.count, &incoming)
        return (got, incoming != 0)
    }, body)
}

/// The one reader loop of readDatagrams and readDirectedDatagrams: `receive` takes one datagram into the buffer.
private func readDatagrams(_ fd: Int32, wake: Int32, capacity: Int,
                           receive: (Int32, UnsafeMutableRawBufferPointer) -> (Int, Bool),
                           _ body: ([UInt8], Bool) -> Void) -> String? {
    var buffer = [UInt8](repeating: 0, count: capacity)
    while true {
        var r1: Int16 = 0, r2: Int16 = 0
        // No limit: the owner's close or stop signals `wake`, and a socket's end wakes the poll too.
        let n = cbz_poll_two(fd, Int16(CBZ_POLLIN), wake, Int16(CBZ_POLLIN), -1, &r1, &r2)
        if n < 0 {
            if cbz_errno() == EINTR { continue }
            return "poll"
        }
        if r2 != 0 { return nil }
        let (got, incoming) = buffer.withUnsafeMutableBytes { receive(fd, $0) }
        if got < 0 {
            if cbz_errno() == EAGAIN || cbz_errno() == EINTR { continue }
            return "recv"
        }
        if got == 0 { return nil } // the socket ended (an adapter removed; a test's controller closed its end)
        body(Array(buffer.prefix(min(got, buffer.count))), incoming)
    }
}

/// The first of the events `next` gives within `timeout` seconds that `answer` takes (a non-nil result), or nil when
/// the time is up: the wait for a command's answer on the raw HCI and the management sockets alike.
func firstAnswer<Event, T>(within timeout: Double, next: (Double) throws(TransportError) -> Event?,
                           answer: (Event) throws(TransportError) -> T?) throws(TransportError) -> T? {
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while ContinuousClock.now < deadline {
        let left = ContinuousClock.now.duration(to: deadline)
        let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
        guard let event = try next(seconds) else { return nil }
        if let result = try answer(event) { return result }
    }
    return nil
}
