// The LE link under an ATT bearer: each value with where it came from, or unknown with why. Never guessed.
//
// What the kernel gives without privilege (net/bluetooth, v6.12):
// - L2CAP_CONNINFO on the ATT socket: the HCI handle (l2cap_sock.c l2cap_sock_getsockopt_old).
// - BT_PHY: hci_conn_get_phy (hci_conn.c) tests conn->le_tx_phy/le_rx_phy, which only LE PHY Update Complete sets
//   (hci_event.c hci_le_phy_update_evt): 0 until one came; it stores the PHY value (3 = Coded) and tests it as the
//   bit mask of LE Set PHY, so Coded reads as 1M|2M.
// - BT_SECURITY: the level (l2cap_sock.c).
// - HCIGETCONNINFO on a raw HCI socket bound to the adapter: handle, role (HCI_LM_MASTER) and encryption
//   (HCI_LM_ENCRYPT); binding the raw channel and this ioctl need no capability (hci_sock.c, hci_conn.c get_link_mode).
// - HCIGETDEVINFO: acl_mtu/acl_pkts are the LE buffers only on an LE-only controller (hci_core.c hci_get_dev_info).
// The rest (interval, latency, supervision timeout, data length) is only in HCI events (LE Meta), which a raw socket
// receives only with CAP_NET_RAW (hci_sock.c hci_sock_setsockopt_old ANDs the filter with hci_sec_filter).

import CBlueZSocket
import JSON
import ATTStack
import LinkCore

/// The local role on the link (Vol 6 Part B §1.4).
public enum LinkRole: String, Sendable, Equatable {
    case central, peripheral
}

/// An LE PHY (Vol 6 Part A §2).
public enum LinkPHY: String, Sendable, Equatable, CaseIterable {
    case le1M = "1M", le2M = "2M", leCoded = "Coded"

    /// The PHY values of LE PHY Update Complete and LE Read PHY: 1, 2, 3.
    public init?(hciValue: UInt8) {
        switch hciValue {
        case 1: self = .le1M
        case 2: self = .le2M
        case 3: self = .leCoded
        default: return nil
        }
    }

    /// Its bit in LE Set PHY's TX_PHYs / RX_PHYs.
    public var setPHYBit: UInt8 {
        switch self {
        case .le1M: return 0x01
        case .le2M: return 0x02
        case .leCoded: return 0x04
        }
    }

    /// "1m", "2m", "coded", as the CLI spells them.
    public init?(name: String) {
        switch name.lowercased() {
        case "1m": self = .le1M
        case "2m": self = .le2M
        case "coded": self = .leCoded
        default: return nil
        }
    }
}

/// Where a value came from.
public enum LinkSource: Sendable, Equatable, CustomStringConvertible {
    /// "socket option L2CAP_CONNINFO".
    case socketOption(String)
    /// "ioctl HCIGETCONNINFO".
    case ioctl(String)
    /// "HCI event LE Connection Complete".
    case hciEvent(String)
    /// "HCI command LE Read PHY".
    case hciCommand(String)

    public var description: String {
        switch self {
        case .socketOption(let n): return "socket option \(n)"
        case .ioctl(let n): return "ioctl \(n)"
        case .hciEvent(let n): return "HCI event \(n)"
        case .hciCommand(let n): return "HCI command \(n)"
        }
    }
}

/// Why a value is unknown.
public enum LinkUnknown: Sendable, Equatable, CustomStringConvertible {
    /// Only raw HCI with `capability` gives it: the capability and the setcap line that grants it.
    case needsCapability(capability: String, setcap: String)
    /// Nothing has told it yet: "no LE Connection Complete or LE Connection Update Complete seen on this link".
    case notSeen(String)
    /// The kernel or the transport cannot tell it: "unix: has no radio link", an errno.
    case unavailable(String)

    public var description: String {
        switch self {
        case .needsCapability(let c, let setcap): return "needs \(c): run `\(setcap)`"
        case .notSeen(let s), .unavailable(let s): return s
        }
    }
}

/// A value with its provenance, or unknown with why.
public enum LinkValue<T: Sendable & Equatable>: Sendable, Equatable {
    case known(T, source: LinkSource)
    case unknown(LinkUnknown)

