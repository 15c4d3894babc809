// This process as the pairing agent, with no bluetoothd: it asks the kernel to pair (Pair Device) and answers what
// the kernel's SMP asks of user space (mgmt.c: User Confirmation and User Passkey Requests). Unanswered, smp.c's
// 30 s SMP timeout ends the pairing (Core Spec 5.4 Vol 3 Part H §3.4).

import ATTStack
import CBlueZSocket
import Glibc
import LinkCore

/// The pairing method SMP chose (Vol 3 Part H §2.3.5.1), as the requests the kernel made reveal it.
public enum PairingMethod: String, Sendable {
    case justWorks = "Just Works"
    case numericComparison = "Numeric Comparison"
    case passkeyEntry = "Passkey Entry"
}

/// A passkey or comparison value as the user sees it: six digits, leading zeros kept (Vol 3 Part H §2.3.5.3).
public func sixDigits(_ value: UInt32) -> String {
    let digits = String(value % 1_000_000)
    return String(repeating: "0", count: 6 - digits.count) + digits
}

/// What a pairing asks of its user; the CLI answers on its terminal, tests and the simulator with fixed answers.
public struct PairingPrompts: Sendable {
    /// Numeric Comparison: whether the six digits match what the peer shows.
    public var confirm: @Sendable (_ value: UInt32, _ peer: BluetoothAddress) -> Bool
    /// Passkey Entry on this side: the passkey the peer shows, or nil to refuse.
    public var passkey: @Sendable (_ peer: BluetoothAddress) -> UInt32?
    /// Passkey Entry on the peer's side: show this passkey for its user to type.
    public var display: @Sendable (_ passkey: UInt32, _ peer: BluetoothAddress) -> Void
    /// Just Works that the kernel leaves to user space (User Confirmation Request with Confirm_Hint 1, Vol 3 Part H
    /// §2.3.5.1) for a pairing this process did not ask for: whether to accept it (no MITM protection).
    public var justWorks: @Sendable (_ peer: BluetoothAddress) -> Bool

    /// Prompts; `justWorks` accepts by default (a test peer's, the simulator's): the CLI's always asks or refuses.
    public init(confirm: @escaping @Sendable (UInt32, BluetoothAddress) -> Bool,
                passkey: @escaping @Sendable (BluetoothAddress) -> UInt32?,
                display: @escaping @Sendable (UInt32, BluetoothAddress) -> Void,
                justWorks: @escaping @Sendable (BluetoothAddress) -> Bool = { _ in true }) {
        self.confirm = confirm
        self.passkey = passkey
        self.display = display
        self.justWorks = justWorks
    }

    /// Fixed answers: accept every comparison and Just Works, enter `passkey` (refuse when nil), show nothing.
    public static func fixed(passkey: UInt32?) -> PairingPrompts {
        PairingPrompts(confirm: { _, _ in true }, passkey: { _ in passkey }, display: { _, _ in })
    }
}

/// What this side refuses when Just Works is left to it and not accepted (Confirm_Hint 1, Vol 3 Part H §2.3.5.1).
public func justWorksRefusal(_ peer: BluetoothAddress) -> String {
    "Just Works (no MITM protection) that this host did not ask for, or with a peer it holds a bond with, was not accepted (the kernel leaves it to user space: Confirm_Hint 1), as another device may be using \(peer)'s address; accept it at a terminal's question or with mirror pair --accept-just-works, or if \(peer) was reset, remove its bond (`mirror bonds remove \(peer)`) and pair again"
}

/// What this side refuses under --require-mitm when SMP settles for Just Works (Vol 3 Part H §2.3.5.1).
public let justWorksWithoutMITMRefusal = "the pairing reached Just Works, which gives no MITM protection, and --require-mitm asks for it: give both sides an IO capability that can show or enter a passkey"

/// A pairing that ended.
public struct PairingOutcome: Sendable, Equatable {
    public var address: BluetoothAddress
    public var type: LEAddressType
    public var method: PairingMethod
    /// The kernel already held keys for the peer (Pair Device's 0x13 Already Paired): nothing was exchanged.
    public var alreadyPaired: Bool
    /// The key events the pairing gave (New Long Term Key, New IRK, New CSRK), in order: what a bond stores.
    public var keyEvents: [ManagementEvent] = []

