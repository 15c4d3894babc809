// Watching and asking for one LE link through raw HCI: one reader (a source of the link's loop, or a thread of its own
// without one) owns the socket's events, keeps the
// link's values per handle from the events (Core Spec 5.4 Vol 4 Part E §7.7.65), and the requests (§7.8.18, §7.8.49,
// §7.8.33) send a command and wait, each under a named limit, for its answer and its completion event.

import ATTStack
import LinkCore
import CBlueZSocket
import Glibc

/// One HCI packet of the link as the monitor saw it or sent it: for --trace and btsnoop.
public struct HCILinkRecord: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case command(HCICommand)
        case event(HCIEvent)
    }
    public var kind: Kind
    /// The packet with its H4 type byte first (0x01 command, 0x04 event).
    public var packet: [UInt8]
    /// Microseconds since 1970 (CLOCK_REALTIME), as btsnoop records it.
    public var timestampMicroseconds: Int64

    public init(kind: Kind, packet: [UInt8], timestampMicroseconds: Int64) {
        self.kind = kind
        self.packet = packet
        self.timestampMicroseconds = timestampMicroseconds
    }
}

/// Why the monitor or a request could not work at all (an outcome of the controller is a LinkRequestOutcome).
public enum LinkError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Raw HCI events or LE commands need a capability this process lacks.
    case needsCapability(what: String, capability: String, setcap: String)
    /// No link handle is known yet: bind the monitor to the bearer first.
    case notBound
    /// A command's parameter is outside the Core Spec's range.
    case parameter(HCIParameterError)
    /// A socket call failed.
    case transport(TransportError)
    /// The link ended while a request waited: the Disconnection Complete reason.
    case disconnected(handle: UInt16, reason: UInt8)
    /// The monitor was closed, or its socket ended.
    case closed

    public var description: String {
        switch self {
        case .needsCapability(let what, let capability, let setcap):
            return "\(what) needs \(capability), which this process lacks: run `\(setcap)`, or run as root"
        case .notBound: return "the link monitor does not know the link's connection handle yet (bind it to the bearer first)"
        case .parameter(let e): return e.description
        case .transport(let e): return e.description
        case .disconnected(let handle, let reason):
            return "the link (handle \(ATTHex.handle(handle))) disconnected: \(HCIStatus.describe(reason))"
        case .closed: return "the link monitor is closed"
        }
    }
}

/// A controller's refusal: the HCI status in the event that carried it.
public struct HCIRefusal: Sendable, Equatable, CustomStringConvertible {
    public var command: String
    public var status: UInt8
    /// "Command Status", "Command Complete", "LE Connection Update Complete", ...
    public var answer: String
    public init(command: String, status: UInt8, answer: String) { self.command = command; self.status = status; self.answer = answer }

    /// "0x3B Unacceptable Connection Parameters".
    public var statusName: String { HCIStatus.describe(status) }
    public var description: String { "\(command) refused with HCI status \(statusName) (in its \(answer))" }
}

/// A wait that reached its limit: what it waited for, for which handle, and the limit.
public struct LinkWaitTimeout: Sendable, Equatable, CustomStringConvertible {
    public var waitedFor: String
    public var handle: UInt16?
    public var limit: Duration
    public init(waitedFor: String, handle: UInt16?, limit: Duration) { self.waitedFor = waitedFor; self.handle = handle; self.limit = limit }

    /// "no LE Connection Update Complete for handle 0x0040 within 10 s".
    public var description: String {
        let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
        return "no \(waitedFor)\(handle.map { " for handle \(ATTHex.handle($0))" } ?? "") within \(bearerSeconds(seconds)) s"
    }
}

/// What the controller did with a request.
public enum LinkRequestOutcome<Granted: Sendable & Equatable>: Sendable, Equatable {
    /// The completion event's values.
    case granted(Granted)
    /// A non-zero status: the connection is as it was.
    case refused(HCIRefusal)
    case timedOut(LinkWaitTimeout)
}

/// The PHY values of LE PHY Update Complete or LE Read PHY (1 LE 1M, 2 LE 2M, 3 LE Coded).
public struct LinkPHYs: Sendable, Equatable {
    public var tx: UInt8
    public var rx: UInt8
    public init(tx: UInt8, rx: UInt8) { self.tx = tx; self.rx = rx }
    public var txPHY: LinkPHY? { LinkPHY(hciValue: tx) }
    public var rxPHY: LinkPHY? { LinkPHY(hciValue: rx) }
}