    public var value: T? { if case .known(let v, _) = self { return v } else { return nil } }
    public var source: LinkSource? { if case .known(_, let s) = self { return s } else { return nil } }
    public var unknownReason: LinkUnknown? { if case .unknown(let u) = self { return u } else { return nil } }

    /// Keeps a known value; an unknown one takes `other`.
    func or(_ other: LinkValue<T>) -> LinkValue<T> { value == nil ? other : self }
}

/// The link layer's payload limits (Vol 6 Part B §4.5.10): octets and air time in µs, each way.
public struct LinkDataLength: Sendable, Equatable {
    public var maxTxOctets: Int
    public var maxTxTime: Int
    public var maxRxOctets: Int
    public var maxRxTime: Int
    public init(maxTxOctets: Int, maxTxTime: Int, maxRxOctets: Int, maxRxTime: Int) {
        self.maxTxOctets = maxTxOctets; self.maxTxTime = maxTxTime; self.maxRxOctets = maxRxOctets; self.maxRxTime = maxRxTime
    }
}

/// The adapter's LE ACL data buffers (what the host may have in flight to the controller).
public struct LinkBuffers: Sendable, Equatable {
    public var size: Int
    public var count: Int
    public init(size: Int, count: Int) { self.size = size; self.count = count }
}

/// The LE link of one ATT bearer.
public struct LinkState: Sendable, Equatable {
    public var handle: LinkValue<UInt16>
    public var role: LinkValue<LinkRole>
    /// The connection interval in ms (1.25 ms units).
    public var intervalMilliseconds: LinkValue<Double>
    /// Connection events the peripheral may skip.
    public var peripheralLatency: LinkValue<Int>
    public var supervisionTimeoutMilliseconds: LinkValue<Int>
    public var txPHY: LinkValue<LinkPHY>
    public var rxPHY: LinkValue<LinkPHY>
    public var dataLength: LinkValue<LinkDataLength>
    public var securityLevel: LinkValue<BTSecurityLevel>
    public var encrypted: LinkValue<Bool>
    public var adapterLEBuffers: LinkValue<LinkBuffers>

    /// Every value unknown for the same reason.
    public init(allUnknown reason: LinkUnknown) {
        handle = .unknown(reason); role = .unknown(reason); intervalMilliseconds = .unknown(reason)
        peripheralLatency = .unknown(reason); supervisionTimeoutMilliseconds = .unknown(reason)
        txPHY = .unknown(reason); rxPHY = .unknown(reason); dataLength = .unknown(reason)
        securityLevel = .unknown(reason); encrypted = .unknown(reason); adapterLEBuffers = .unknown(reason)
    }

    /// The reason every value is unknown for, when they all are for the same one (a unix: link has no radio); nil
    /// when any is known or two reasons differ.
    public var sharedUnknown: LinkUnknown? {
        let reasons = [handle.unknownReason, role.unknownReason, intervalMilliseconds.unknownReason,
                       peripheralLatency.unknownReason, supervisionTimeoutMilliseconds.unknownReason, txPHY.unknownReason,
                       rxPHY.unknownReason, dataLength.unknownReason, securityLevel.unknownReason, encrypted.unknownReason,
                       adapterLEBuffers.unknownReason]
        guard let first = reasons[0], reasons.allSatisfy({ $0 == first }) else { return nil }
        return first
    }

    /// Takes every value `other` knows, keeping this one's where `other` does not know it.
    public func updated(with other: LinkState) -> LinkState {
        var s = self
        s.handle = other.handle.or(handle); s.role = other.role.or(role)
        s.intervalMilliseconds = other.intervalMilliseconds.or(intervalMilliseconds)
        s.peripheralLatency = other.peripheralLatency.or(peripheralLatency)
        s.supervisionTimeoutMilliseconds = other.supervisionTimeoutMilliseconds.or(supervisionTimeoutMilliseconds)
        s.txPHY = other.txPHY.or(txPHY); s.rxPHY = other.rxPHY.or(rxPHY); s.dataLength = other.dataLength.or(dataLength)
        s.securityLevel = other.securityLevel.or(securityLevel); s.encrypted = other.encrypted.or(encrypted)
        s.adapterLEBuffers = other.adapterLEBuffers.or(adapterLEBuffers)
        return s
    }

