// The Security Manager Protocol's codes and Pairing Failed reasons (Core Spec 5.4 Vol 3 Part H §3.3, §3.5.5), and a
// watch on the adapter's ACL data that catches a Pairing Failed PDU: the kernel reports every SMP failure to user
// space as management status 0x05 Authentication Failed (smp.c smp_failure), so the reason is read from the PDU.

import ATTStack
import CBlueZSocket
import Glibc
import LinkCore

/// SMP's fixed channel, its command codes (Table 3.4) and its Pairing Failed reasons (Table 3.7).
public enum SMP {
    /// The LE Security Manager's L2CAP channel (Vol 3 Part A §2.1).
    public static let channel: UInt16 = 0x0006
    /// Pairing Failed's command code.
    public static let pairingFailedCode: UInt8 = 0x05

    /// The command's name (Vol 3 Part H Table 3.4); nil for a reserved code.
    public static func commandName(_ code: UInt8) -> String? {
        switch code {
        case 0x01: "Pairing Request"
        case 0x02: "Pairing Response"
        case 0x03: "Pairing Confirm"
        case 0x04: "Pairing Random"
        case 0x05: "Pairing Failed"
        case 0x06: "Encryption Information"
        case 0x07: "Central Identification"
        case 0x08: "Identity Information"
        case 0x09: "Identity Address Information"
        case 0x0A: "Signing Information"
        case 0x0B: "Security Request"
        case 0x0C: "Pairing Public Key"
        case 0x0D: "Pairing DHKey Check"
        case 0x0E: "Pairing Keypress Notification"
        default: nil
        }
    }

    /// The Pairing Failed reason's name (Vol 3 Part H §3.5.5, Table 3.7); nil for a reserved value.
    public static func reasonName(_ reason: UInt8) -> String? {
        switch reason {
        case 0x01: "Passkey Entry Failed"
        case 0x02: "OOB Not Available"
        case 0x03: "Authentication Requirements"
        case 0x04: "Confirm Value Failed"
        case 0x05: "Pairing Not Supported"
        case 0x06: "Encryption Key Size"
        case 0x07: "Command Not Supported"
        case 0x08: "Unspecified Reason"
        case 0x09: "Repeated Attempts"
        case 0x0A: "Invalid Parameters"
        case 0x0B: "DHKey Check Failed"
        case 0x0C: "Numeric Comparison Failed"
        case 0x0D: "BR/EDR pairing in progress"
        case 0x0E: "Cross-transport Key Derivation/Generation not allowed"
        case 0x0F: "Key Rejected"
        default: nil
        }
    }

    /// "0x04 Confirm Value Failed", or "0x42 (reserved)".
    public static func describeReason(_ reason: UInt8) -> String {
        "\(ATTHex.byte(reason)) \(reasonName(reason) ?? "(reserved)")"
    }
}

/// A Pairing Failed PDU seen on a link: its reason and which side sent it.
public struct SMPPairingFailed: Sendable, Equatable, CustomStringConvertible {
    public enum Sender: String, Sendable, Equatable {
        case thisHost = "this host's kernel"
        case peer = "the peer"
    }
    public var handle: UInt16
    public var reason: UInt8
    public var sentBy: Sender

    public init(handle: UInt16, reason: UInt8, sentBy: Sender) {
        self.handle = handle
        self.reason = reason
        self.sentBy = sentBy
    }

    /// Reads an HCI ACL data packet (H4 type 0x02 first, Vol 4 Part E §5.4.2) that carries, unfragmented, an L2CAP
    /// basic frame on SMP's channel with a Pairing Failed PDU (code, reason); `incoming` is its direction.
    public static func parse(aclPacket p: [UInt8], incoming: Bool) -> SMPPairingFailed? {
        // Type, handle and flags (2), data length (2), L2CAP length (2), CID (2), code, reason.
        guard p.count >= 11, p[0] == 0x02 else { return nil }
        let handleAndFlags = p.littleEndianUInt16(at: 1)
        // Packet_Boundary_Flag 0b01 is a continuing fragment: no L2CAP header in it.
        guard (handleAndFlags >> 12) & 0x3 != 0x1, p.littleEndianUInt16(at: 7) == SMP.channel,
              p.littleEndianUInt16(at: 5) >= 2, p[9] == SMP.pairingFailedCode else { return nil }
        return SMPPairingFailed(handle: handleAndFlags & 0x0FFF, reason: p[10], sentBy: incoming ? .peer : .thisHost)
    }