    public init(address: BluetoothAddress, type: LEAddressType, method: PairingMethod, alreadyPaired: Bool, keyEvents: [ManagementEvent] = []) {
        self.address = address
        self.type = type
        self.method = method
        self.alreadyPaired = alreadyPaired
        self.keyEvents = keyEvents
    }

    /// Whether the pairing's LTKs are authenticated (MITM protection, Vol 3 Part H §2.3.1): the New Long Term Key
    /// events' Key_Type; nil when none came (already paired, or no bonding).
    public var authenticated: Bool? { ManagementEvent.longTermKeysAuthenticated(keyEvents) }
}

extension ManagementEvent {
    /// The controller index of a key event; nil for others.
    var keyIndex: UInt16? {
        switch self {
        case .newLongTermKey(let i, _, _), .newIdentityResolvingKey(let i, _, _, _), .newSignatureResolvingKey(let i, _, _): return i
        default: return nil
        }
    }

    /// Whether the LTKs among `events` are authenticated (MITM protection, Vol 3 Part H §2.3.1); nil with none.
    public static func longTermKeysAuthenticated(_ events: [ManagementEvent]) -> Bool? {
        let types = events.compactMap { e -> LongTermKeyType? in if case .newLongTermKey(_, _, let k) = e { return k.type } else { return nil } }
        return types.isEmpty ? nil : types.allSatisfy(\.isAuthenticated)
    }

    /// Whether this is a key the kernel distributed (Vol 3 Part H §3.6): what a bond is made of.
    public var isKeyEvent: Bool {
        switch self {
        case .newLongTermKey, .newIdentityResolvingKey, .newSignatureResolvingKey: return true
        default: return false
        }
    }
}

/// Why a pairing did not end in keys, with what the kernel and the link said.
public struct PairingError: Error, Sendable, Equatable, CustomStringConvertible {
    public var address: BluetoothAddress
    /// The address with its type, as messages name the peer.
    public var peer: String
    public var adapter: String
    /// Pair Device's management status (0x05 Authentication Failed, 0x04 Connect Failed, ...); nil on a timeout.
    public var status: UInt8?
    /// The method the requests revealed, when any came.
    public var method: PairingMethod?
    /// Authentication Failed's HCI status, when the kernel sent one.
    public var authenticationStatus: UInt8?
    /// Device Disconnected's reason, when the link dropped during the pairing.
    public var disconnectReason: UInt8?
    /// The SMP Pairing Failed PDU on the link (its reason and sender), when the ACL data could be watched.
    public var smpFailure: SMPPairingFailed?
    /// The link's Disconnection Complete reason (an HCI status), when it ended during the pairing.
    public var linkLossReason: UInt8?
    /// A timeout: what was awaited, and for how long.
    public var waitedFor: String?
    public var seconds: Double?
    /// What this side refused, when it was this side (a passkey not given, a comparison declined).
    public var refusedHere: String?

    public init(address: BluetoothAddress, peer: String, adapter: String) {
        self.address = address
        self.peer = peer
        self.adapter = adapter
    }

    public var description: String {
        var text = "pairing with \(peer) on \(adapter) failed: "
        if let waitedFor, let seconds {
            text += "timed out after \(bearerSeconds(seconds)) s waiting for \(waitedFor)"
        } else if let status {
            text += "Pair Device answered \(ATTHex.byte(status)) \(managementStatusName(status))"
        }
        var facts: [String] = []
        if let method { facts.append("method \(method.rawValue)") }
        if let refusedHere { facts.append("this host refused: \(refusedHere)") }
        if let smpFailure { facts.append(smpFailure.description) }
        if let authenticationStatus { facts.append("the kernel reported Authentication Failed, HCI status \(ATTHex.byte(authenticationStatus))") }
        if let linkLossReason {
            facts.append("the link dropped: Disconnection Complete reason \(HCIStatus.describe(linkLossReason))")
        } else if let disconnectReason {
            facts.append("the link dropped: \(managementDisconnectReasonName(disconnectReason))")
        }
        if !facts.isEmpty { text += " (" + facts.joined(separator: "; ") + ")" }
        if let advice { text += "; \(advice)" }
        return text
    }