    /// What raw HCI would give, when this process cannot have it: CAP_NET_RAW and the setcap line.
    public static func rawHCIUnknown(_ check: CapabilityCheck = Capabilities.checkRawHCI()) -> LinkUnknown {
        .needsCapability(capability: "CAP_NET_RAW (raw HCI events and LE commands)", setcap: check.setcapCommand)
    }

    /// What the kernel tells without privilege about `bearer`'s link (see the top of this file); the values only HCI
    /// events give are unknown: needing CAP_NET_RAW when the process lacks it, else not seen (no monitor watched).
    public static func read(bearer: ATTBearer, capabilities: CapabilityCheck = Capabilities.checkRawHCI()) -> LinkState {
        guard case .le(let peer, _, let adapterName) = bearer.endpoint else {
            return LinkState(allUnknown: .unavailable("not an LE link (\(bearer.label) has no radio)"))
        }
        let eventOnly: LinkUnknown = capabilities.effective.contains(.netRaw)
            ? .notSeen("no HCI event of this link was watched (HCILinkMonitor opens before the connect)")
            : rawHCIUnknown(capabilities)
        var s = LinkState(allUnknown: eventOnly)
        s.handle = socketValue("L2CAP_CONNINFO") { () throws(TransportError) in try bearer.connectionHandle() }
        let phys = socketValue("BT_PHY") { () throws(TransportError) in try bearer.phyBits() }
        (s.txPHY, s.rxPHY) = (decodePHYBits(phys, tx: true, eventOnly), decodePHYBits(phys, tx: false, eventOnly))
        s.securityLevel = socketValue("BT_SECURITY") { () throws(TransportError) in try bearer.securityLevel() }
        let adapter = adapterName.flatMap { try? HCIAdapter.resolve($0) } ?? bearer.localAdapter()
        if let adapter {
            var info = cbz_conn_info()
            let peerBytes = peer.bytes
            if cbz_hci_conn_info(Int32(adapter.index), peerBytes, &info) == 0 {
                let source = LinkSource.ioctl("HCIGETCONNINFO")
                s.role = .known(info.link_mode & UInt32(CBZ_HCI_LM_MASTER) != 0 ? .central : .peripheral, source: source)
                s.encrypted = .known(info.link_mode & UInt32(CBZ_HCI_LM_ENCRYPT) != 0, source: source)
                if s.handle.value == nil { s.handle = .known(info.handle, source: source) }
            } else {
                let e = lastSocketError("ioctl(HCIGETCONNINFO)", "reading the link to \(peer) on \(adapter.name)", .hci(adapter: adapter.name))
                s.role = .unknown(.unavailable(e.description)); s.encrypted = .unknown(.unavailable(e.description))
            }
            s.adapterLEBuffers = adapterBuffers(adapter, otherwise: eventOnly)
        } else {
            s.role = .unknown(.unavailable("the bearer's adapter is not known"))
            s.encrypted = s.role.unknownReason.map { .unknown($0) } ?? s.encrypted
        }
        return s
    }

    /// HCIGETDEVINFO's buffers are the LE ones on an LE-only controller (hci_core.c hci_get_dev_info).
    static func adapterBuffers(_ adapter: HCIAdapter, otherwise: LinkUnknown) -> LinkValue<LinkBuffers> {
        if adapter.featuresKnown && !adapter.supportsBREDR && adapter.aclMTU > 0 {
            return .known(LinkBuffers(size: adapter.aclMTU, count: adapter.aclPackets),
                          source: .ioctl("HCIGETDEVINFO (an LE-only controller: the kernel reports its LE buffers)"))
        }
        return .unknown(otherwise)
    }

    static func socketValue<T>(_ option: String, _ body: () throws(TransportError) -> T) -> LinkValue<T> {
        do { return .known(try body(), source: .socketOption(option)) } catch {
            return .unknown(.unavailable(error.description))
        }
    }

