// The connect recipe under a Peer: the pairing agent opened and a bond's keys loaded before the connect (Vol 3
// Part H §3.6), the HCI link monitor opened before it (Vol 4 Part E §7.7.65.1), the connect on the link's loop, a
// lost bond repaired, the btsnoop capture attached, the link options asked, and the privileges dropped.
import ATTStack
import Bonding
import GATTClient
import LinkCore
import LinuxBluetooth

/// What a connect says while it runs (`Peer.Options.progress`), in order; never printed by the library.
public enum PeerProgress: Sendable, CustomStringConvertible {
    /// A note: a bond's keys loaded into the kernel, or whose keys the link uses under bluetoothd.
    case note(String)
    /// A step of the repair after a lost bond (`Peer.Options.repair`).
    case repair(String)
    /// What the link options came to, asked right after the connect.
    case linkRequests([LinkRequestReport])
    /// The LE link is up and watched: its drop's reason is `PeerLink.dropReason()` from now on.
    case linked(PeerLink)
    /// The btsnoop file's first failed write.
    case captureFailed(SocketError)
    /// What the GATT cache did.
    case cache(GATTDatabaseCacheEvent)
    /// What the Enhanced ATT bearers came to (`Peer.Options.enhancedBearers` above 1).
    case bearers(EnhancedBearerOutcome)

    /// The event in words.
    public var description: String {
        switch self {
        case .note(let s): return "note: \(s)"
        case .repair(let s): return "repair: \(s)"
        case .linkRequests(let r): return r.map { "link: \($0.text)" }.joined(separator: "\n")
        case .linked(let l): return "linked: \(l.bearer.label)"
        case .captureFailed(let e): return "btsnoop: \(e)"
        case .cache(let e): return "\(e)"
        case .bearers(let o): return o.problems.isEmpty ? "bearers: \(1 + o.opened.count) open" : o.problems.joined(separator: "; ")
        }
    }
}

/// Where a connection's btsnoop capture goes.
public enum PeerCapture: Sendable {
    /// A file the connection creates, and closes with it.
    case file(String)
    /// A writer of the caller's, which outlives the connection (a shell's).
    case writer(BTSnoopWriter)
}

/// The link a connect made, before the GATT client is put on it.
struct LinkConnection: Sendable {
    var bearer: ATTBearer
    var link: PeerLink?
    var requests: [LinkRequestReport]
    var pairing: PairingService?
    var capture: (writer: BTSnoopWriter, owned: Bool)?
    /// The security asked at the connect (raised to medium by the pairing agent).
    var security: BTSecurityLevel?
    /// Whether a raise of the link's security after 0x05/0x0F can be answered (an agent, a bond, bluetoothd).
    var mayRaiseSecurity: Bool
    /// A Just Works bond with nobody to answer a MITM pairing: no raise above medium.
    var raiseLimit: BTSecurityLevel?

    /// Ends what the connect opened, when no Peer was made of it.
    func close(reason: String) {
        bearer.close(reason: reason)
        link?.close()
        pairing?.stop()
        if let capture, capture.owned { capture.writer.close() }
    }
}

/// The connect recipe for one target and its options.
struct LinkSetup {
    var target: BearerTarget
    var options: Peer.Options
    var records: LinkRecordSink

    private func say(_ p: PeerProgress) { options.report(p) }