/// The named limits of a request's waits.
public struct LinkRequestLimits: Sendable, Equatable {
    /// For Command Status or Command Complete (the controller's first answer).
    public var commandAnswer: Duration
    /// For the completion event (LE Connection Update Complete, LE PHY Update Complete): link-layer procedures
    /// take some connection events, up to the instant the peer agrees to.
    public var completion: Duration
    /// For LE Data Length Change after a successful LE Set Data Length: none comes when nothing changed.
    public var dataLengthChange: Duration

    public init(commandAnswer: Duration = .seconds(2), completion: Duration = .seconds(10), dataLengthChange: Duration = .seconds(2)) {
        self.commandAnswer = commandAnswer
        self.completion = completion
        self.dataLengthChange = dataLengthChange
    }
}

/// Watches one adapter's link events through raw HCI and asks for link changes. Open it BEFORE the ATT connect so it
/// sees the link's LE Connection Complete; bind it to the bearer's handle once connected; `close()` when done.
/// With a `loop` its socket is a source of that loop (the link's: no thread of its own); without one a reader thread
/// ("hci-link") serves it, for a caller with no loop (a test, a tool). Either way the monitor owns the socket: it is
/// taken out of the loop's set before it is closed.
public final class HCILinkMonitor: Sendable {
    public let adapter: HCIAdapter
    /// Whether the filter passes LE Meta events (CAP_NET_RAW); without it only Disconnection Complete, Encryption
    /// Change and Command Complete/Status come (the kernel's hci_sec_filter, net/bluetooth/hci_sock.c).
    public let receivesLEEvents: Bool
    /// The events the monitor asks the kernel for: Disconnection Complete, Encryption Change, Command Complete and
    /// Status, LE Meta. Not Number Of Completed Packets (Vol 4 Part E §7.7.19): it comes for every ACL packet sent,
    /// so it would wake this reader on every write, and it says nothing about the link's parameters.
    public static let watchedEvents: [UInt8] = [0x05, 0x08, 0x0E, 0x0F, 0x3E]
    /// Events kept for waiters and, per handle, before the monitor is bound.
    static let logLimit = 256

    private let socket: HCISocket
    /// The reader thread's wake-up (-1 on a loop).
    private let wake: Int32
    /// The loop whose source the socket is, and its token there; nil: the reader thread.
    private let loop: EventLoop?
    private let token: UInt64
    private let sink: (@Sendable (HCILinkRecord) -> Void)?
    // Held while a record goes to the sink, around the state lock: records reach the sink one at a time, in order.
    private let delivery = Lock(())
    private let state: Lock<MonitorState>

    /// Opens a raw HCI socket on `adapter` with the link events' filter. Throws `.needsCapability` when the kernel
    /// keeps LE Meta events out (no CAP_NET_RAW), unless `allowUnprivileged` (then only the reasons and encryption come).
    public convenience init(adapter selector: String, allowUnprivileged: Bool = false, loop: EventLoop? = nil,
                            sink: (@Sendable (HCILinkRecord) -> Void)? = nil) throws(LinkError) {
        let socket: HCISocket
        do { socket = try HCISocket(adapter: selector) } catch { throw .transport(error) }
        let events = Self.watchedEvents
        do { try socket.setEventFilter(events) } catch { throw .transport(error) }
        let le = cbz_hci_filter_passes(socket.fd, 0x3E) == 1
        if !le && !allowUnprivileged {
            let check = Capabilities.checkRawHCI()
            throw .needsCapability(what: "watching the link's HCI events (LE Meta)", capability: "CAP_NET_RAW", setcap: check.setcapCommand)
        }
        try self.init(socket: socket, receivesLEEvents: le, loop: loop, sink: sink)
    }

    /// Takes `fd` as the raw HCI socket of `adapter` (tests drive a scripted controller over a socketpair).
    convenience init(adopting fd: Int32, adapter: HCIAdapter, receivesLEEvents: Bool = true, loop: EventLoop? = nil,
                     sink: (@Sendable (HCILinkRecord) -> Void)? = nil) throws(LinkError) {
        try self.init(socket: HCISocket(adopting: fd, adapter: adapter), receivesLEEvents: receivesLEEvents, loop: loop, sink: sink)
    }

