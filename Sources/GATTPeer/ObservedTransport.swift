// A view of the PDUs between a GATT client and its bearer: a trace (every ATT PDU, decoded, with its direction and a
// timestamp, as lines to the caller's callback: the CLI's --trace) and the time Write Commands spent waiting on the
// socket's backpressure (`mirror bench`). The MTU is the client's to know (`GATTClient.mtu`), not sniffed here.
import ATTStack
import LinkCore
import Synchronization

/// An `ATTTransport` that forwards everything to another one and watches the PDUs go by (Core Spec Vol 3
/// Part F §3.4): while tracing, gives each as one line to `lines`
/// (`22:41:07.123456 > Write Request handle 0x0012 value [01 02]`; on an Enhanced ATT bearer the bearer follows the
/// direction: `> [b1 cid 0x0041] Write Request ...`); always notes how long sends waited after the socket reported EAGAIN.
public final class ObservedTransport: ATTTransport {
    public let inner: any ATTTransport
    /// Where the trace's lines go (the CLI's stderr); never called while not tracing.
    let lines: @Sendable (String) -> Void
    /// The bearer named on each trace line ("b1 cid 0x0041"), nil on the unenhanced bearer (lines as they always were).
    public let bearer: String?
    /// Whether PDUs are traced now (`--trace`; the shell's `trace on|off` changes it).
    let tracing: Atomic<Bool>
    /// Guards what was observed: the backpressure accounting.
    let observed = Lock<Observations>(Observations())
    /// Orders the trace's lines: held across a traced send and its line, and while a received PDU's line is
    /// printed (so `inner` must not deliver a PDU from within its own trySend).
    private let traceOrder = Lock<Void>(())
    /// Guards the closure told when the transport closes (the shell's lost-connection line), or the close's reason
    /// once it has closed: an observer that comes after the close learns it from `whenClosed`, not never.
    private let closeWatch = Lock<CloseWatch>(.open(observer: nil))
    /// Guards the sink that takes the inbound PDUs instead of the GATT client while `mirror check` drives the bearer
    /// (`divert`); `diverting` says whether there is one without taking the lock on every PDU.
    private let diversion = Lock<(any ATTTransportSink)?>(nil)
    private let diverting = Atomic<Bool>(false)
    /// Whether the trace has its `closed:` line: said once, by this host's close as it is asked (so that a process
    /// that exits right after closing still prints it), else when the bearer reports the end.
    private let closeTraced = Atomic<Bool>(false)

    /// What went by.
    public struct Observations: Sendable {
        /// Sends that found the socket full (EAGAIN).
        public var wouldBlockCount = 0
        /// Total time from a send finding the socket full to the socket becoming writable, in nanoseconds.
        public var blockedNanoseconds: UInt64 = 0
        /// When the current wait began (0 when none is running).
        var blockedSince: UInt64 = 0
    }

    /// Watches `inner`; gives every PDU's line to `lines` while tracing (`setTracing`), naming `bearer` on each.
    public init(_ inner: any ATTTransport, tracing: Bool, bearer: String? = nil, lines: @escaping @Sendable (String) -> Void) {
        self.inner = inner
        self.lines = lines
        self.bearer = bearer
        self.tracing = Atomic(tracing)
    }

    /// How a trace names an Enhanced ATT bearer: its index among the client's bearers and, when it is an L2CAP
    /// channel, its local CID ("b1 cid 0x0041"; Core Spec 5.4 Vol 3 Part A §2.1: dynamic CIDs from 0x0040).
    public static func bearerName(index: Int, localCID: UInt16?) -> String {
        guard let localCID else { return "b\(index)" }
        return "b\(index) cid \(ATTHex.handle(localCID))"
    }

    /// Starts or stops tracing PDUs.
    public func setTracing(_ on: Bool) { tracing.store(on, ordering: .relaxed) }

    public var isTracing: Bool { tracing.load(ordering: .relaxed) }

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

    public var observations: Observations { observed.withLock { $0 } }