    /// BT_PHY's LE bits for one direction: 0 means the kernel has seen no LE PHY Update Complete yet; the value 3
    /// (Coded) shows as the 1M and 2M bits together (see the top of this file).
    static func decodePHYBits(_ bits: LinkValue<UInt32>, tx: Bool, _ otherwise: LinkUnknown) -> LinkValue<LinkPHY> {
        guard let b = bits.value, let source = bits.source else { return .unknown(bits.unknownReason ?? otherwise) }
        let m1 = UInt32(tx ? CBZ_BT_PHY_LE_1M_TX : CBZ_BT_PHY_LE_1M_RX)
        let m2 = UInt32(tx ? CBZ_BT_PHY_LE_2M_TX : CBZ_BT_PHY_LE_2M_RX)
        let mc = UInt32(tx ? CBZ_BT_PHY_LE_CODED_TX : CBZ_BT_PHY_LE_CODED_RX)
        switch (b & m1 != 0, b & m2 != 0, b & mc != 0) {
        case (true, false, false): return .known(.le1M, source: source)
        case (false, true, false): return .known(.le2M, source: source)
        case (true, true, false), (false, false, true): return .known(.leCoded, source: source)
        case (false, false, false):
            if case .needsCapability = otherwise {
                return .unknown(.notSeen("BT_PHY is empty until the kernel sees an LE PHY Update Complete; LE Read PHY needs CAP_NET_RAW"))
            }
            return .unknown(.notSeen("BT_PHY is empty until the kernel sees an LE PHY Update Complete"))
        default: return .unknown(.unavailable("BT_PHY gave \(ATTHex.short(b)), more than one PHY in one direction"))
        }
    }
}

extension LinkValue {
    /// `{"value": ..., "source": "..."}` or `{"unknown": "why"}`.
    public func jsonValue(_ encode: (T) -> JSONValue) -> JSONValue {
        switch self {
        case .known(let v, let s): return .sortedObject([("value", encode(v)), ("source", .string(s.description))])
        case .unknown(let u): return .sortedObject([("unknown", .string(u.description))])
        }
    }
}

extension LinkState {
    /// The link as a JSON object with every key of `jsonValue`, the reason shared by every value said once: when
    /// all are unknown for the same reason (`sharedUnknown`), `{"unknown": "why", "handle": null, ...}` (each value
    /// null, the reason once first), else `jsonValue`. For output that would repeat one object eleven times.
    public var jsonValueSayingOnce: JSONValue {
        guard let reason = sharedUnknown, case .object(let fields) = jsonValue else { return jsonValue }
        return .object([("unknown", .string(reason.description))] + fields.map { ($0.0, JSONValue.null) })
    }

    /// The link as a JSON object, keys sorted; each value as LinkValue.jsonValue writes it.
    public var jsonValue: JSONValue {
        .sortedObject([
            ("handle", handle.jsonValue { .int(Int($0)) }),
            ("role", role.jsonValue { .string($0.rawValue) }),
            ("intervalMs", intervalMilliseconds.jsonValue { .double($0) }),
            ("peripheralLatency", peripheralLatency.jsonValue { .int($0) }),
            ("supervisionTimeoutMs", supervisionTimeoutMilliseconds.jsonValue { .int($0) }),
            ("txPHY", txPHY.jsonValue { .string($0.rawValue) }),
            ("rxPHY", rxPHY.jsonValue { .string($0.rawValue) }),
            ("dataLength", dataLength.jsonValue { d in
                .sortedObject([("maxTxOctets", .int(d.maxTxOctets)), ("maxTxTimeUs", .int(d.maxTxTime)),
                               ("maxRxOctets", .int(d.maxRxOctets)), ("maxRxTimeUs", .int(d.maxRxTime))]) }),
            ("securityLevel", securityLevel.jsonValue { .string($0.description) }),
            ("encrypted", encrypted.jsonValue { .bool($0) }),
            ("adapterLEBuffers", adapterLEBuffers.jsonValue { .sortedObject([("size", .int($0.size)), ("count", .int($0.count))]) }),
        ])
    }
}