    /// "SMP Pairing Failed reason 0x04 Confirm Value Failed, sent by the peer".
    public var description: String {
        "SMP Pairing Failed reason \(SMP.describeReason(reason)), sent by \(sentBy.rawValue)"
    }
}

/// Watches one adapter's ACL data in both directions while a pairing runs, for the Pairing Failed PDU and the
/// Disconnection Complete reason of the peer's link (LE Connection Complete maps handles to peers). It needs
/// CAP_NET_RAW (the kernel's filter passes ACL data only then); without it `seesACL` is false and it finds nothing.
/// With a `loop` its socket is a source of that loop (the link's, with --pair: no thread of its own); without one a
/// reader thread ("smp-watch") serves it (`mirror pair`, which has no loop). The watch owns the socket: it leaves
/// the loop's set before it is closed.
public final class SMPFailureWatch: Sendable {
    public let adapter: String
    /// Whether the kernel's filter passes ACL data to this socket.
    public let seesACL: Bool
    private let fd: Int32
    /// The reader thread's wake-up (-1 on a loop).
    private let wake: Int32
    /// The loop whose source the socket is, and its token there; nil: the reader thread.
    private let loop: EventLoop?
    private let token: UInt64
    /// Guards what the reader saw and whether it has ended.
    private let state = Lock(WatchState())

    struct WatchState {
        var peers: [UInt16: BluetoothAddress] = [:]
        var failures: [SMPPairingFailed] = []
        var disconnects: [UInt16: UInt8] = [:]
        var closing = false
        var done = false
    }

    /// Opens the watch on adapter `index` (named `adapter` in messages); nil when the socket cannot be opened (the
    /// pairing then goes on, its error without the SMP reason).
    public convenience init?(index: Int, adapter: String, loop: EventLoop? = nil) {
        // On the capability keeper while it lives: the filter is where the kernel checks CAP_NET_RAW.
        let (fd, acl) = Privilege.perform { () -> (Int32, Int32) in
            var acl: Int32 = 0
            let fd = cbz_hci_open_acl_watch(Int32(index), &acl)
            return (fd, acl)
        }
        guard fd >= 0 else { return nil }
        self.init(adopting: fd, adapter: adapter, seesACL: acl == 1, loop: loop)
    }

    /// Takes `fd` as the watch's socket (tests write HCI packets into a socketpair: no direction, so all incoming).
    init?(adopting fd: Int32, adapter: String, seesACL: Bool, loop: EventLoop? = nil) {
        let wake = loop == nil ? cbz_eventfd() : -1
        guard loop != nil || wake >= 0 else { _ = cbz_close(fd); return nil }
        self.adapter = adapter
        self.fd = fd
        self.wake = wake
        self.seesACL = seesACL
        self.loop = loop
        self.token = loop?.makeSourceToken() ?? 0
        guard let loop else {
            startDetachedThread { [self] in
                _ = cbz_set_thread_name("smp-watch")
                _ = readDirectedDatagrams(fd, wake: wake, capacity: 1100) { packet, incoming in self.take(packet, incoming: incoming) }
                state.withLockBroadcasting { $0.done = true }
            }
            return
        }
        // The handler holds the watch until `close` (or the socket's end) takes the socket out of the loop's set.
        let register = { @Sendable [self] in
            guard !state.withLock({ $0.closing }) else { return endSource() }
            if !loop.register(fd: fd, token: token, events: CBZ_EPOLLIN, { [self] _ in sourceReadable() }) {
                state.withLockBroadcasting { $0.done = true }
            }
        }
        if loop.inEventLoop { register() } else { loop.execute(register) }
    }

    // Only reachable once the reader has ended (its thread, or the loop's source, holds the watch while it runs).
    deinit {
        _ = cbz_close(fd)
        if wake >= 0 { _ = cbz_close(wake) }
    }

    /// On the loop's thread: the socket leaves the loop's set (before the deinit can close it); the reader is done.
    private func endSource() {
        guard let loop, !state.withLock({ $0.done }) else { return }
        loop.deregister(fd: fd, token: token)
        state.withLockBroadcasting { $0.done = true }
    }

    /// The loop's source: reads what the socket holds (level-triggered: what is left wakes the next wait).
    private func sourceReadable() {
        EventLoop.readBatch(stopping: { state.withLock { $0.closing } }, { readOne() }, end: { endSource() })
    }

