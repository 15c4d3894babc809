// A peer's LE link: watched from before the connect (HCILinkMonitor: its HCI records to a callback and the capture),
// read on demand (LinkState), asked for (Vol 4 Part E §7.8.18, §7.8.49, §7.8.33) and named when it drops.
import ATTStack
import JSON
import LinuxBluetooth
import LinkCore
import Synchronization

/// Where the link monitor's HCI records go: one line each to `line` while tracing, and the btsnoop capture while
/// the bearer has one (both switched while the link lives).
public final class LinkRecordSink: Sendable {
    /// Whether each record is given to `line`.
    private let tracing: Atomic<Bool>
    private let line: @Sendable (String) -> Void
    /// The capture and its index, set once the bearer captures (the records before it wait in the monitor).
    public let capture = Lock<(writer: BTSnoopWriter, index: UInt16)?>(nil)

    /// A sink whose records become lines ("HH:MM:SS.ffffff HCI ...") for `line` while `tracing`.
    public init(tracing: Bool, line: @escaping @Sendable (String) -> Void = { _ in }) {
        self.line = line
        self.tracing = Atomic(tracing)
    }

    /// Starts or stops the lines.
    public func setTracing(_ on: Bool) { tracing.store(on, ordering: .relaxed) }

    /// One record: a line while tracing, and into the capture when there is one.
    public func take(_ r: HCILinkRecord) {
        if tracing.load(ordering: .relaxed) {
            line("\(clockTime(unixSeconds: Double(r.timestampMicroseconds) / 1e6, digits: 6)) \(r.summary)")
        }
        capture.withLock { c in c.map { $0.writer.write(index: $0.index, hci: r) } }
    }
}

/// One link option as asked and what came of it.
public struct LinkRequestReport: Sendable {
    /// What came of it.
    public enum Result: String, Sendable { case granted, refused, timedOut, notAsked }
    /// "--interval 7.5".
    public var asked: String
    /// Granted, refused, timed out, or not asked.
    public var result: Result
    /// "interval 7.5 ms, latency 0, supervision timeout 420 ms (LE Connection Update Complete)", or why not.
    public var detail: String
    /// The HCI status of a refusal.
    public var status: UInt8?
    /// "controller" (an HCI status) or "host" (not sent: a capability, a range).
    public var refusedBy: String?
    /// The completion event's values, when granted.
    public var granted: JSONValue = .null

    /// "--interval 7.5: granted: ...", as `mirror link` prints it.
    public var text: String {
        switch result {
        case .granted: return "\(asked): granted: \(detail)"
        case .refused: return "\(asked): refused by the \(refusedBy ?? "controller"): \(detail); the link is as it was"
        case .timedOut: return "\(asked): no answer: \(detail); the link is as it was"
        case .notAsked: return "\(asked): not asked: \(detail)"
        }
    }

    /// Its object in `link --json`'s `requests`.
    public var json: JSONValue {
        .object([("asked", .string(asked)), ("result", .string(result.rawValue)), ("detail", .string(detail)),
                 ("granted", granted), ("status", status.map { .int(Int($0)) } ?? .null),
                 ("statusName", status.map { .string(HCIStatus.describe($0)) } ?? .null),
                 ("refusedBy", refusedBy.map { .string($0) } ?? .null)])
    }
}

/// A peer's LE link: its CID 4 bearer and the HCI monitor watching it since before the connect.
public final class PeerLink: Sendable {
    /// The ATT fixed channel's socket.
    public let bearer: ATTBearer
    /// The HCI link monitor (nil when no adapter could be watched).
    public let monitor: HCILinkMonitor?
    /// Why nothing watches the link's HCI events, or watches only some (no CAP_NET_RAW); nil when all are watched.
    public let monitorNote: String?

    /// How long an error for a lost link waits for the Disconnection Complete that names the reason.
    public static let disconnectReasonWait = Duration.milliseconds(500)

    /// The link of `bearer`, watched by `monitor`.
    public init(bearer: ATTBearer, monitor: HCILinkMonitor?, monitorNote: String?) {
        self.bearer = bearer
        self.monitor = monitor
        self.monitorNote = monitorNote
    }