    /// What to do next, by what went wrong.
    public var advice: String? {
        if refusedHere != nil { return nil }
        switch status {
        case 0x04?: return "the peer did not accept a connection: is it advertising connectable and in range?"
        case 0x05?: return "the peer refused the pairing or the values did not match; if it was bonded before it may have forgotten the bond: `mirror bonds remove \(address)` then pair again"
        case 0x0A?: return "another pairing runs on \(adapter): wait for it to end"
        case 0x14?: return "the management socket is not trusted: give the binary CAP_NET_ADMIN (sudo setcap cap_net_raw,cap_net_admin+ep $(command -v mirror)) or run as root"
        case 0x0F?: return "\(adapter) is not powered: `sudo btmgmt -i \(adapter) power on`"
        default: return waitedFor != nil ? "the peer or the kernel stopped answering; btmon shows the SMP exchange" : nil
        }
    }
}

/// Runs pairings on one adapter through a management socket, as the agent of this process.
public final class PairingAgent: Sendable {
    public let socket: ManagementSocket
    public let index: Int
    public let prompts: PairingPrompts

    /// How long a pairing may take in all: the connection (the kernel's 20 s LE connection timeout), SMP's own
    /// 30 s timeout, and a person reading a passkey.
    public static let pairLimit: Double = 60
    /// Set Powered on commands sent after ensureSMP's power-off before it gives up (each waits for its answer).
    static let powerOnAttempts = 3

    public init(socket: ManagementSocket, index: Int, prompts: PairingPrompts) {
        self.socket = socket
        self.index = index
        self.prompts = prompts
    }

    /// Makes the adapter keep keys and say `io` when the peer starts pairing: Set Bondable (the kernel clears it at
    /// the first management command), Set IO Capability, and Secure Connections where the controller has them.
    /// Then makes sure the kernel has SMP on it (`ensureSMP`); `mayPowerCycle` allows powering an LE-only adapter
    /// off and on when that cannot be asked (the caller knows no connection and no bluetoothd would be disturbed).
    /// Returns a note when the adapter was powered off and on.
    @discardableResult
    public func prepare(io: IOCapability, mayPowerCycle: Bool = false) throws(TransportError) -> String? {
        try socket.run(.setBondable(index: index, true))
        try socket.run(.setIOCapability(index: index, io))
        let info = try socket.run(.readControllerInformation(index: index))
        // Address (6), Bluetooth_Version (1), Manufacturer (2), Supported_Settings (4), Current_Settings (4);
        // bit 0 Powered, bit 6 Secure Simple Pairing, bit 11 Secure Connections (mgmt-protocol.rst).
        guard info.count >= 17 else { return nil }
        let supported = info.littleEndianUInt32(at: 9), current = info.littleEndianUInt32(at: 13)
        var secureConnections = current & (1 << 11) != 0
        if supported & (1 << 11) != 0, !secureConnections {
            try socket.run(.setSecureConnections(index: index, true))
            secureConnections = true
        }
        guard current & 1 != 0 else { return nil }
        return try ensureSMP(canAsk: secureConnections && supported & (1 << 6) != 0, mayPowerCycle: mayPowerCycle)
    }

