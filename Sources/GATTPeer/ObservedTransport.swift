// A watch on the PDUs between a GATT client and its bearer: a trace (every ATT PDU, decoded, with its direction and a
// timestamp, as lines to the caller's callback: the CLI's --trace), the bearer's backpressure (`mirror bench`), the
// close (the shell's lost-connection line) and `mirror check`'s diversion; a tap on the bearer, not a decorator.
import ATTStack
import LinkCore
import LinuxBluetooth
import Synchronization

/// The watch on one socket bearer (Core Spec Vol 3 Part F §3.4), kept out of its data path: the bearer calls it
/// (`ATTBearerTap`) only while tracing, on this host's close and at its end, so an untraced bearer's PDUs pass no
/// decorator. While tracing, gives each PDU as one line to `lines` (`22:41:07.123456 > Write Request handle 0x0012
/// value [01 02]`; on an Enhanced ATT bearer its name follows the direction: `> [b1 cid 0x0041] Write Request ...`).
public final class ObservedTransport: ATTBearerTap {
    /// The bearer watched; the GATT client sends on it directly.
    public let bearer: ATTBearer
    /// Where the trace's lines go (the CLI's stderr); never called while not tracing.
    let lines: @Sendable (String) -> Void
    /// The bearer named on each trace line ("b1 cid 0x0041"), nil on the unenhanced bearer (lines as they always were).
    public let name: String?
    /// Guards the closure told when the transport closes (the shell's lost-connection line), or the close's reason
    /// once it has closed: an observer that comes after the close learns it from `whenClosed`, not never.
    private let closeWatch = Lock<CloseWatch>(.open(observer: nil))
    /// Whether the trace has its `closed:` line: said once, by this host's close as it is asked (so that a process
    /// that exits right after closing still prints it), else when the bearer reports the end.
    private let closeTraced = Atomic<Bool>(false)

    /// What went by: the bearer's backpressure (sends that found the socket full, and the time they waited).
    public typealias Observations = ATTBearer.Backpressure

    /// Watches `bearer`; gives every PDU's line to `lines` while tracing (`setTracing`), naming `name` on each.
    public init(_ bearer: ATTBearer, tracing: Bool, name: String? = nil, lines: @escaping @Sendable (String) -> Void) {
        self.bearer = bearer
        self.lines = lines
        self.name = name
        bearer.observe(with: self, tracing: tracing)
    }

    /// How a trace names an Enhanced ATT bearer: its index among the client's bearers and, when it is an L2CAP
    /// channel, its local CID ("b1 cid 0x0041"; Core Spec 5.4 Vol 3 Part A §2.1: dynamic CIDs from 0x0040).
    public static func bearerName(index: Int, localCID: UInt16?) -> String {
        guard let localCID else { return "b\(index)" }
        return "b\(index) cid \(ATTHex.handle(localCID))"
    }

    /// Starts or stops tracing PDUs.
    public func setTracing(_ on: Bool) { bearer.setTracing(on) }

    /// Whether PDUs are traced now (`--trace`; the shell's `trace on|off` changes it): the bearer's flag, the one it
    /// calls the tap by.
    public var isTracing: Bool { bearer.isTracing }

    /// The bearer's label ("unix:/tmp/sim.sock", "00:AA:01:01:00:01 (LE public) via hci0").
    public var label: String { bearer.label }

    /// `body` is told the reason once the transport closes (either side). Closed already (a link that ended between
    /// its connect and this call): returns the reason and never calls `body`.
    @discardableResult
    public func whenClosed(_ body: @escaping @Sendable (TransportError) -> Void) -> TransportError? {
        closeWatch.withLock { watch in
            if case .closed(let reason) = watch { return reason }
            watch = .open(observer: body)
            return nil
        }
    }

    /// The close's observer until the transport closes, then why it closed.
    private enum CloseWatch {
        case open(observer: (@Sendable (TransportError) -> Void)?)
        case closed(TransportError)
    }

    public var observations: Observations { bearer.backpressure }

    /// From now on every inbound PDU goes to `sink` instead of the GATT client above (nil: to the client again);
    /// the close goes to both. For `mirror check`, which reads every PDU itself while the client sends nothing.
    public func divert(to sink: (any ATTTransportSink)?) { bearer.divert(to: sink) }

    // MARK: ATTBearerTap

    public func bearer(sent pdu: UnsafeRawBufferPointer) {
        lines(traceLine(direction: ">", bytes: Array(pdu), at: unixNow(), bearer: name))
    }

    public func bearer(received pdu: UnsafeRawBufferPointer) {
        lines(traceLine(direction: "<", bytes: Array(pdu), at: unixNow(), bearer: name))
    }

    public func bearer(closing reason: TransportError) { traceClosed(reason) }

    public func bearer(ended reason: TransportError) {
        if isTracing { traceClosed(reason) }
        let observer = closeWatch.withLock { watch -> (@Sendable (TransportError) -> Void)? in
            guard case .open(let observer) = watch else { return nil }
            watch = .closed(reason)
            return observer
        }
        observer?(reason)
    }

    /// The trace's one `closed:` line.
    private func traceClosed(_ reason: TransportError) {
        guard !closeTraced.exchange(true, ordering: .acquiringAndReleasing) else { return }
        lines("\(clockTime(unixSeconds: unixNow(), digits: 6)) -\(name.map { " [\($0)]" } ?? "") closed: \(reason)")
    }
}

/// One trace line: time, ">" sent or "<" received, the bearer in brackets when named (an Enhanced ATT bearer), the
/// decoded PDU (or why it does not decode, and its bytes).
public func traceLine(direction: String, bytes: [UInt8], at time: Double, bearer: String? = nil) -> String {
    let decoded: String
    do {
        decoded = try ATTPDU.decode(bytes).description
    } catch {
        decoded = "undecodable: \(error) [\(ATTHex.string(bytes, separator: " "))]"
    }
    guard let bearer else { return "\(clockTime(unixSeconds: time, digits: 6)) \(direction) \(decoded)" }
    return "\(clockTime(unixSeconds: time, digits: 6)) \(direction) [\(bearer)] \(decoded)"
}