    /// Opens the monitor on the adapter the connect will use (--adapter, else the first one up, as the kernel picks),
    /// before the connect, so that it sees the link's LE Connection Complete. Without CAP_NET_RAW it still watches
    /// what the kernel passes (Disconnection Complete, Encryption Change); with no adapter, nothing.
    /// With `loop` (the link's) the monitor's socket is a source of it: no thread of its own.
    public static func openMonitor(adapter: String?, sink: LinkRecordSink, loop: EventLoop? = nil) -> (HCILinkMonitor?, String?) {
        let name: String
        if let adapter {
            name = adapter
        } else if let up = (try? HCIAdapter.list())?.first(where: \.isUp) {
            name = up.name
        } else {
            return (nil, "no HCI adapter is up to watch")
        }
        do {
            let monitor = try HCILinkMonitor(adapter: name, allowUnprivileged: true, loop: loop, sink: { sink.take($0) })
            if monitor.receivesLEEvents { return (monitor, nil) }
            let check = Capabilities.checkRawHCI()
            if let why = check.droppedBecause {
                return (monitor, "the link's LE events need CAP_NET_RAW, which this process dropped \(why) (least privilege: mirror keeps capabilities only until a command's privileged sockets are open)")
            }
            return (monitor, "the link's LE events need CAP_NET_RAW: run `\(check.setcapCommand)`")
        } catch {
            return (nil, "the link's HCI events are not watched: \(error)")
        }
    }

    /// Everything known now (the kernel's values, the events', LE Read PHY with the capability).
    public func state() -> LinkState {
        monitor?.linkState(bearer: bearer) ?? LinkState.read(bearer: bearer)
    }

    /// The drop's HCI reason, waiting up to `disconnectReasonWait` for its Disconnection Complete: "the peer
    /// disconnected: 0x13 Remote User Terminated Connection", "the link was lost: 0x08 Connection Timeout".
    public func dropReason() -> (text: String, reason: UInt8)? {
        guard let monitor, let reason = monitor.awaitDisconnectReason(limit: Self.disconnectReasonWait) else { return nil }
        return (Self.describeDrop(reason), reason)
    }

    /// Who ended the link, by its Disconnection Complete reason (Vol 1 Part F §1.3).
    public static func describeDrop(_ reason: UInt8) -> String {
        let name = HCIStatus.describe(reason)
        switch reason {
        case 0x13, 0x14, 0x15: return "the peer disconnected: \(name)"
        case 0x16: return "this host disconnected: \(name)"
        case 0x08, 0x22, 0x3D, 0x3E: return "the link was lost: \(name)"
        default: return "the link ended: \(name)"
        }
    }

    /// Stops watching the link.
    public func close() { monitor?.close() }

    // MARK: Asking for a link

    /// Asks the controller for what `options` name, in order: connection update, PHY, data length (Vol 4 Part E
    /// §7.8.18, §7.8.49, §7.8.33). A refusal or a timeout leaves the link as it was; the command goes on.
    public static func ask(_ options: LinkRequestOptions, monitor: HCILinkMonitor?, bearer: ATTBearer, monitorNote: String?) -> [LinkRequestReport] {
        guard !options.isEmpty else { return [] }
        var asked: [String] = []
        if options.asksForConnectionUpdate {
            var parts: [String] = []
            if let i = options.interval {
                parts.append("--interval " + (i.lowerBound == i.upperBound ? formatMilliseconds(i.lowerBound)
                                              : "\(formatMilliseconds(i.lowerBound))-\(formatMilliseconds(i.upperBound))"))
            }
            if let l = options.latency { parts.append("--latency \(l)") }
            if let t = options.supervisionTimeoutMilliseconds { parts.append("--supervision-timeout \(t)") }
            asked.append(parts.joined(separator: " "))
        }
        if let p = options.phy { asked.append("--phy \(p.rawValue)") }
        if let d = options.dataLength { asked.append("--data-length \(d)") }
        guard let monitor, monitor.receivesLEEvents else {
            let why = monitorNote ?? "the link's HCI events are not watched"
            return asked.map { LinkRequestReport(asked: $0, result: .notAsked, detail: why) }
        }
        var reports: [LinkRequestReport] = []
        var index = 0
        if options.asksForConnectionUpdate {
            reports.append(connectionUpdate(options, asked: asked[index], monitor: monitor, bearer: bearer))
            index += 1
        }
        if let p = options.phy {
            let phy: LinkPHY = p == .le1M ? .le1M : p == .le2M ? .le2M : .leCoded
            reports.append(outcome(asked[index], try monitor.requestPHY(tx: phy, rx: phy)) { phys in
                let text = "TX \(phys.txPHY?.rawValue ?? ATTHex.byte(phys.tx)), RX \(phys.rxPHY?.rawValue ?? ATTHex.byte(phys.rx)) (LE PHY Update Complete)"
                return (text, .object([("txPHY", .string(phys.txPHY?.rawValue ?? ATTHex.byte(phys.tx))),
                                       ("rxPHY", .string(phys.rxPHY?.rawValue ?? ATTHex.byte(phys.rx)))]))
            })
            index += 1
        }
        if let octets = options.dataLength {
            let phy = monitor.linkState(bearer: bearer).txPHY.value ?? .le1M
            reports.append(outcome(asked[index], try monitor.requestDataLength(octets: octets, phy: phy)) { change in
                guard let d = change else {
                    return ("accepted, nothing changed (no LE Data Length Change within \(seconds(LinkRequestLimits().dataLengthChange)))", .null)
                }
                return ("TX \(d.maxTxOctets) octets \(d.maxTxTime) µs, RX \(d.maxRxOctets) octets \(d.maxRxTime) µs (LE Data Length Change)",
                        .object([("maxTxOctets", .int(Int(d.maxTxOctets))), ("maxTxTimeUs", .int(Int(d.maxTxTime))),
                                 ("maxRxOctets", .int(Int(d.maxRxOctets))), ("maxRxTimeUs", .int(Int(d.maxRxTime)))]))
            })
        }
        return reports
    }