    /// The kernel gives an adapter SMP only when it powers it on with the management interface in use (hci_sync.c
    /// hci_powered_update_sync calls smp_register); one brought up first by hciconfig or HCIDEVUP has none, and every
    /// pairing on it stalls ("security requested but not available"). On a dual-mode controller with Secure
    /// Connections, Read Local OOB Extended Data for LE needs SMP (smp_generate_oob) and so tells; mgmt.c refuses it
    /// on a controller without Secure Simple Pairing (an LE-only one) before asking, so there only `mayPowerCycle`
    /// decides. After a power cycle through this socket the kernel has registered SMP.
    func ensureSMP(canAsk: Bool, mayPowerCycle: Bool) throws(TransportError) -> String? {
        func smpMissing() throws(TransportError) -> UInt8? {
            do {
                try socket.run(.readLocalOutOfBandExtendedData(index: index))
                return nil
            } catch {
                // 0x03 Failed: smp_generate_oob found no SMP channel on the adapter.
                if case .managementCommandFailed(_, _, let status?, _) = error, status == 0x03 { return status }
                throw error
            }
        }
        if canAsk {
            guard try smpMissing() != nil else { return nil }
        } else if !mayPowerCycle {
            return nil
        }
        try socket.run(.setPowered(index: index, false))
        // The kernel may answer the power-off before its close of the device has ended; a power-on arriving in between
        // is answered Success with Powered (bit 0 of the settings) still clear, and nothing is powered (seen in the VM:
        // Close Index after that answer). Asked again, a bounded number of times, until the answer says Powered.
        var attempts = 0
        while try socket.run(.setPowered(index: index, true), timeout: 5).first.map({ $0 & 1 == 0 }) ?? false {
            attempts += 1
            guard attempts < Self.powerOnAttempts else {
                throw .managementCommandFailed(command: "Set Powered", adapter: socket.adapter, status: nil,
                                               detail: "\(socket.adapter) was powered off to register SMP, and \(Self.powerOnAttempts) Set Powered on answered Success with the adapter still off: `sudo btmgmt -i \(socket.adapter) power on`")
            }
        }
        if canAsk, let status = try smpMissing() {
            throw .managementCommandFailed(
                command: "Read Local Out Of Band Extended Data", adapter: socket.adapter, status: status,
                detail: "the kernel has no SMP on \(socket.adapter) even after powering it on through the management interface, so it cannot pair: its SMP crypto is missing (dmesg says \"Unable to create ECDH crypto context\" when the kernel lacks a default random number generator: load drbg and jitterentropy_rng)")
        }
        return canAsk
            ? "\(socket.adapter) had been powered on outside the Bluetooth management interface, so the kernel had no SMP on it (no pairing possible): powered it off and on again through that interface, which registers SMP"
            : "powered \(socket.adapter) off and on again through the Bluetooth management interface (it had no connection, and no bluetoothd runs): an adapter first powered on outside that interface has no SMP in the kernel, and an LE-only one cannot be asked"
    }

    /// Answers a pairing request of the kernel for any peer (the simulator's side, or during a connection that
    /// raises its security): the method it reveals (nil for an event that asks nothing) and what this side refused.
    /// `intended`: this process asked for this pairing (Pair Device to that peer, or --pair's own peer with no
    /// bond), so Just Works left to user space is accepted as bluetoothd does for its Pair() (src/device.c);
    /// otherwise `prompts.justWorks` decides. `requireMITM` refuses Just Works (Vol 3 Part H §2.3.5.1).
    @discardableResult
    public func answer(_ event: PairingEvent, intended: Bool = false,
                       requireMITM: Bool = false) throws(TransportError) -> (method: PairingMethod, refused: String?)? {
        switch event {
        case .userConfirmationRequest(let a, let t, let justWorks, let value):
            // Confirm_Hint 1: Just Works, a yes or no the kernel leaves to user space (smp.c asks for every LE Secure
            // Connections Just Works, and whenever it already holds a key for the peer).
            let accept: Bool, refusal: String
            if justWorks {
                accept = requireMITM ? false : (intended || prompts.justWorks(a))
                refusal = requireMITM ? justWorksWithoutMITMRefusal : justWorksRefusal(a)
            } else {
                accept = prompts.confirm(value, a)
                refusal = "the six digits \(sixDigits(value)) were not confirmed"
            }
            try socket.send(.userConfirmationReply(index: index, address: a, type: t, accept: accept))
            return (justWorks ? .justWorks : .numericComparison, accept ? nil : refusal)
        case .userPasskeyRequest(let a, let t):
            // Asked once: the prompt may read a terminal.
            let passkey = prompts.passkey(a)
            try socket.send(.userPasskeyReply(index: index, address: a, type: t, passkey: passkey))
            return (.passkeyEntry, passkey == nil ? "no passkey to enter (give --passkey N, or run on a terminal to type it)" : nil)
        case .passkeyNotify(let a, _, let passkey, let entered):
            if entered == 0 { prompts.display(passkey, a) }
            return (.passkeyEntry, nil)
        default:
            return nil
        }
    }