    /// Connects on `loop` (the async connect: its wait is a source of the loop). `mayRepair`: a lost bond may be
    /// repaired once (`options.repair`), then the connect is made afresh.
    func connect(on loop: EventLoop, mayRepair: Bool = true) async throws -> LinkConnection {
        let isUnix = if case .unix = target { true } else { false }
        let peerAddress: BluetoothAddress? = if case .bluetooth(let a) = target { a } else { nil }
        let drop = options.dropPrivileges ?? { _ in }
        // Asked once, and only for a Bluetooth link: whether bluetoothd runs (it owns the keys and its own agent).
        let daemonRuns = peerAddress != nil && BluetoothDaemon.runningPID() != nil
        // The agent answers the kernel's pairing requests for the connection's life (opened while the capabilities
        // are held: the management socket is trusted only then), and the link asks for encryption.
        let pairing = try options.pairing.flatMap { setup in
            try peerAddress.map { try Pairing.serve(adapter: options.adapter, peer: $0, daemonRuns: daemonRuns, setup: setup,
                                                  loop: setup.servesOnLinkLoop ? loop : nil) }
        }
        // A bond in this tool's store goes into the kernel first (it forgets keys at a reset or reboot). Not under
        // bluetoothd: it loads its own keys, and a Load Long Term Keys would replace its whole list.
        let loaded = try daemonRuns ? nil : peerAddress.flatMap {
            try BondKeys.loadIfBonded(peer: $0, type: options.addressType, adapter: HCIAdapter.resolve(HCIAdapter.chosen(options.adapter)))
        }
        if let loaded { say(.note(loaded.note)) }
        let asked = options.security
        // Said when the link asks for encryption: whose keys it will use.
        if daemonRuns, let peerAddress, (asked?.rawValue ?? 0) >= BTSecurityLevel.medium.rawValue || options.pairing != nil {
            let adapter = try? HCIAdapter.resolve(HCIAdapter.chosen(options.adapter))
            say(.note(adapter.map { BondKeys.daemonNote(peer: peerAddress, adapter: $0.address, adapterName: $0.name) } ?? BondKeys.daemonRunsNote))
        }
        // A raise after Insufficient Encryption / Authentication is only worth it when someone answers the kernel's
        // confirmation (an agent, a bond, bluetoothd); else SMP's 30 s timeout ends the link (Part H §3.4).
        let mayRaiseSecurity = pairing != nil || loaded != nil || (daemonRuns && options.raisesSecurityThroughDaemon)
        let security: BTSecurityLevel? = options.pairing != nil && !isUnix && (asked?.rawValue ?? 0) < BTSecurityLevel.medium.rawValue ? .medium : asked
        // A unix: target needs no capability.
        if isUnix { drop("at the connect (a unix: target needs none)") }
        let (monitor, monitorNote) = isUnix ? (nil, nil) : PeerLink.openMonitor(adapter: options.adapter, sink: records, loop: loop)
        let bearer: ATTBearer
        do {
            // A resolvable private address resolved to a bond: its identity (BondKeys.loadIfBonded says why).
            let (to, type): (BearerTarget, LEAddressType) = loaded?.identity.map { (.bluetooth($0.address), $0.type) } ?? (target, options.addressType)
            bearer = try await ATTBearer.connect(to: to, type: type, adapter: options.adapter, timeout: options.connectTimeout,
                                                 security: isUnix ? nil : security, on: loop)
        } catch {
            // EACCES after asking for encryption: the kernel ended the link on a failed Encryption Change
            // (net/bluetooth's bt_to_errno), which the monitor saw; its status says why (Vol 4 Part E §7.7.8).
            let encryption = (security?.rawValue ?? 0) >= BTSecurityLevel.medium.rawValue && Self.isPermissionDenied(error)
                ? monitor?.awaitEncryptionFailure(limit: PeerLink.disconnectReasonWait) : nil
            let repairs = options.repair != nil && mayRepair && !daemonRuns
            if !(options.repair != nil && encryption == 0x06) { drop("after a failed connect") }
            monitor?.close()
            pairing?.stop()
            if let encryption, case .bluetooth(let address) = target {
                let failure = EncryptionFailedError(peer: address.description, adapter: options.adapter ?? "the default adapter", status: encryption)
                // The peer forgot the bond (0x06 PIN or Key Missing): forget this host's, pair again, connect afresh (once).
                if failure.isLostBond, repairs, let prompts = options.repair {
                    say(.repair("\(failure)"))
                    try Pairing.repair(address: address, type: options.addressType, adapter: options.adapter, prompts: prompts,
                                       say: { say(.repair($0)) }, note: { say(.note($0)) })
                    return try await connect(on: loop, mayRepair: false)
                }
                throw failure
            }
            throw error
        }
        var capture: (writer: BTSnoopWriter, owned: Bool)?
        // The monitor's records carry the real LE Connection Complete when it sees LE events; else one is synthesized.
        let opening = PeerLink.linkOpening(bearer: bearer, monitor: monitor, afterConnect: false, monitorNote: monitorNote)
        switch options.capture {
        case .writer(let writer)?:
            Peer.attach(writer, bearer: bearer, records: records, link: opening)
            capture = (writer, false)
        case .file(let path)?:
            do {
                let writer = try BTSnoopWriter(path: path)
                writer.onFailure { [options] error in options.report(.captureFailed(error)) }
                Peer.attach(writer, bearer: bearer, records: records, link: opening)
                capture = (writer, true)
            } catch {
                bearer.close(reason: "could not open the btsnoop file")
                monitor?.close()
                pairing?.stop()
                throw error
            }
        case nil: break
        }
        // The events seen since the connect (LE Connection Complete) reach the records here, in order.
        if let monitor { _ = try? monitor.bind(to: bearer) }
        let requests = PeerLink.ask(options.linkRequests, monitor: monitor, bearer: bearer,
                                    monitorNote: isUnix ? "\(target) is a unix socket, with no radio link" : monitorNote)
        // The last privileged work of a connection (the link options, LE Read PHY and LE Read Buffer Size), then
        // every capability goes, before the GATT client reads a byte of the peer's.
        if Privilege.isKept { monitor?.prefetchPrivilegedReads() }
        drop("after the connect")
        say(.linkRequests(requests))
        var link: PeerLink?
        if !isUnix {
            link = PeerLink(bearer: bearer, monitor: monitor, monitorNote: monitorNote)
            say(.linked(link!))
        }
        // No raise above medium with a Just Works bond and nobody to pair again, nor with an agent that has no input
        // and no output: it pairs by Just Works only, never MITM (Vol 3 Part H §2.3.5.1).
        let justWorksBond = pairing == nil && !daemonRuns && loaded.map { !$0.authenticated } == true
        let justWorksAgent = pairing != nil && options.pairing?.io == .noInputNoOutput && loaded?.authenticated != true
        return LinkConnection(bearer: bearer, link: link, requests: requests, pairing: pairing, capture: capture,
                              security: isUnix ? nil : security, mayRaiseSecurity: mayRaiseSecurity,
                              raiseLimit: justWorksBond || justWorksAgent ? .medium : nil)
    }