    /// LE Connection Update with what was not asked for kept as it is (the supervision timeout raised to the
    /// spec's floor, (1 + latency) x interval max x 2, when the new values need it; Vol 6 Part B §4.5.2).
    private static func connectionUpdate(_ o: LinkRequestOptions, asked: String, monitor: HCILinkMonitor,
                                         bearer: ATTBearer) -> LinkRequestReport {
        let now = monitor.linkState(bearer: bearer)
        guard let interval = o.interval ?? now.intervalMilliseconds.value.map({ $0...$0 }) else {
            return LinkRequestReport(asked: asked, result: .notAsked,
                                     detail: "the current interval is not known (\(now.intervalMilliseconds.unknownReason?.description ?? "unknown")): give --interval too")
        }
        let latency = o.latency ?? now.peripheralLatency.value ?? 0
        let floor = Double(1 + latency) * interval.upperBound * 2
        var timeout = o.supervisionTimeoutMilliseconds ?? now.supervisionTimeoutMilliseconds.value ?? 420
        var note = ""
        if o.supervisionTimeoutMilliseconds == nil, Double(timeout) <= floor {
            timeout = min(32000, max(100, (Int(floor) / 10 + 1) * 10))
            note = "; supervision timeout raised to \(timeout) ms, above (1 + latency) x interval max x 2"
        }
        let units = { (ms: Double) in UInt16((ms / 1.25).rounded()) }
        let result = outcome(asked, try monitor.requestConnectionUpdate(
            intervalMinUnits: units(interval.lowerBound), intervalMaxUnits: units(interval.upperBound),
            latency: UInt16(latency), supervisionTimeoutUnits: UInt16(timeout / 10))) { u in
            let ms = Double(u.intervalUnits) * 1.25
            return ("interval \(formatMilliseconds(ms)) ms, latency \(u.peripheralLatency), supervision timeout \(Int(u.supervisionTimeoutUnits) * 10) ms (LE Connection Update Complete)",
                    .object([("intervalMs", .double(ms)), ("peripheralLatency", .int(Int(u.peripheralLatency))),
                             ("supervisionTimeoutMs", .int(Int(u.supervisionTimeoutUnits) * 10))]))
        }
        var r = result
        if !note.isEmpty, r.result != .notAsked { r.detail += note }
        return r
    }

    /// One request's outcome as a report; `granted` describes the completion event's values.
    private static func outcome<G>(_ asked: String, _ body: @autoclosure () throws(LinkError) -> LinkRequestOutcome<G>,
                                   granted: (G) -> (String, JSONValue)) -> LinkRequestReport {
        do {
            switch try body() {
            case .granted(let g):
                let (text, json) = granted(g)
                return LinkRequestReport(asked: asked, result: .granted, detail: text, granted: json)
            case .refused(let r):
                return LinkRequestReport(asked: asked, result: .refused, detail: "\(r.statusName) (in its \(r.answer))",
                                         status: r.status, refusedBy: "controller")
            case .timedOut(let t):
                return LinkRequestReport(asked: asked, result: .timedOut, detail: t.description)
            }
        } catch {
            switch error {
            case .parameter(let p): return LinkRequestReport(asked: asked, result: .refused, detail: p.description, refusedBy: "host")
            default: return LinkRequestReport(asked: asked, result: .notAsked, detail: error.description)
            }
        }
    }