    private init(socket: HCISocket, receivesLEEvents: Bool, loop: EventLoop?, sink: (@Sendable (HCILinkRecord) -> Void)?) throws(LinkError) {
        let wake = loop == nil ? cbz_eventfd() : -1
        if loop == nil, wake < 0 { throw .transport(.socket(lastSocketError("eventfd", "the link monitor's wake-up", .local))) }
        self.socket = socket
        self.adapter = socket.adapter
        self.receivesLEEvents = receivesLEEvents
        self.wake = wake
        self.loop = loop
        self.token = loop?.makeSourceToken() ?? 0
        self.sink = sink
        self.state = Lock(MonitorState())
        guard let loop else {
            startDetachedThread { [self] in
                _ = cbz_set_thread_name("hci-link")
                self.readLoop()
            }
            return
        }
        // The source's handler holds the monitor until `close` (or the socket's end) takes it out of the set.
        let register = { @Sendable [self] in
            guard !state.withLock({ $0.closing }) else { return endSource() }
            if !loop.register(fd: socket.fd, token: token, events: CBZ_EPOLLIN, { [self] _ in sourceReadable() }) {
                state.withLockBroadcasting { $0.readerDone = true }
            }
        }
        if loop.inEventLoop { register() } else { loop.execute(register) }
    }

    // Only reachable once the reader has ended (its thread, or the loop's source, holds the monitor while it runs).
    deinit { if wake >= 0 { _ = cbz_close(wake) } }

    /// Stops the reader: signals it and waits for it at most `limit` (it leaves its poll at once). On a loop the
    /// source is taken out of the set (at once on the loop's thread, else posted there and waited for).
    public func close(limit: Duration = .seconds(2)) {
        let first = state.withLock { s in
            defer { s.closing = true }
            return !s.closing
        }
        if let loop {
            if loop.inEventLoop { return endSource() }
            if first { loop.execute { [self] in endSource() } }
        } else if first {
            _ = cbz_eventfd_signal(wake)
        }
        let ns = Int(limit.components.seconds) * 1_000_000_000 + Int(limit.components.attoseconds / 1_000_000_000)
        _ = state.wait(until: { $0.readerDone ? () : nil }, timeoutNanoseconds: ns)
    }

    /// On the loop's thread: the socket leaves the loop's set (before it can be closed) and the reader is done.
    private func endSource() {
        guard let loop, !state.withLock({ $0.readerDone }) else { return }
        loop.deregister(fd: socket.fd, token: token)
        state.withLockBroadcasting { $0.readerDone = true }
    }

    /// The loop's source: reads what the socket holds (level-triggered: what is left wakes the next wait).
    /// A close from another thread is posted: nothing more is read once it is asked for; a socket that ended or
    /// failed ends the source, and requests then fail as closed.
    private func sourceReadable() {
        EventLoop.readBatch(stopping: { state.withLock { $0.closing } }, { readOne() }, end: { endSource() })
    }

    /// One datagram from the socket without blocking, to `receive`: true when one came, false when none was there,
    /// nil when the socket ended or failed.
    private func readOne() -> Bool? {
        var buffer = [UInt8](repeating: 0, count: 260)
        var truncated: Int32 = 0
        let got = buffer.withUnsafeMutableBytes { cbz_recv_datagram(socket.fd, $0.baseAddress, $0.count, &truncated) }
        if got < 0 { return cbz_errno() == EAGAIN || cbz_errno() == EINTR ? false : nil }
        if got == 0 { return nil }
        receive(Array(buffer.prefix(got)))
        return true
    }

    /// Waits for `pick` to find what it waits for in the state, at most `ns`; a `pick` that sees the reader done
    /// says so itself. On the loop's thread (a request from the link's code) the source cannot run meanwhile, so the
    /// wait reads the socket itself (BlockingWait: signals are still taken); elsewhere the reader wakes it.
    private func waitForState<T>(timeoutNanoseconds ns: Int, _ pick: (inout MonitorState) -> T?) -> T? {
        guard let loop, loop.inEventLoop else { return state.wait(until: pick, timeoutNanoseconds: ns) }
        let deadline = monotonicNanoseconds() + UInt64(max(0, ns))
        while true {
            if let found = state.withLock({ pick(&$0) }) { return found }
            let now = monotonicNanoseconds()
            if now >= deadline { return nil }
            let ms = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
            let ready = BlockingWait.poll(fd: socket.fd, events: Int16(CBZ_POLLIN), timeoutMilliseconds: ms)
            if ready < 0 { endSource(); continue }
            if ready > 0, readOne() == nil { endSource() }
        }
    }

    // MARK: The link

    /// Binds the monitor to our link: its events go to the sink from now on, with those seen before (in order).
    public func bind(handle: UInt16) {
        delivery.withLock { _ in
            let earlier = state.withLock { s -> [HCILinkRecord] in
                s.bound = handle
                defer { s.unbound.removeAll() }
                return s.unbound.filter { $0.handles.contains(handle) }.map(\.record)
            }
            for r in earlier { sink?(r) }
        }
    }