    /// Whether `error` is the socket's EACCES (a security failure on an L2CAP socket).
    static func isPermissionDenied(_ error: any Error) -> Bool {
        if case .socket(let e)? = error as? TransportError { return e.errno == .permissionDenied }
        return false
    }
}

extension Peer.Options {
    /// One progress event to `progress`, else in words to `notes` (none for a connect that asked no link option).
    func report(_ p: PeerProgress) {
        if let progress { progress(p) } else if let notes, !p.description.isEmpty { notes(p.description) }
    }
}

extension Peer {
    /// The btsnoop file this connection is written to, if any.
    public var snoop: BTSnoopWriter? { capture.withLock { $0?.writer } }

    /// Writes this connection's ATT PDUs, and its link's HCI records, to `writer` from now on, under an index of
    /// their own; a capture before it stops (`stopCapture`).
    public func startCapture(_ writer: BTSnoopWriter) {
        stopCapture()
        let bearer = transport.bearer
        // The link's LE Connection Complete came before this capture: it starts with a synthesized one.
        let opening = PeerLink.linkOpening(bearer: bearer, monitor: link?.monitor, afterConnect: true, monitorNote: nil)
        let index = Peer.attach(writer, bearer: bearer, records: records, link: opening)
        for link in enhancedLinks { link.bearer.capture(into: writer, linkIndex: index) }
        capture.withLock { $0 = (writer, false) }
    }

    /// Stops writing the capture (closing its file when the connection opened it).
    public func stopCapture() {
        guard let c = capture.withLock({ s in defer { s = nil }; return s }) else { return }
        transport.bearer.endCapture()
        for link in enhancedLinks { link.bearer.endCapture() }
        records.capture.withLock { $0 = nil }
        if c.owned { c.writer.close() }
    }

    /// Starts or stops the trace: every ATT PDU of every bearer, and the link's HCI records.
    public func setTracing(_ on: Bool) {
        transport.setTracing(on)
        for link in enhancedLinks { link.observed.setTracing(on) }
        records.setTracing(on)
    }

    /// The bearer's PDUs and the link's HCI records (from the next one) into `writer`, under one new index, after
    /// a synthesized LE Connection Complete where the capture would hold none (`linkOpening`; unix: always).
    @discardableResult
    static func attach(_ writer: BTSnoopWriter, bearer: ATTBearer, records: LinkRecordSink,
                       link: BTSnoopWriter.LinkOpening?) -> UInt16 {
        let index = bearer.capture(into: writer, link: link)
        records.capture.withLock { $0 = (writer, index) }
        return index
    }
}

extension PeerLink {
    /// The LE Connection Complete (Vol 4 Part E §7.7.65.1) an LE bearer's capture synthesizes because it will not
    /// hold the real one: the monitor does not see LE events (no CAP_NET_RAW), or the capture starts after the
    /// connect (`afterConnect`). Nil when the real one is captured, and for a bearer without a radio.
    public static func linkOpening(bearer: ATTBearer, monitor: HCILinkMonitor?, afterConnect: Bool,
                                   monitorNote: String?) -> BTSnoopWriter.LinkOpening? {
        guard case .le(let peer, let type, _) = bearer.endpoint else { return nil }
        if !afterConnect, monitor?.receivesLEEvents == true { return nil }
        let why = afterConnect ? "the capture began after the link's LE Connection Complete"
            : "the link's LE events are not watched (\(monitorNote ?? "no link monitor"))"
        return linkOpening(peer: peer, type: type, link: LinkState.read(bearer: bearer), events: monitor?.eventState(), why: why)
    }

    /// An LE link's synthesized event: the handle and role the kernel gave (`link`), and the interval, latency and
    /// supervision timeout the monitor's events gave (`events`), in the event's units; Linux's defaults where unknown.
    public static func linkOpening(peer: BluetoothAddress, type: LEAddressType, link: LinkState, events: LinkState?,
                                   why: String) -> BTSnoopWriter.LinkOpening {
        BTSnoopWriter.LinkOpening(
            handle: link.handle.value ?? BTSnoopWriter.aclHandle, role: link.role.value ?? .central,
            peerAddressType: type, peer: peer,
            interval: events?.intervalMilliseconds.value.map { UInt16(clamping: Int(($0 / 1.25).rounded())) }
                ?? BTSnoopWriter.LinkOpening.defaultInterval,
            latency: events?.peripheralLatency.value.map { UInt16(clamping: $0) } ?? 0,
            supervisionTimeout: events?.supervisionTimeoutMilliseconds.value.map { UInt16(clamping: $0 / 10) }
                ?? BTSnoopWriter.LinkOpening.defaultSupervisionTimeout,
            reason: why + "; a value the link did not show is Linux's default")
    }
}