    /// Answers every pairing request of the kernel on this adapter until `stop()`: the simulator's side, and a
    /// connecting command's with --pair (BT_SECURITY starts SMP; the kernel asks here). With a `loop` the management
    /// socket is a source of it (the link's: the agent has no thread; a prompt it asks holds that loop, taking
    /// signals meanwhile); without one (`mirror-sim --io`, the shell's agent, tests) a thread of its own serves it.
    /// Each answer goes to `report`, and what was served to the service (`PairingService.takeServed`). With `watch`
    /// (opened while CAP_NET_RAW was held), a failed pairing is reported with its SMP Pairing Failed reason and
    /// sender too (Vol 3 Part H §3.5.5); the service closes the watch when it stops.
    /// `bonded` says what this host holds for a peer (its bond, described) or nil: a pairing request for a peer with a
    /// bond is the peer asking to pair again (Vol 3 Part H §2.4.6: it lost its keys, or wants a stronger key), said
    /// before it is answered. `intended` says which peers' Just Works left to user space (Confirm_Hint 1) this
    /// process asked for (--pair's own peer with no bond); any other's goes to `prompts.justWorks`.
    public func startServing(report: @escaping @Sendable (String) -> Void,
                             keys: @escaping @Sendable (ManagementEvent) -> Void = { _ in },
                             watch: SMPFailureWatch? = nil,
                             bonded: @escaping @Sendable (BluetoothAddress) -> String? = { _ in nil },
                             intended: @escaping @Sendable (BluetoothAddress) -> Bool = { _ in false },
                             on loop: EventLoop? = nil) throws(TransportError) -> PairingService {
        let wake = loop == nil ? cbz_eventfd() : -1
        if loop == nil, wake < 0 { watch?.close(); throw .socket(lastSocketError("eventfd", "the pairing agent's wake-up", .local)) }
        let service = PairingService(wake: wake, watch: watch, loop: loop, fd: socket.fd)
        // Authentication Failed: smp.c reports every SMP failure so; the PDU on the link says why and who sent it.
        let failed = { @Sendable (a: BluetoothAddress, status: UInt8) in
            report("pairing with \(a) failed: Authentication Failed, HCI status \(ATTHex.byte(status))")
            let smp = watch?.takePairingFailed(peer: a)
            // That attempt is over: its method and keys are not a later pairing's.
            service.record { s in
                s = ServedPairing()
                s.authenticationFailed = status
                s.smpFailure = smp
            }
            if let smp { report("pairing with \(a) failed: \(smp)") }
        }
        // One management event (mgmt-api.txt): a key to keep, a request to answer, a failure to report.
        let serve = { @Sendable [self] (packet: [UInt8]) in
            let parsed = ManagementEvent.parse(packet)
            // Read after stop() was asked (the thread's poll saw the event before stop's wake-up): treated as the
            // drain treats it, a failure reported and nothing answered, as the loop's source does before each read.
            if service.stopAsked.withLock({ $0 }) {
                if case .pairing(let i, .authenticationFailed(let a, _, let status))? = parsed, Int(i) == index { failed(a, status) }
                return
            }
            if let parsed, parsed.keyIndex == UInt16(index) {
                if case .newLongTermKey = parsed { service.record { $0.longTermKeys += 1 } }
                keys(parsed)
            }
            guard case .pairing(let i, let e)? = parsed, Int(i) == index else { return }
            do {
                if e.asksForAnAnswer, let bond = bonded(e.peer.address) {
                    report("\(e.peer.address) asks to pair again though this host holds a bond with it (\(bond)): the peer lost its keys or asks for a stronger key; the new pairing's keys replace the bond (if the peer did not lose them, something else may be using its address)")
                }
                if let (method, refused) = try answer(e, intended: intended(e.peer.address)) {
                    service.record { s in
                        s.method = method
                        if let refused { s.refused = refused }
                    }
                    report("pairing with \(e.peer.address) (\(e.peer.type)): \(method.rawValue)" + (refused.map { ", refused: \($0)" } ?? ", answered"))
                } else if case .authenticationFailed(let a, _, let status) = e {
                    failed(a, status)
                }
            } catch {
                report("pairing agent on \(socket.adapter) could not answer: \(error)")
            }
        }
        // Stopped: a failure the kernel had queued is still reported (a link that failed to encrypt stops the
        // agent as the failure comes); nothing more is answered.
        let drain = { @Sendable [self] in
            while let event = try? socket.nextEvent(timeout: 0) {
                if case .pairing(let i, .authenticationFailed(let a, _, let status)) = event, Int(i) == index { failed(a, status) }
            }
        }
        let ended = { @Sendable [self] (syscall: String) in
            report("pairing agent on \(socket.adapter) stopped: \(lastSocketError(syscall, "waiting for a pairing request", .hci(adapter: socket.adapter)))")
        }
        guard loop != nil else {
            startDetachedThread { [self] in
                _ = cbz_set_thread_name("pair-agent")
                defer { service.finished() }
                if let stopped = readDatagrams(socket.fd, wake: wake, capacity: 1024, serve) { return ended(stopped) }
                drain()
            }
            return service
        }
        service.serveOnLoop(socket: socket, serve: serve, drain: drain, ended: ended)
        return service
    }