    /// From now on every inbound PDU goes to `sink` instead of the GATT client above (nil: to the client again);
    /// the close goes to both. For `mirror check`, which reads every PDU itself while the client sends nothing.
    public func divert(to sink: (any ATTTransportSink)?) {
        diversion.withLock { $0 = sink }
        diverting.store(sink != nil, ordering: .releasing)
    }

    /// The sink taking the inbound PDUs now, if diverted.
    var diverted: (any ATTTransportSink)? {
        diverting.load(ordering: .acquiring) ? diversion.withLock { $0 } : nil
    }

    public var label: String { inner.label }

    public func start(_ sink: any ATTTransportSink) {
        inner.start(ObservingSink(sink, transport: self))
    }

    /// The inner transport's loop: the engine above runs on it, and every delivery goes through `ObservingSink`.
    public var eventLoop: EventLoop? { inner.eventLoop }

    public func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        let result: ATTSendResult
        if isTracing {
            // The send and its line under `traceOrder`: the reader prints the answer under it too, so a request's
            // line always precedes its response's, though the answer can arrive before trySend returns.
            result = try traceOrder.withLock { _ throws(TransportError) in
                let r = try inner.trySend(pdu)
                if r == .sent {
                    lines(traceLine(direction: ">", bytes: Array(pdu.bindMemory(to: UInt8.self)), at: unixNow(), bearer: bearer))
                }
                return r
            }
        } else {
            result = try inner.trySend(pdu)
        }
        if result != .sent {
            let now = monotonicNanoseconds()
            observed.withLock { o in
                o.wouldBlockCount += 1
                if o.blockedSince == 0 { o.blockedSince = now }
            }
        }
        return result
    }

    public func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        inner.whenWritable { [self] in
            let now = monotonicNanoseconds()
            observed.withLock { o in
                if o.blockedSince != 0 {
                    o.blockedNanoseconds += now - o.blockedSince
                    o.blockedSince = 0
                }
            }
            callback()
        }
    }

    public func close(reason: String) {
        if isTracing { traceClosed(.closedLocally(reason: reason)) }
        inner.close(reason: reason)
    }

    /// The trace's one `closed:` line.
    private func traceClosed(_ reason: TransportError) {
        guard !closeTraced.exchange(true, ordering: .acquiringAndReleasing) else { return }
        lines("\(clockTime(unixSeconds: unixNow(), digits: 6)) -\(bearer.map { " [\($0)]" } ?? "") closed: \(reason)")
    }

    func received(_ pdu: [UInt8]) {
        if isTracing {
            traceOrder.withLock { _ in lines(traceLine(direction: "<", bytes: pdu, at: unixNow(), bearer: bearer)) }
        }
    }

    func closed(_ reason: TransportError) {
        if isTracing { traceClosed(reason) }
        let observer = closeWatch.withLock { watch -> (@Sendable (TransportError) -> Void)? in
            guard case .open(let observer) = watch else { return nil }
            watch = .closed(reason)
            return observer
        }
        observer?(reason)
    }
}

/// Notes what arrives, then passes it on.
final class ObservingSink: ATTTransportSink {
    let next: any ATTTransportSink
    let transport: ObservedTransport

    init(_ next: any ATTTransportSink, transport: ObservedTransport) {
        self.next = next
        self.transport = transport
    }

    func transport(didReceive pdu: [UInt8]) {
        transport.received(pdu)
        (transport.diverted ?? next).transport(didReceive: pdu)
    }

    /// Without a trace nothing here reads the PDU: it goes on in the bearer's buffer, uncopied.
    func transport(didReceiveBytes pdu: UnsafeRawBufferPointer) {
        if !transport.isTracing {
            (transport.diverted ?? next).transport(didReceiveBytes: pdu)
        } else {
            transport(didReceive: Array(pdu))
        }
    }

    func transport(didCloseWith reason: TransportError) {
        transport.closed(reason)
        transport.diverted?.transport(didCloseWith: reason)
        next.transport(didCloseWith: reason)
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