    private static func seconds(_ d: Duration) -> String {
        "\(bearerSeconds(Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)) s"
    }
}


/// An LE PHY a link may be asked for (`--phy`): LE 1M, LE 2M or LE Coded (Vol 4 Part E §7.8.49).
public enum LinkPHYChoice: String, Sendable, CaseIterable {
    case le1M = "1m", le2M = "2m", coded
}

/// The link a command asks the controller for; nil members are left as they are. Ranges from Core Spec Vol 4
/// Part E §7.8.18 (LE Connection Update) and §7.8.33 (LE Set Data Length).
public struct LinkRequestOptions: Sendable, Equatable {
    /// Connection interval min and max in ms (7.5-4000 in steps of 1.25 ms; HCI units of 1.25 ms, 0x0006-0x0C80).
    public var interval: ClosedRange<Double>?
    /// Peripheral latency in connection events (0-499, 0x0000-0x01F3).
    public var latency: Int?
    /// Supervision timeout in ms (100-32000 in steps of 10 ms; HCI units of 10 ms, 0x000A-0x0C80).
    public var supervisionTimeoutMilliseconds: Int?
    /// The PHY, both directions.
    public var phy: LinkPHYChoice?
    /// LL data length (max TX octets, 27-251, 0x001B-0x00FB).
    public var dataLength: Int?

    /// Nothing asked for.
    public init() {}

    /// The interval's range in ms.
    public static let intervalRange: ClosedRange<Double> = 7.5...4000
    /// The latency's range in connection events.
    public static let latencyRange: ClosedRange<Int> = 0...499
    /// The supervision timeout's range in ms.
    public static let supervisionTimeoutRange: ClosedRange<Int> = 100...32000
    /// The data length's range in octets.
    public static let dataLengthRange: ClosedRange<Int> = 27...251

    /// True when nothing is asked for.
    public var isEmpty: Bool { interval == nil && latency == nil && supervisionTimeoutMilliseconds == nil && phy == nil && dataLength == nil }

    /// True when a connection update is asked for (interval, latency or supervision timeout).
    public var asksForConnectionUpdate: Bool { interval != nil || latency != nil || supervisionTimeoutMilliseconds != nil }

    /// The spec's rule between them, when all are known (Vol 6 Part B §4.5.2): the supervision timeout must be
    /// larger than (1 + latency) x interval max x 2. Nil when they agree; else what is wrong, in --option words.
    public var inconsistency: String? {
        guard let timeout = supervisionTimeoutMilliseconds, let interval else { return nil }
        let least = Double(1 + (latency ?? 0)) * interval.upperBound * 2
        guard Double(timeout) <= least else { return nil }
        return "--supervision-timeout: \(timeout) ms must be larger than (1 + latency \(latency ?? 0)) x interval max \(formatMilliseconds(interval.upperBound)) ms x 2 = \(formatMilliseconds(least)) ms (Core Spec Vol 6 Part B §4.5.2)"
    }
}

/// "7.5", "30", "1.25": a millisecond figure without float noise.
public func formatMilliseconds(_ ms: Double) -> String {
    ms == ms.rounded() ? String(Int(ms)) : String(ms)
}

extension HCIAdapter {
    /// `adapter`, or the first adapter that is up (else the first there is): the one the kernel would route by.
    public static func chosen(_ adapter: String?) throws(TransportError) -> String {
        if let adapter { return adapter }
        let adapters = try HCIAdapter.list()
        guard let a = adapters.first(where: \.isUp) ?? adapters.first else {
            throw TransportError.noSuchAdapter("hci0", available: [])
        }
        return a.name
    }
}

extension Peer {
    /// The link under CID 4 as it is now: the HCI link monitor's state over LE, else what the socket gives, else
    /// every value unknown and why (a unix: socket has no radio).
    public func linkState() -> LinkState {
        link?.state() ?? LinkState.read(bearer: transport.bearer)
    }
}