    /// Pairs with the peer (Pair Device with `io` for this pairing), answering the kernel's requests, until Pair
    /// Device completes or `limit` seconds pass (then it cancels the pairing and names what it waited for).
    /// `peerBonded`: this host holds a bond with the peer, so its Just Works goes to `prompts.justWorks`. Throws a
    /// `PairingError` for a pairing that ended without keys, the socket's `TransportError` when the management
    /// socket itself failed.
    public func pair(address: BluetoothAddress, type: LEAddressType, io: IOCapability,
                     limit: Double = PairingAgent.pairLimit, watch given: SMPFailureWatch? = nil,
                     requireMITM: Bool = false, peerBonded: Bool = false) throws -> PairingOutcome {
        let peer = "\(address) (\(type))"
        var failure = PairingError(address: address, peer: peer, adapter: socket.adapter)
        // Opened before Pair Device, so it sees the link's LE Connection Complete and every SMP PDU on it; a caller
        // that drops CAP_NET_RAW first opens it while it still holds it (`given`).
        let watch = given ?? SMPFailureWatch(index: index, adapter: socket.adapter)
        defer { watch?.close() }
        try socket.send(.pairDevice(index: index, address: address, type: type, io: io))
        var method: PairingMethod?
        var refusedHere: String?
        var keyEvents: [ManagementEvent] = []
        var waiting = "Pair Device's Command Complete (the connection to \(peer))"
        let status = try firstAnswer(within: limit, next: socket.nextEvent) { (event) throws(TransportError) -> UInt8? in
            switch event {
            case .commandComplete(0x0019, let i, let status, _) where Int(i) == index:
                return status
            case let key where key.keyIndex == UInt16(index):
                // The keys come before Pair Device's Command Complete (smp.c smp_notify_keys, then the completion).
                keyEvents.append(key)
                return nil
            case .pairing(let i, let e) where Int(i) == index:
                switch e {
                case .deviceConnected:
                    waiting = "the SMP pairing with \(peer) to end (Pair Device's Command Complete)"
                case .authenticationFailed(_, _, let s): failure.authenticationStatus = s
                case .deviceDisconnected(_, _, let r): failure.disconnectReason = r
                default:
                    // Pair Device named this peer: its Just Works is this process's intent, unless a bond with it is
                    // held (the peer pairing again may be another device using its address); another peer's is asked.
                    if let (m, refused) = try answer(e, intended: e.peer.address == address && !peerBonded, requireMITM: requireMITM) {
                        method = m
                        if let refused { refusedHere = refused }
                        waiting = "the SMP pairing with \(peer) to end (\(m.rawValue); Pair Device's Command Complete)"
                    }
                }
                return nil
            default:
                return nil
            }
        }

        failure.method = method
        failure.refusedHere = refusedHere
        if status != 0 && status != 0x13 {
            failure.smpFailure = watch?.pairingFailed(peer: address)
            failure.linkLossReason = watch?.disconnectReason(peer: address)
        }
        guard let status else {
            try? socket.send(.cancelPairDevice(index: index, address: address, type: type))
            failure.waitedFor = waiting
            failure.seconds = limit
            throw failure
        }
        if status == 0 || status == 0x13 {
            return PairingOutcome(address: address, type: type, method: method ?? .justWorks, alreadyPaired: status == 0x13,
                                  keyEvents: keyEvents)
        }
        failure.status = status
        throw failure
    }
}