    /// Binds to `bearer`'s link, by its handle from L2CAP_CONNINFO. Returns the handle.
    @discardableResult
    public func bind(to bearer: ATTBearer) throws(LinkError) -> UInt16 {
        let handle: UInt16
        do { handle = try bearer.connectionHandle() } catch { throw .transport(error) }
        bind(handle: handle)
        return handle
    }

    /// The bound handle, nil before `bind`.
    public var boundHandle: UInt16? { state.withLock { $0.bound } }

    /// What the events told about the bound link; values no event gave are unknown with the event they need.
    public func eventState() -> LinkState? {
        state.withLock { s in s.bound.map { s.links[$0] ?? MonitorState.fresh() } }
    }

    /// The Disconnection Complete reason of the bound link (or of `handle`), nil while none came.
    public func disconnectReason(handle: UInt16? = nil) -> UInt8? {
        state.withLock { s in (handle ?? s.bound).flatMap { s.disconnectReasons[$0] } }
    }

    /// Waits up to `limit` for the bound link's Disconnection Complete (an error for a lost link names its reason;
    /// the event may come just after the socket's error). Nil when none came within the limit or the monitor ended.
    public func awaitDisconnectReason(limit: Duration) -> UInt8? {
        awaitEvent(limit: limit) { s in s.bound.flatMap { s.disconnectReasons[$0] } }
    }

    /// Waits up to `limit` for an Encryption Change that failed on any link of the adapter since the monitor opened
    /// (a connect with BT_SECURITY fails with EACCES as the kernel handles it): its status, as 0x06 PIN or Key
    /// Missing when the peer has no key for the bond (Vol 4 Part E §7.7.8). Nil when none came.
    public func awaitEncryptionFailure(limit: Duration) -> UInt8? {
        awaitEvent(limit: limit) { $0.encryptionFailure }
    }

    /// The one wait for an event the reader records: `pick` finds it; nil at `limit` or when
    /// the reader has ended.
    private func awaitEvent<T>(limit: Duration, _ pick: @escaping (MonitorState) -> T?) -> T? {
        let ns = Int(limit.components.seconds) * 1_000_000_000 + Int(limit.components.attoseconds / 1_000_000_000)
        let found: T?? = waitForState(timeoutNanoseconds: ns) { s -> T?? in
            if let value = pick(s) { return .some(value) }
            return s.readerDone ? .some(nil) : nil
        }
        return found ?? nil
    }

    /// Everything known about `bearer`'s link: what the kernel tells without privilege (LinkState.read), the values
    /// the events gave, and, with CAP_NET_RAW, LE Read PHY and LE Read Buffer Size for what is still unknown.
    public func linkState(bearer: ATTBearer, limits: LinkRequestLimits = .init()) -> LinkState {
        var s = LinkState.read(bearer: bearer)
        guard receivesLEEvents, let events = eventState() else { return s }
        s.intervalMilliseconds = events.intervalMilliseconds
        s.peripheralLatency = events.peripheralLatency
        s.supervisionTimeoutMilliseconds = events.supervisionTimeoutMilliseconds
        s.dataLength = events.dataLength
        s = s.updated(with: events)
        if s.txPHY.value == nil || s.rxPHY.value == nil {
            let earlier = prefetched.current.phy
            switch Result(catching: { () throws(LinkError) in
                if let earlier { return earlier }
                return try readPHY(limits: limits)
            }) {
            case .success(.granted(let phys)):
                let source = LinkSource.hciCommand("LE Read PHY")
                if let tx = phys.txPHY { s.txPHY = .known(tx, source: source) }
                if let rx = phys.rxPHY { s.rxPHY = .known(rx, source: source) }
            case .success(.refused(let r)) where r.status == 0x01:
                // LE Read PHY is mandatory where LE 2M or LE Coded is supported (Vol 4 Part E §3.1.1, Core 5.0):
                // a controller that does not know it has only LE 1M.
                let source = LinkSource.hciCommand("LE Read PHY refused with 0x01 Unknown HCI Command: a controller without it has only LE 1M")
                s.txPHY = s.txPHY.or(.known(.le1M, source: source))
                s.rxPHY = s.rxPHY.or(.known(.le1M, source: source))
            case .success(.refused(let r)):
                let why = LinkUnknown.unavailable("no LE PHY Update Complete seen on this link, and LE Read PHY was refused with \(r.statusName)")
                (s.txPHY, s.rxPHY) = (s.txPHY.or(.unknown(why)), s.rxPHY.or(.unknown(why)))
            case .success(.timedOut(let t)):
                let why = LinkUnknown.unavailable("no LE PHY Update Complete seen on this link, and LE Read PHY got no answer: \(t)")
                (s.txPHY, s.rxPHY) = (s.txPHY.or(.unknown(why)), s.rxPHY.or(.unknown(why)))
            case .failure: break
            }
        }
        let earlierBuffers = prefetched.current.buffers
        if s.adapterLEBuffers.value == nil, case .granted(let buffers)? = earlierBuffers ?? (try? readLEBufferSize(limits: limits)) {
            if let buffers {
                s.adapterLEBuffers = .known(buffers, source: .hciCommand("LE Read Buffer Size"))
            } else if let a = try? HCIAdapter.info(index: adapter.index), a.aclMTU > 0 {
                s.adapterLEBuffers = .known(LinkBuffers(size: a.aclMTU, count: a.aclPackets),
                                            source: .ioctl("HCIGETDEVINFO (LE Read Buffer Size gave 0: LE shares the BR/EDR buffers)"))
            }
        }
        return s
    }