    /// One datagram without blocking (with its direction, HCI_DATA_DIR), to `take`: true when one came, false when
    /// none was there, nil when the socket ended or failed.
    private func readOne() -> Bool? {
        var buffer = [UInt8](repeating: 0, count: 1100)
        var incoming: Int32 = 1
        let got = buffer.withUnsafeMutableBytes { cbz_hci_recv_directed(fd, $0.baseAddress, $0.count, &incoming) }
        if got < 0 { return cbz_errno() == EAGAIN || cbz_errno() == EINTR ? false : nil }
        if got == 0 { return nil }
        take(Array(buffer.prefix(min(got, buffer.count))), incoming: incoming != 0)
        return true
    }

    func take(_ packet: [UInt8], incoming: Bool) {
        if let failed = SMPPairingFailed.parse(aclPacket: packet, incoming: incoming) {
            state.withLockBroadcasting { $0.failures.append(failed) }
            return
        }
        switch HCIEvent.parse(packet) {
        case .leConnectionComplete(let c)? where c.status == 0:
            state.withLock { $0.peers[c.handle] = c.peerAddress }
        case .disconnectionComplete(let status, let handle, let reason)? where status == 0:
            state.withLockBroadcasting { $0.disconnects[handle] = reason }
        default:
            break
        }
    }

    /// Whether `handle` may be the peer's link: mapped to it, or connected before the watch opened (unmapped).
    private static func handle(_ handle: UInt16, of peer: BluetoothAddress, in s: WatchState) -> Bool {
        s.peers[handle].map { $0 == peer } ?? true
    }

    /// The last Pairing Failed on the peer's link, waiting up to `limit` for it (a PDU this host sends reaches the
    /// socket after the kernel's management event: hci_tx_work copies it); nil when none came.
    public func pairingFailed(peer: BluetoothAddress, limit: Duration = .milliseconds(300)) -> SMPPairingFailed? {
        guard seesACL else { return nil }
        let ns = Int(limit.components.seconds) * 1_000_000_000 + Int(limit.components.attoseconds / 1_000_000_000)
        let pick = { (s: inout WatchState) -> SMPPairingFailed?? in
            if let f = s.failures.last(where: { Self.handle($0.handle, of: peer, in: s) }) { return .some(f) }
            return s.done ? .some(nil) : nil
        }
        guard let loop, loop.inEventLoop else { return state.wait(until: pick, timeoutNanoseconds: ns) ?? nil }
        // On the loop's thread (the agent's source reporting a failure) this source cannot run meanwhile: the wait
        // reads the socket itself (BlockingWait: signals are still taken).
        let deadline = monotonicNanoseconds() + UInt64(max(0, ns))
        while true {
            if let found = state.withLock({ pick(&$0) }) { return found }
            let now = monotonicNanoseconds()
            if now >= deadline { return nil }
            let ready = BlockingWait.poll(fd: fd, events: Int16(CBZ_POLLIN),
                                          timeoutMilliseconds: Int32(clamping: (deadline - now + 999_999) / 1_000_000))
            if ready < 0 || (ready > 0 && readOne() == nil) { endSource() }
        }
    }

    /// As `pairingFailed`, and forgets every Pairing Failed seen so far: a serving agent's next failure on the same
    /// link is then reported with its own reason, not an earlier pairing's.
    public func takePairingFailed(peer: BluetoothAddress, limit: Duration = .milliseconds(300)) -> SMPPairingFailed? {
        let found = pairingFailed(peer: peer, limit: limit)
        if found != nil { state.withLock { $0.failures = [] } }
        return found
    }

    /// The Disconnection Complete reason of the peer's link, if it ended while watched.
    public func disconnectReason(peer: BluetoothAddress) -> UInt8? {
        state.withLock { s in s.disconnects.first(where: { Self.handle($0.key, of: peer, in: s) })?.value }
    }

    /// Ends the reader: it leaves its poll at once (or, on a loop, the socket leaves the loop's set: at once on the
    /// loop's thread, else posted there); the socket is closed once the watch is released (nothing waits for it).
    public func close() {
        guard let loop else { _ = cbz_eventfd_signal(wake); return }
        let first = state.withLock { s in
            defer { s.closing = true }
            return !s.closing
        }
        if loop.inEventLoop { endSource() } else if first { loop.execute { [self] in endSource() } }
    }
}