/// What a serving agent did since it was last asked (`PairingService.takeServed`): the method the kernel's requests
/// revealed, what this side refused, the keys that came, and a failure with its SMP reason (a failure clears the
/// failed attempt's method and keys).
public struct ServedPairing: Sendable, Equatable {
    public var method: PairingMethod?
    public var refused: String?
    /// New Long Term Key events: a pairing ran and ended in keys.
    public var longTermKeys = 0
    /// Authentication Failed's HCI status, when the kernel reported a failed pairing.
    public var authenticationFailed: UInt8?
    /// The Pairing Failed PDU of that failure, when the agent's watch saw it.
    public var smpFailure: SMPPairingFailed?

    public init() {}

    /// The method of a pairing that ended in keys: the kernel asks user space for every method but Just Works
    /// (smp.c), so keys with no request answered were Just Works (Vol 3 Part H §2.3.5.1); nil when none ran.
    public var pairedMethod: PairingMethod? {
        longTermKeys > 0 ? (method ?? .justWorks) : nil
    }
}

/// A running pairing agent (PairingAgent.startServing): `stop()` ends its thread (or takes its socket out of the
/// loop's set) and waits for it, at most 2 s.
public final class PairingService: Sendable {
    /// The eventfd stop() signals; closed once the thread has ended (-1 on a loop).
    let wake: Int32
    /// The loop whose source the management socket is (nil: the agent's thread), the socket's fd and its token.
    let loop: EventLoop?
    let fd: Int32
    let token: UInt64
    /// What the source does once stopped (the queued failures), run once on the loop.
    private let onStop = Lock<(@Sendable () -> Void)?>(nil)
    /// Set by `stop()` at once: the source answers nothing read after it (the stop's own work is posted). Internal
    /// and broadcast: a test waits on it (`wait(until:)`) to release a held prompt only once it is set.
    let stopAsked = Lock(false)
    /// The SMP watch the agent reports failures with, closed at stop().
    let watch: SMPFailureWatch?
    /// Guards whether the serving thread has ended.
    private let state = Lock(false)
    /// Guards what was served since the last `takeServed`.
    private let served = Lock(ServedPairing())

    init(wake: Int32, watch: SMPFailureWatch? = nil, loop: EventLoop? = nil, fd: Int32 = -1) {
        self.wake = wake
        self.watch = watch
        self.loop = loop
        self.fd = fd
        self.token = loop?.makeSourceToken() ?? 0
    }

    /// The agent as a source of `loop`: each readable management event to `serve`; the socket's end or failure
    /// reported through `ended`. The socket (the agent's, which it outlives) leaves the set at `stop()`.
    func serveOnLoop(socket: ManagementSocket, serve: @escaping @Sendable ([UInt8]) -> Void,
                     drain: @escaping @Sendable () -> Void, ended: @escaping @Sendable (String) -> Void) {
        guard let loop else { return }
        onStop.withLock { $0 = drain }
        let register = { @Sendable [self] in
            guard !state.withLock({ $0 }) else { return }
            // The handler holds the socket and this service until the source leaves the set.
            let registered = loop.register(fd: fd, token: token, events: CBZ_EPOLLIN) { [self, socket] _ in
                _ = socket
                var buffer = [UInt8](repeating: 0, count: 1024)
                for _ in 0..<EventLoop.sourceBatch {
                    // Stopped meanwhile (from another thread): what is queued is drained, not answered.
                    if stopAsked.withLock({ $0 }) { return endSource(drain: true) }
                    var truncated: Int32 = 0
                    let got = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
                    if got < 0 {
                        if cbz_errno() == EAGAIN || cbz_errno() == EINTR { return }
                        ended("recv")
                        return endSource(drain: false)
                    }
                    if got == 0 { return endSource(drain: false) }
                    serve(Array(buffer.prefix(got)))
                    if state.withLock({ $0 }) { return } // stopped by what it served
                }
            }
            if !registered {
                ended("epoll_ctl")
                finished()
            }
        }
        if loop.inEventLoop { register() } else { loop.execute(register) }
    }