    /// LE Read PHY and LE Read Buffer Size as answered while the capability keeper lived (Privilege): `linkState`
    /// uses them once the process can no longer send an LE command.
    private let prefetched = Lock<(phy: LinkRequestOutcome<LinkPHYs>?, buffers: LinkRequestOutcome<LinkBuffers?>?)>((nil, nil))

    /// Sends LE Read PHY and LE Read Buffer Size now, while the keeper holds CAP_NET_RAW, for `linkState` to use
    /// after the drop (a PHY Update Complete seen later still wins: it is newer).
    public func prefetchPrivilegedReads(limits: LinkRequestLimits = .init()) {
        guard receivesLEEvents, boundHandle != nil else { return }
        let phy = try? readPHY(limits: limits)
        let buffers = try? readLEBufferSize(limits: limits)
        prefetched.withLock { $0 = (phy, buffers) }
    }

    /// Reads the state under its lock (tests).
    func stateForTests<T>(_ body: (MonitorState) -> T) -> T { state.withLock { body($0) } }

    // MARK: Requests

    /// LE Connection Update for the bound link; granted with the values of its LE Connection Update Complete.
    public func requestConnectionUpdate(intervalMinUnits: UInt16, intervalMaxUnits: UInt16, latency: UInt16,
                                        supervisionTimeoutUnits: UInt16,
                                        limits: LinkRequestLimits = .init()) throws(LinkError) -> LinkRequestOutcome<LEConnectionUpdateComplete> {
        let handle = try requireLink("asking for connection parameters (LE Connection Update)")
        let command: HCICommand
        do {
            command = try .leConnectionUpdate(handle: handle, intervalMinUnits: intervalMinUnits, intervalMaxUnits: intervalMaxUnits,
                                              latency: latency, supervisionTimeoutUnits: supervisionTimeoutUnits)
        } catch { throw .parameter(error) }
        return try request(command, handle: handle, limits: limits, completion: "LE Connection Update Complete") { event in
            guard case .leConnectionUpdateComplete(let u) = event, u.handle == handle else { return nil }
            return (u.status, u)
        }
    }

    /// LE Set PHY for the bound link; granted with the PHYs of its LE PHY Update Complete.
    public func requestPHY(tx: LinkPHY, rx: LinkPHY, limits: LinkRequestLimits = .init()) throws(LinkError) -> LinkRequestOutcome<LinkPHYs> {
        let handle = try requireLink("asking for a PHY (LE Set PHY)")
        let command: HCICommand
        do { command = try .leSetPHY(handle: handle, txPHYs: tx.setPHYBit, rxPHYs: rx.setPHYBit) } catch { throw .parameter(error) }
        return try request(command, handle: handle, limits: limits, completion: "LE PHY Update Complete") { event in
            guard case .lePHYUpdateComplete(let status, let h, let t, let r) = event, h == handle else { return nil }
            return (status, LinkPHYs(tx: t, rx: r))
        }
    }

    /// LE Set Data Length for the bound link with TX_Time computed for `phy`; granted with its LE Data Length
    /// Change, or nil when the controller accepted and nothing changed within `limits.dataLengthChange`.
    public func requestDataLength(octets: Int, phy: LinkPHY, limits: LinkRequestLimits = .init()) throws(LinkError) -> LinkRequestOutcome<LEDataLengthChange?> {
        let handle = try requireLink("asking for a data length (LE Set Data Length)")
        let command: HCICommand
        do {
            command = try .leSetDataLength(handle: handle, txOctets: UInt16(clamping: octets),
                                           txTime: HCICommand.dataLengthTxTime(octets: octets, phy: phy))
        } catch { throw .parameter(error) }
        let seq = try send(command)
        switch try awaitAnswer(command, after: seq, limit: limits.commandAnswer) {
        case .refused(let r): return .refused(r)
        case .timedOut(let t): return .timedOut(t)
        case .granted:
            let change = try awaitEvent(after: seq, handle: handle, limit: limits.dataLengthChange) { event -> LEDataLengthChange? in
                guard case .leDataLengthChange(let d) = event, d.handle == handle else { return nil }
                return d
            }
            return .granted(change)
        }
    }