    /// On the loop's thread: the socket leaves the set, and (stopped) the failures queued are still reported.
    private func endSource(drain: Bool) {
        guard let loop, !state.withLock({ $0 }) else { return }
        loop.deregister(fd: fd, token: token)
        let queued = onStop.withLock { d in defer { d = nil }; return d }
        if drain { queued?() }
        finished()
    }

    func finished() { state.withLockBroadcasting { $0 = true } }

    func record(_ change: (inout ServedPairing) -> Void) { served.withLockBroadcasting { change(&$0) } }

    /// What the agent served since the last call (the shell's `pair` takes it before and after raising the link).
    public func takeServed() -> ServedPairing {
        served.withLock { s in defer { s = ServedPairing() }; return s }
    }

    /// As `takeServed`, once a New Long Term Key has come or `limit` has passed: SMP
    /// distributes the keys after the link is encrypted (Vol 3 Part H §3.6.1), so they may follow the raise.
    public func takeServed(awaitingKeysFor limit: Duration) -> ServedPairing {
        _ = served.wait(until: { $0.longTermKeys > 0 ? () : nil }, timeoutNanoseconds: Int(limit.nanosecondsClamped))
        return takeServed()
    }

    /// Ends the agent's thread and waits for it at most `limit` (an answer under way, a prompt the user has not
    /// answered, may hold it); it answers nothing after it has ended.
    public func stop(limit: Duration = .seconds(2)) {
        stopAsked.withLockBroadcasting { $0 = true }
        if let loop {
            if loop.inEventLoop { endSource(drain: true) } else { loop.execute { [self] in endSource(drain: true) } }
        } else {
            _ = cbz_eventfd_signal(wake)
        }
        let ns = Int(limit.components.seconds) * 1_000_000_000 + Int(limit.components.attoseconds / 1_000_000_000)
        _ = state.wait(until: { $0 ? () : nil }, timeoutNanoseconds: ns)
        // After the thread: a failure it is reporting still finds its Pairing Failed PDU (a link that failed to
        // encrypt stops the agent as the failure comes).
        watch?.close()
    }

    deinit { if wake >= 0 { _ = cbz_close(wake) } }
}

/// A connection whose encryption failed (Encryption Change with a status, Vol 4 Part E §7.7.8): 0x06 PIN or Key
/// Missing is a peer that no longer has the bond this side encrypts with.
public struct EncryptionFailedError: Error, Sendable, Equatable, CustomStringConvertible {
    public var peer: String
    public var adapter: String
    /// The Encryption Change status.
    public var status: UInt8

    public init(peer: String, adapter: String, status: UInt8) {
        self.peer = peer
        self.adapter = adapter
        self.status = status
    }

    /// The peer forgot the bond (it answered the LTK request negatively).
    public var isLostBond: Bool { status == 0x06 }

    public var description: String {
        let event = "Encryption Change status \(HCIStatus.describe(status))"
        if isLostBond {
            return "encrypting the link to \(peer) on \(adapter) failed: the peer has no key for this bond (\(event)): it has forgotten the bond (a reset, or a pairing with another central); pair again: `mirror bonds remove \(peer)`, then `mirror pair \(peer)` (or --pair), or run the command again with --repair, which does both"
        }
        return "encrypting the link to \(peer) on \(adapter) failed (\(event)): pairing or the key was refused; btmon shows the exchange"
    }
}