    /// LE Read PHY for the bound link.
    public func readPHY(limits: LinkRequestLimits = .init()) throws(LinkError) -> LinkRequestOutcome<LinkPHYs> {
        let handle = try requireLink("reading the PHY (LE Read PHY)")
        let command: HCICommand
        do { command = try .leReadPHY(handle: handle) } catch { throw .parameter(error) }
        let seq = try send(command)
        switch try awaitAnswer(command, after: seq, limit: limits.commandAnswer) {
        case .refused(let r): return .refused(r)
        case .timedOut(let t): return .timedOut(t)
        case .granted(let ret):
            guard ret.count >= 4 else { return .refused(HCIRefusal(command: command.name, status: 0x12, answer: "Command Complete (too short)")) }
            return .granted(LinkPHYs(tx: ret[2], rx: ret[3]))
        }
    }

    /// LE Read Buffer Size: the LE ACL buffers, nil when LE shares the BR/EDR buffers (a length of 0).
    public func readLEBufferSize(limits: LinkRequestLimits = .init()) throws(LinkError) -> LinkRequestOutcome<LinkBuffers?> {
        try requirePrivilege("reading the LE buffers (LE Read Buffer Size)")
        let command = HCICommand.leReadBufferSize
        let seq = try send(command)
        switch try awaitAnswer(command, after: seq, limit: limits.commandAnswer) {
        case .refused(let r): return .refused(r)
        case .timedOut(let t): return .timedOut(t)
        case .granted(let ret):
            guard ret.count >= 3 else { return .refused(HCIRefusal(command: command.name, status: 0x12, answer: "Command Complete (too short)")) }
            let size = Int(ret.littleEndianUInt16(at: 0))
            return .granted(size == 0 ? nil : LinkBuffers(size: size, count: Int(ret[2])))
        }
    }

    // MARK: Sending and waiting

    private func requirePrivilege(_ what: String) throws(LinkError) {
        if !receivesLEEvents {
            throw .needsCapability(what: what, capability: "CAP_NET_RAW", setcap: Capabilities.checkRawHCI().setcapCommand)
        }
    }

    private func requireLink(_ what: String) throws(LinkError) -> UInt16 {
        try requirePrivilege(what)
        guard let handle = boundHandle else { throw .notBound }
        if let reason = disconnectReason(handle: handle) { throw .disconnected(handle: handle, reason: reason) }
        return handle
    }

    /// Sends `command` (to the sink first, so that it precedes its answer) and returns the event sequence number
    /// from which its answers count.
    private func send(_ command: HCICommand) throws(LinkError) -> Int {
        let packet = [0x01, UInt8(command.opcode & 0xFF), UInt8(command.opcode >> 8), UInt8(clamping: command.parameters.count)] + command.parameters
        let record = HCILinkRecord(kind: .command(command), packet: packet, timestampMicroseconds: BTSnoopWriter.timestamp())
        return try delivery.withLock { _ throws(LinkError) -> Int in
            let seq = try state.withLock { s throws(LinkError) -> Int in
                if s.closing || s.readerDone { throw .closed }
                s.sentOpcodes.insert(command.opcode)
                return s.nextSeq
            }
            do throws(TransportError) { try socket.send(command) } catch {
                if case .socket(let e) = error, e.errno == .notPermitted {
                    throw .needsCapability(what: "sending \(command.name)", capability: "CAP_NET_RAW", setcap: Capabilities.checkRawHCI().setcapCommand)
                }
                throw .transport(error)
            }
            sink?(record)
            return seq
        }
    }

    /// The Command Status or Command Complete of `command`: granted with the return parameters after the status.
    private func awaitAnswer(_ command: HCICommand, after seq: Int, limit: Duration) throws(LinkError) -> LinkRequestOutcome<[UInt8]> {
        let answer = try awaitEvent(after: seq, handle: nil, limit: limit) { event -> (String, UInt8, [UInt8])? in
            switch event {
            case .commandStatus(let op, let status) where op == command.opcode: return ("Command Status", status, [])
            case .commandComplete(let op, let ret) where op == command.opcode: return ("Command Complete", ret.first ?? 0, Array(ret.dropFirst()))
            default: return nil
            }
        }
        guard let (kind, status, ret) = answer else {
            return .timedOut(LinkWaitTimeout(waitedFor: "Command Status or Command Complete for \(command.name)", handle: nil, limit: limit))
        }
        if status != 0 { return .refused(HCIRefusal(command: command.name, status: status, answer: kind)) }
        return .granted(ret)
    }

    /// Command Status, then the completion event `match` recognises (its status and value).
    private func request<G>(_ command: HCICommand, handle: UInt16, limits: LinkRequestLimits, completion name: String,
                            _ match: @escaping (HCIEvent) -> (UInt8, G)?) throws(LinkError) -> LinkRequestOutcome<G> {
        let seq = try send(command)
        switch try awaitAnswer(command, after: seq, limit: limits.commandAnswer) {
        case .refused(let r): return .refused(r)
        case .timedOut(let t): return .timedOut(t)
        case .granted: break
        }
        guard let (status, value) = try awaitEvent(after: seq, handle: handle, limit: limits.completion, match) else {
            return .timedOut(LinkWaitTimeout(waitedFor: name, handle: handle, limit: limits.completion))
        }
        if status != 0 { return .refused(HCIRefusal(command: command.name, status: status, answer: name)) }
        return .granted(value)
    }

    /// The first event from sequence number `seq` on that `match` recognises, or nil after `limit`. Throws when the
    /// link `handle` disconnects or the monitor ends meanwhile.
    private func awaitEvent<T>(after seq: Int, handle: UInt16?, limit: Duration,
                               _ match: (HCIEvent) -> T?) throws(LinkError) -> T? {
        let ns = Int(limit.components.seconds) * 1_000_000_000 + Int(limit.components.attoseconds / 1_000_000_000)
        let found: Result<T, LinkError>? = waitForState(timeoutNanoseconds: ns) { s -> Result<T, LinkError>? in
            for (n, event) in s.log where n >= seq {
                if let t = match(event) { return .success(t) }
                if let handle, case .disconnectionComplete(0, handle, let reason) = event { return .failure(.disconnected(handle: handle, reason: reason)) }
            }
            return s.readerDone ? .failure(.closed) : nil
        }
        switch found {
        case .success(let t)?: return t
        case .failure(let e)?: throw e
        case nil:
            return nil
        }
    }

    // MARK: The reader thread (without a loop)

    private func readLoop() {
        defer { state.withLockBroadcasting { $0.readerDone = true } }
        // A failed poll or recv ends the monitor as its socket's end does: requests then fail as closed.
        _ = readDatagrams(socket.fd, wake: wake, capacity: 260, receive)
    }

    /// The advertising reports seen from `address` since the monitor opened (the kernel's scan before its LE
    /// Create Connection), one per PDU type, in Event_Type order.
    public func advertising(of address: BluetoothAddress) -> [LEAdvertisingReport] {
        state.withLock { s in (s.advertising[address] ?? [:]).sorted { $0.key < $1.key }.map(\.value) }
    }

    /// Keeps one event and hands it to the sink when it is our link's, or one of our commands' answers.
    func receive(_ packet: [UInt8]) {
        guard let event = HCIEvent.parse(packet) else { return }
        let record = HCILinkRecord(kind: .event(event), packet: packet, timestampMicroseconds: BTSnoopWriter.timestamp())
        delivery.withLock { _ in
            let deliver = state.withLock { s in s.apply(event, record) }
            if deliver { sink?(record) }
            // Waiters wake only now: one that returns on this event finds it in the sink already.
            state.withLockBroadcasting { _ in }
        }
    }
}

/// The monitor's state: values per handle, the recent events for waiters, the events before `bind`.
struct MonitorState {
    var bound: UInt16?
    var links: [UInt16: LinkState] = [:]
    var disconnectReasons: [UInt16: UInt8] = [:]
    /// The status of the last Encryption Change that failed, on any link (a failed connect has no handle to bind).
    var encryptionFailure: UInt8?
    var log: [(Int, HCIEvent)] = []
    var nextSeq = 0
    var unbound: [(handles: [UInt16], record: HCILinkRecord)] = []
    var sentOpcodes: Set<UInt16> = []
    /// The last advertising report of each PDU type from each advertiser (the kernel's scan before an LE connect,
    /// Vol 4 Part E §7.7.65.2), at most `advertisersLimit` advertisers, the first seen kept.
    var advertising: [BluetoothAddress: [UInt8: LEAdvertisingReport]] = [:]
    static let advertisersLimit = 64
    var closing = false
    var readerDone = false

    /// A link no event has described yet: each value names the event that would.
    static func fresh() -> LinkState {
        var s = LinkState(allUnknown: .notSeen("no LE Connection Complete or LE Connection Update Complete seen on this link"))
        s.txPHY = .unknown(.notSeen("no LE PHY Update Complete seen on this link"))
        s.rxPHY = s.txPHY
        s.dataLength = .unknown(.notSeen("no LE Data Length Change seen on this link"))
        s.encrypted = .unknown(.notSeen("no Encryption Change seen on this link"))
        s.securityLevel = .unknown(.notSeen("HCI events do not carry the security level"))
        s.adapterLEBuffers = .unknown(.notSeen("HCI events do not carry the adapter's buffers"))
        s.role = .unknown(.notSeen("no LE Connection Complete seen on this link"))
        return s
    }

    /// Applies `event`; returns whether it goes to the sink now (our link's, or an answer to our command).
    mutating func apply(_ event: HCIEvent, _ record: HCILinkRecord) -> Bool {
        log.append((nextSeq, event))
        nextSeq += 1
        if log.count > HCILinkMonitor.logLimit { log.removeFirst(log.count - HCILinkMonitor.logLimit) }
        func update(_ handle: UInt16, _ body: (inout LinkState) -> Void) {
            var s = links[handle] ?? Self.fresh()
            body(&s)
            links[handle] = s
        }
        var handles: [UInt16] = []
        switch event {
        case .leConnectionComplete(let c):
            handles = [c.handle]
            guard c.status == 0 else { break }
            disconnectReasons[c.handle] = nil
            links[c.handle] = Self.fresh()
            let source = LinkSource.hciEvent(c.eventName)
            update(c.handle) { s in
                s.handle = .known(c.handle, source: source)
                s.role = .known(c.role == 0 ? .central : .peripheral, source: source)
                s.intervalMilliseconds = .known(Double(c.intervalUnits) * 1.25, source: source)
                s.peripheralLatency = .known(Int(c.peripheralLatency), source: source)
                s.supervisionTimeoutMilliseconds = .known(Int(c.supervisionTimeoutUnits) * 10, source: source)
            }
        case .leConnectionUpdateComplete(let u):
            handles = [u.handle]
            guard u.status == 0 else { break }
            let source = LinkSource.hciEvent("LE Connection Update Complete")
            update(u.handle) { s in
                s.intervalMilliseconds = .known(Double(u.intervalUnits) * 1.25, source: source)
                s.peripheralLatency = .known(Int(u.peripheralLatency), source: source)
                s.supervisionTimeoutMilliseconds = .known(Int(u.supervisionTimeoutUnits) * 10, source: source)
            }
        case .lePHYUpdateComplete(let status, let h, let tx, let rx):
            handles = [h]
            guard status == 0 else { break }
            let source = LinkSource.hciEvent("LE PHY Update Complete")
            update(h) { s in
                if let p = LinkPHY(hciValue: tx) { s.txPHY = .known(p, source: source) }
                if let p = LinkPHY(hciValue: rx) { s.rxPHY = .known(p, source: source) }
            }
        case .leDataLengthChange(let d):
            handles = [d.handle]
            update(d.handle) { s in
                s.dataLength = .known(LinkDataLength(maxTxOctets: Int(d.maxTxOctets), maxTxTime: Int(d.maxTxTime),
                                                     maxRxOctets: Int(d.maxRxOctets), maxRxTime: Int(d.maxRxTime)),
                                      source: .hciEvent("LE Data Length Change"))
            }
        case .encryptionChange(let status, let h, let enabled):
            handles = [h]
            guard status == 0 else {
                encryptionFailure = status
                break
            }
            update(h) { $0.encrypted = .known(enabled != 0, source: .hciEvent("Encryption Change")) }
        case .disconnectionComplete(let status, let h, let reason):
            handles = [h]
            if status == 0 { disconnectReasons[h] = reason }
        case .numberOfCompletedPackets(let entries):
            // Not in the filter (see `watchedEvents`); a link's, should a caller's filter pass it.
            handles = entries.map(\.handle)
        case .commandComplete(let op, _), .commandStatus(let op, _):
            return sentOpcodes.contains(op)
        case .leAdvertisingReports(let reports):
            for r in reports where advertising[r.address] != nil || advertising.count < Self.advertisersLimit {
                advertising[r.address, default: [:]][r.eventType] = r
            }
            return false
        case .other:
            return false
        }
        if let bound { return handles.contains(bound) }
        unbound.append((handles, record))
        if unbound.count > HCILinkMonitor.logLimit { unbound.removeFirst(unbound.count - HCILinkMonitor.logLimit) }
        return false
    }
}
