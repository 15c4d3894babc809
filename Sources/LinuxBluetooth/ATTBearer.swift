// The socket bearer: one owner of one SOCK_SEQPACKET socket that moves whole ATT PDUs.

import CBlueZSocket
import LinkCore
import Glibc
import Synchronization

/// The ATT bearer over a socket (Core Spec 5.4 Vol 3 Part F §3.2: each L2CAP SDU on the LE fixed channel
/// CID 4 carries one whole ATT PDU); also over AF_UNIX SOCK_SEQPACKET, where each datagram is one PDU.
///
/// The socket is a source of its link's `EventLoop` (BlueZ's src/shared/att.c io loop): the loop's one thread
/// ("att-bearer") waits in one `epoll_wait` on it (EPOLLIN always, EPOLLOUT while a `whenWritable` waiter waits),
/// reads one datagram per readable event (MSG_DONTWAIT) and calls the sink, in arrival order; on EPOLLOUT it calls
/// the writable waiters; a loan runs as work posted to the loop. No signal is used. `close` shuts the socket down,
/// which the loop sees as EPOLLIN. A dropped L2CAP link ends the bearer with the link's errno (ETIMEDOUT,
/// ECONNRESET, ECONNABORTED: the kernel's l2cap_sock_teardown_cb sets sk_err, which recvmsg returns), after the
/// PDUs already queued. `trySend` is one non-blocking `send`, under an uncontended lock except on the loop thread.
/// The loop keeps the bearer alive until it ends: call `close(reason:)` when done (its fd is released before the
/// sink hears `didCloseWith`).
public final class ATTBearer: ATTTransport {
    /// What the socket is connected to.
    public enum Endpoint: Sendable, Equatable {
        /// An LE connection on the ATT fixed channel.
        case le(peer: BluetoothAddress, type: LEAddressType, adapter: String?)
        /// An AF_UNIX SOCK_SEQPACKET socket at a path (client side, or accepted by a listener at the path).
        case unix(path: String)
        /// One end of a socketpair.
        case socketPair
    }

    public let label: String
    public let endpoint: Endpoint
    /// The receive buffer's size: at least 1024 bytes (ATT's maximum MTU is 517), or L2CAP's BT_RCVMTU if larger.
    public let receiveBufferSize: Int
    /// An Enhanced ATT bearer's channel IDs, this side's and the peer's: an ECRED socket's `l2_cid` from getsockname
    /// and getpeername; over unix: 0x0040 + n on both sides (`EnhancedBearerHandshake.channelID`). Nil on CID 4.
    public let channelIDs: (local: UInt16, remote: UInt16)?
    /// A unix: Enhanced ATT bearer's ATT_MTU, agreed by its handshake (an ECRED socket asks the kernel instead).
    let fixedEnhancedMTU: Int?
    /// The loop this bearer's socket is a source of: its own, or its link's (an Enhanced ATT bearer shares the
    /// unenhanced one's). The ATT engine above runs on it too.
    public let loop: EventLoop
    public var eventLoop: EventLoop? { loop }

    /// The socket. It stays blocking for a loan's body (which may block in it); the loop's every recvmsg and every
    /// send pass MSG_DONTWAIT.
    private let fd: Int32
    private let state: Lock<State>
    /// `State.needsLock`, published for the lock-free paths: while false (no capture, trace, diversion or close) the
    /// loop thread sends and delivers without the lock. Stored under the lock whenever one of those fields changes.
    private let needsLock = Atomic<Bool>(false)

    /// The loop's side, touched only on the loop's thread: the sink, the receive buffer, the epoll source's token.
    /// Unchecked exclusivity: only the loop's thread touches them, one event at a time.
    @exclusivity(unchecked) nonisolated(unsafe) private var sink: (any ATTTransportSink)?
    @exclusivity(unchecked) nonisolated(unsafe) private var buffer: UnsafeMutableRawBufferPointer?
    /// The socket's token in the loop's epoll set.
    private let token: UInt64

    private struct State {
        var started = false
        /// Set by `close(reason:)`; the reader ends with `.closedLocally(reason)`.
        var closeRequested: String?
        /// The fd is closed; `finalReason` says why.
        var released = false
        var finalReason: TransportError?
        var writableWaiters: [@Sendable () -> Void] = []
        /// The socket's EPOLLOUT is in the loop's interest set (while writable waiters wait).
        var pollOutArmed = false
        var snoop: BearerCapture?
        /// Loans given and not run yet (`lend`): a loop that ends gives each nil.
        var loans: [UInt64: @Sendable (Int32?) -> Void] = [:]
        var nextLoan: UInt64 = 0
        /// A loan is running: `trySend` answers `.wouldBlock` (its waiter wakes on EPOLLOUT after the loan).
        var lent = false
        /// The sends that found the socket full, and how long they waited for EPOLLOUT.
        var backpressure = Backpressure()
        /// Who watches this bearer (`observe(with:tracing:)`): told of this host's close and of the end, and of each
        /// PDU while `tracing`. Weak: the watcher (GATTPeer's ObservedTransport) holds the bearer.
        weak var tap: (any ATTBearerTap)?
        var tracing = false
        /// Takes the inbound PDUs instead of the sink while set (`divert(to:)`; the close goes to both).
        var diverted: (any ATTTransportSink)?

        /// Whether a send or a delivery must take the lock: to record, trace or divert a PDU, or after a close.
        var needsLock: Bool { snoop != nil || tracing || diverted != nil || closeRequested != nil || released }
    }

    /// The sends that found the socket full (EAGAIN, ENOBUFS, or a loan running) and the time until it polled
    /// writable (`mirror bench`'s backpressure figures).
    public struct Backpressure: Sendable {
        /// Sends that found the socket full.
        public var wouldBlockCount = 0
        /// Total time from a send finding the socket full to the socket becoming writable, in nanoseconds.
        public var blockedNanoseconds: UInt64 = 0
        /// When the current wait began (0 when none is running).
        var blockedSince: UInt64 = 0

        mutating func blocked(at now: UInt64) {
            wouldBlockCount += 1
            if blockedSince == 0 { blockedSince = now }
        }

        mutating func writable(at now: UInt64) {
            guard blockedSince != 0 else { return }
            blockedNanoseconds += now - blockedSince
            blockedSince = 0
        }
    }

    /// Publishes `s.needsLock` to the lock-free paths; call under the lock after changing what it reads.
    private func publish(_ s: State) { needsLock.store(s.needsLock, ordering: .releasing) }

    /// Takes ownership of a connected SOCK_SEQPACKET socket, as a source of `loop` (a new loop when nil).
    /// On failure the socket is closed.
    init(adopting socket: Int32, endpoint: Endpoint, label: String, receiveBufferSize: Int = 1024,
         channelIDs: (local: UInt16, remote: UInt16)? = nil, fixedEnhancedMTU: Int? = nil,
         loop: EventLoop? = nil) throws(TransportError) {
        if cbz_set_blocking(socket) < 0 {
            let e = lastSocketError("fcntl(F_SETFL)", "setting up the bearer for \(label)", .local)
            _ = cbz_close(socket)
            throw .socket(e)
        }
        if let loop {
            self.loop = loop
        } else {
            do throws(TransportError) {
                self.loop = try EventLoop()
            } catch {
                _ = cbz_close(socket)
                throw error
            }
        }
        self.fd = socket
        self.token = self.loop.makeSourceToken()
        self.label = label
        self.endpoint = endpoint
        self.receiveBufferSize = max(1024, receiveBufferSize)
        self.channelIDs = channelIDs
        self.fixedEnhancedMTU = fixedEnhancedMTU
        self.state = Lock(State())
    }

    deinit {
        // Only reachable when the loop does not hold the bearer (never started, or ended).
        let mustRelease = state.withLock { s in
            defer { s.released = true }
            return !s.released
        }
        if mustRelease { _ = cbz_close(fd) }
    }

    private var domain: SocketDomain {
        switch endpoint {
        case .le(let peer, _, _): return .l2cap(peer: peer.description)
        case .unix(let path): return .unix(path: path)
        case .socketPair: return .local
        }
    }

    // MARK: ATTTransport

    public func start(_ sink: any ATTTransportSink) {
        let first = state.withLock { s -> Bool in
            if s.started { return false }
            s.started = true
            return true
        }
        guard first else { return } // start is documented as call-once; later calls have no effect
        loop.execute { [self] in self.attach(sink) }
    }

    /// On the loop: the socket joins the loop's epoll set, or, when the bearer already ended, the sink hears why.
    private func attach(_ sink: any ATTTransportSink) {
        if let (already, tap) = state.withLock({ s in s.released ? (s.finalReason ?? .closedLocally(reason: s.closeRequested ?? "closed"), s.tap) : nil }) {
            tap?.bearer(ended: already)
            sink.transport(didCloseWith: already)
            return
        }
        self.sink = sink
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: receiveBufferSize, alignment: 16)
        // Level-triggered: a datagram left unread, or a socket still writable, is reported again at the next wait.
        // Under the lock, so that a `whenWritable` meanwhile either comes first (and EPOLLOUT is added here) or
        // after (and modifies the set). The handler holds the bearer until it ends (the loop's source).
        let added = state.withLock { s -> Bool in
            let events = s.pollOutArmed ? CBZ_EPOLLIN | CBZ_EPOLLOUT : CBZ_EPOLLIN
            return loop.register(fd: fd, token: token, events: events, { [self] events in self.handle(events) })
        }
        if !added { finish(.socket(lastSocketError("epoll_ctl", "setting up the bearer for \(label)", .local))) }
    }

    public func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        loop.inEventLoop ? try trySendOnItsLoop(pdu) : try sendLocked(pdu)
    }

    /// On the loop thread, with no capture, trace, diversion or close, nothing else can release the fd or lend the
    /// socket meanwhile (only this thread does either): the send needs no lock. The engine sends only from here.
    public func trySendOnItsLoop(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        assert(loop.inEventLoop, "trySendOnItsLoop off the bearer's loop thread")
        guard !needsLock.load(ordering: .acquiring) else { return try sendLocked(pdu) }
        let n = cbz_send(fd, pdu.baseAddress, pdu.count)
        return try sent(n, n < 0 ? cbz_errno() : 0, pdu.count)
    }

    /// A send under the lock: off the loop thread, or while a capture, trace, diversion or close needs it.
    private func sendLocked(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        // The lock keeps the fd open for the duration of the send (the loop closes it under the same lock).
        // A capture records the PDU before the lock is released, so that its answer, which the loop records
        // under the same lock, always follows it in the file.
        let outcome: (n: Int, errno: Int32) = try state.withLock { s throws(TransportError) in
            if let reason = s.finalReason { throw reason }
            if let reason = s.closeRequested { throw TransportError.closedLocally(reason: reason) }
            if s.lent { return (-1, EAGAIN) } // counted as backpressure by `sent`, as the socket's own EAGAIN
            let n = cbz_send(fd, pdu.baseAddress, pdu.count)
            if n < 0 { return (n, cbz_errno()) }
            if let snoop = s.snoop { snoop.record(.sent, pdu) }
            if s.tracing { s.tap?.bearer(sent: pdu) }
            return (n, 0)
        }
        return try sent(outcome.n, outcome.errno, pdu.count)
    }

    /// What a send of `count` bytes that returned `n` (with `code`, its errno when negative) did.
    @inline(__always)
    private func sent(_ n: Int, _ code: Int32, _ count: Int) throws(TransportError) -> ATTSendResult {
        if n >= 0 { return .sent }
        switch code {
        case EAGAIN, ENOBUFS:
            let now = monotonicNanoseconds()
            state.withLock { $0.backpressure.blocked(at: now) }
            return .wouldBlock
        default:
            throw .socket(socketError("send", code, "sending a \(count)-byte PDU to \(label)", domain))
        }
    }

    /// Calls `callback` once, on the loop thread ("att-bearer"), when the socket polls writable; or, when the bearer
    /// has closed, at once (on the caller's thread) or on the loop thread as it ends.
    public func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        let fireNow = state.withLock { s -> Bool in
            if s.released { return true }
            s.writableWaiters.append(callback)
            if !s.pollOutArmed {
                s.pollOutArmed = true
                // epoll_ctl from any thread changes the set the loop waits on (epoll(7)); no wake-up is needed.
                // Before the socket joined the set this fails (ENOENT) and `attach` adds it with EPOLLOUT.
                _ = loop.modify(fd: fd, token: token, events: CBZ_EPOLLIN | CBZ_EPOLLOUT)
            }
            return false
        }
        if fireNow { callback() }
    }

    public func close(reason: String) { close(reason: reason, interruptingLoan: false) }

    /// `close(reason:)`; with `interruptingLoan`, a running loan's socket is shut down too, so that a body blocked in
    /// it on its peer (a send, a poll) returns, and the bearer ends when it does. Without, the close waits for the loan.
    public func close(reason: String, interruptingLoan: Bool) {
        let (waiters, tracer) = state.withLock { s -> ([@Sendable () -> Void], (any ATTBearerTap)?) in
            guard !s.released, s.closeRequested == nil || (interruptingLoan && s.lent) else { return ([], nil) }
            // A traced bearer's `closed:` line is said as the close is asked, so a process exiting right after prints it.
            let tracer = s.closeRequested == nil && s.tracing ? s.tap : nil
            if s.closeRequested == nil { s.closeRequested = reason }
            publish(s)
            if s.started {
                // The loop owns the teardown; the fd is still open because `released` is false. shutdown makes
                // the socket readable (recvmsg returns 0), which wakes the loop, and reaches the peer as end of file.
                // Under a loan the socket stays whole unless the loan is interrupted: the loop ends the bearer when
                // the loan returns.
                if !s.lent || interruptingLoan { _ = cbz_shutdown(fd) }
                return ([], tracer)
            }
            // No loop yet: release now (a later start() still delivers didCloseWith once) and wake writers.
            s.released = true
            s.finalReason = .closedLocally(reason: reason)
            _ = cbz_close(fd)
            defer { s.writableWaiters = [] }
            return (s.writableWaiters, tracer)
        }
        tracer?.bearer(closing: .closedLocally(reason: reason))
        for w in waiters { w() }
    }

    // MARK: Watching

    /// From now on `tap` is told of this host's close and of the bearer's end, and of every PDU sent and received
    /// while `tracing` (under the bearer's lock, so a request's report precedes its answer's). Only a traced, captured,
    /// diverted or closing bearer takes its lock per PDU: an untraced one sends and delivers with no call out.
    public func observe(with tap: any ATTBearerTap, tracing: Bool) {
        state.withLock { s in
            s.tap = tap
            s.tracing = tracing
            publish(s)
        }
    }

    /// Whether the tap is told of each PDU.
    public var isTracing: Bool { state.withLock { $0.tracing } }

    /// Starts or stops telling the tap of each PDU.
    public func setTracing(_ on: Bool) {
        state.withLock { s in
            s.tracing = on
            publish(s)
        }
    }

    /// From now on every inbound PDU goes to `sink` instead of the bearer's own (nil: to it again); the close goes to
    /// both. For `mirror check`, which reads every PDU itself while the GATT client above sends nothing.
    public func divert(to sink: (any ATTTransportSink)?) {
        state.withLock { s in
            s.diverted = sink
            publish(s)
        }
    }

    /// The sends that found the socket full so far, and how long they waited.
    public var backpressure: Backpressure { state.withLock { $0.backpressure } }

    /// Lends the connected socket to `body`, which the loop thread runs between two events: while it runs, the
    /// bearer reads nothing (the body owns the socket: it sends and receives as it likes) and `trySend` answers
    /// `.wouldBlock`, so a sender waits for EPOLLOUT after the loan. One owner at a time: loans run one after another,
    /// in the order they were given. The body must not close the socket and must return within a bounded time (it
    /// holds the loop). `lend` returns at once; a loop busy in a delivery takes it when that returns. The body gets
    /// nil, at once or when the loop ends, when the bearer is not started, ended or closing. An LE link takes one ATT
    /// socket, so this is how something other than the ATT engine (a bare socket loop) uses it in turn.
    public func lend(_ body: @escaping @Sendable (Int32?) -> Void) {
        let id = state.withLock { s -> UInt64? in
            guard s.started, !s.released, s.closeRequested == nil else { return nil }
            s.nextLoan += 1
            s.loans[s.nextLoan] = body
            return s.nextLoan
        }
        guard let id else { return body(nil) }
        loop.execute { [self] in self.runLoan(id) }
    }

    /// Runs loan `id` on the loop thread (nil when the bearer is closing; nothing when the bearer's end gave it nil).
    private func runLoan(_ id: UInt64) {
        let (loan, closing) = state.withLock { s -> ((@Sendable (Int32?) -> Void)?, Bool) in
            guard let loan = s.loans.removeValue(forKey: id) else { return (nil, false) }
            s.lent = s.closeRequested == nil && !s.released
            return (loan, !s.lent)
        }
        guard let loan else { return }
        loan(closing ? nil : fd)
        guard !closing else { return }
        // Senders that met the loan (`.wouldBlock`) armed EPOLLOUT: the next wait reports it, and they wake then.
        let closed = state.withLock { s -> String? in
            s.lent = false
            return s.closeRequested
        }
        if let closed { finish(.closedLocally(reason: closed)) }
    }

    // MARK: Options

    /// Writes every PDU sent and received from now on to `writer`, under a new adapter index of its own (returned,
    /// for the link's HCI records); an LE bearer's PDUs carry its link's real handle (L2CAP_CONNINFO). Before the
    /// first PDU: a bearer without a radio link (unix:, a socketpair) records a synthesized LE Connection Complete
    /// (`LinkOpening.noRadio`); an LE bearer records `link` when given (its caller's, when no monitor captures the
    /// real event), else the link monitor's records carry the real one.
    @discardableResult
    public func capture(into writer: BTSnoopWriter, link: BTSnoopWriter.LinkOpening? = nil) -> UInt16 {
        let index = writer.addIndex(label: label, address: peerAddress)
        if case .le = endpoint {
            if let handle = try? connectionHandle() { writer.setConnectionHandle(handle, index: index) }
            if let link { writer.openLink(index: index, link) }
        } else {
            writer.openLink(index: index, .noRadio(label: label))
        }
        state.withLock { s in
            s.snoop = BearerCapture(writer: writer, index: index, channel: nil)
            publish(s)
        }
        return index
    }

    /// An Enhanced ATT bearer's capture: from now on its PDUs go to `writer` under its link's `index` (the one
    /// `capture(into:)` gave the link's unenhanced bearer) on its ECRED channel's CIDs, after the channel's opening
    /// (`BTSnoopWriter.openCreditBasedChannel`, so Wireshark decodes them as ATT). A bearer without channel IDs
    /// (CID 4) is captured under an index of its own, as `capture(into:)` does. Returns the index used.
    @discardableResult
    public func capture(into writer: BTSnoopWriter, linkIndex index: UInt16) -> UInt16 {
        guard let channel = channelIDs else { return capture(into: writer) }
        writer.openCreditBasedChannel(index: index, channel: channel, mtu: (try? enhancedMTU()) ?? ATTBearer.minimumEnhancedMTU)
        state.withLock { s in
            s.snoop = BearerCapture(writer: writer, index: index, channel: channel)
            publish(s)
        }
        return index
    }

    /// Stops what `capture(into:)` started: no PDU goes to its file from now on (the file is its owner's to close).
    public func endCapture() {
        state.withLock { s in
            s.snoop = nil
            publish(s)
        }
    }

    private var peerAddress: BluetoothAddress {
        if case .le(let peer, _, _) = endpoint { return peer }
        return .any
    }

    /// The L2CAP MTUs (BT_SNDMTU, BT_RCVMTU) of an LE bearer: what one SDU can carry, not the ATT MTU.
    public func l2capMTUs() throws(TransportError) -> (send: Int, receive: Int) {
        try withOpenFD { fd throws(TransportError) in
            var snd: UInt16 = 0, rcv: UInt16 = 0
            if cbz_bt_sndmtu(fd, &snd) < 0 { throw .socket(lastSocketError("getsockopt(BT_SNDMTU)", "reading the L2CAP MTU of \(label)", domain)) }
            if cbz_bt_rcvmtu(fd, &rcv) < 0 { throw .socket(lastSocketError("getsockopt(BT_RCVMTU)", "reading the L2CAP MTU of \(label)", domain)) }
            return (Int(snd), Int(rcv))
        }
    }

    /// The link's security level (BT_SECURITY) of an LE bearer.
    public func securityLevel() throws(TransportError) -> BTSecurityLevel { try readSecurity().level }

    /// The link's security level and encryption key size (BT_SECURITY's `struct bt_security`) of an LE bearer;
    /// nil over unix: and a socketpair, which have no link.
    public func linkSecurity() throws(TransportError) -> BTSecurity? {
        guard case .le = endpoint else { return nil }
        return try readSecurity()
    }

    private func readSecurity() throws(TransportError) -> BTSecurity {
        try withOpenFD { fd throws(TransportError) in
            var level: UInt8 = 0, keySize: UInt8 = 0
            if cbz_bt_security_get(fd, &level, &keySize) < 0 {
                throw .socket(lastSocketError("getsockopt(BT_SECURITY)", "reading the security level of \(label)", domain))
            }
            return BTSecurity(level: BTSecurityLevel(rawValue: level) ?? .sdp, keySize: Int(keySize))
        }
    }

    /// The HCI connection handle of an LE bearer's link (L2CAP_CONNINFO; no capability, l2cap_sock.c).
    public func connectionHandle() throws(TransportError) -> UInt16 {
        try withOpenFD { fd throws(TransportError) in
            var handle: UInt16 = 0
            if cbz_l2cap_conninfo(fd, &handle) < 0 {
                throw .socket(lastSocketError("getsockopt(L2CAP_CONNINFO)", "reading the connection handle of \(label)", domain))
            }
            return handle
        }
    }

    /// The BT_PHY bits of an LE bearer's link (BT_PHY_LE_*; see LinkState for what the kernel puts there).
    public func phyBits() throws(TransportError) -> UInt32 {
        try withOpenFD { fd throws(TransportError) in
            var bits: UInt32 = 0
            if cbz_bt_phy(fd, &bits) < 0 { throw .socket(lastSocketError("getsockopt(BT_PHY)", "reading the PHY of \(label)", domain)) }
            return bits
        }
    }

    /// The adapter an LE bearer is bound to, by its local address (getsockname); nil when it cannot be told.
    public func localAdapter() -> HCIAdapter? {
        let local = try? withOpenFD { fd throws(TransportError) -> BluetoothAddress? in
            var addr = [UInt8](repeating: 0, count: 6)
            var type: UInt8 = 0, cid: UInt16 = 0
            return cbz_l2cap_local(fd, &addr, &type, &cid) == 0 ? BluetoothAddress(uncheckedBytes: addr) : nil
        }
        guard let address = local ?? nil else { return nil }
        return (try? HCIAdapter.list())?.first { $0.address == address }
    }

    /// Raises the link's security (BT_SECURITY); sends fail with ENOTCONN while pairing runs.
    /// On a connected LE link the kernel answers EINVAL when its smp_conn_security will not start anything
    /// (l2cap_sock.c): the link already has the level (a pairing the peer or the connect started just ended), which
    /// is success, or it has no SMP or LE is off, which is said so.
    public func setSecurityLevel(_ level: BTSecurityLevel) throws(TransportError) {
        try withOpenFD { fd throws(TransportError) in
            if cbz_bt_security_set(fd, level.rawValue) < 0 {
                var error = lastSocketError("setsockopt(BT_SECURITY)", "raising the security of \(label) to \(level)", domain)
                guard error.errno == .invalidArgument, case .le = endpoint else { throw .socket(error) }
                var now: UInt8 = 0, keySize: UInt8 = 0
                if cbz_bt_security_get(fd, &now, &keySize) == 0, now >= level.rawValue { return }
                error.advice = "the kernel started no pairing or encryption on this link (its SMP is not available here: dmesg then says \"security requested but not available\"; or LE is off on the adapter): check `mirror doctor` and dmesg"
                throw .socket(error)
            }
        }
    }

    /// The socket's send buffer size (SO_SNDBUF), and a way to shrink it (tests of backpressure use it).
    public func sendBufferSize() throws(TransportError) -> Int {
        try withOpenFD { fd throws(TransportError) in
            var bytes: Int32 = 0
            if cbz_get_buffer_size(fd, 0, &bytes) < 0 { throw .socket(lastSocketError("getsockopt(SO_SNDBUF)", "reading the send buffer of \(label)", domain)) }
            return Int(bytes)
        }
    }

    public func setSendBufferSize(_ bytes: Int) throws(TransportError) {
        try withOpenFD { fd throws(TransportError) in
            if cbz_set_buffer_size(fd, 0, Int32(clamping: bytes)) < 0 { throw .socket(lastSocketError("setsockopt(SO_SNDBUF)", "sizing the send buffer of \(label)", domain)) }
        }
    }

    private func withOpenFD<T>(_ body: (Int32) throws(TransportError) -> T) throws(TransportError) -> T {
        try state.withLock { s throws(TransportError) -> T in
            if let reason = s.finalReason { throw reason }
            if s.released { throw TransportError.closedLocally(reason: s.closeRequested ?? "closed") }
            return try body(fd)
        }
    }

    // MARK: The loop's side

    /// What the loop's epoll_wait reported for the socket: one datagram read and delivered when readable
    /// (EPOLLERR/EPOLLHUP: the recvmsg reports the error or the end), then the writable waiters on EPOLLOUT.
    private func handle(_ events: UInt32) {
        guard let sink, let buffer else { return }
        if events & (CBZ_EPOLLIN | CBZ_EPOLLERR | CBZ_EPOLLHUP) != 0, case .ended(let end) = receiveOne(buffer, sink) {
            finish(end)
            return
        }
        if events & CBZ_EPOLLOUT != 0 { fireWritable() }
    }

    /// Hands one received datagram of `got` bytes to the sink; returns the bearer's end instead when it must end.
    @inline(__always)
    private func deliver(_ got: Int, truncated: Int32, _ buffer: UnsafeMutableRawBufferPointer,
                         _ sink: any ATTTransportSink) -> TransportError? {
        if truncated != 0 { return .truncated(received: got, bufferSize: buffer.count) }
        let pdu = UnsafeRawBufferPointer(rebasing: buffer[0..<got])
        // After close(reason:) no PDU is delivered, even one already read.
        if needsLock.load(ordering: .acquiring) {
            let (closing, diverted) = state.withLock { s -> (String?, (any ATTTransportSink)?) in
                if s.closeRequested == nil {
                    if let snoop = s.snoop { snoop.record(.received, pdu) }
                    if s.tracing { s.tap?.bearer(received: pdu) }
                }
                return (s.closeRequested, s.diverted)
            }
            if let closing { return .closedLocally(reason: closing) }
            if let diverted {
                diverted.transport(didReceiveBytes: pdu)
                return nil
            }
        }
        sink.transport(didReceiveBytes: pdu)
        return nil
    }

    /// The close reason once `close(reason:)` has been called.
    private func closeRequested() -> TransportError? {
        guard needsLock.load(ordering: .acquiring) else { return nil }
        return state.withLock { $0.closeRequested }.map { .closedLocally(reason: $0) }
    }

    /// What one receive did.
    private enum Received {
        case delivered
        /// Nothing was there after all (EAGAIN): wait again.
        case nothing
        case ended(TransportError)
    }

    /// One non-blocking recvmsg, after epoll said the socket is readable, and the delivery of what it read.
    /// `close(reason:)` shuts the socket down (recvmsg returns 0). A socket error (an L2CAP link's loss; on AF_UNIX
    /// ECONNRESET, the peer closed with data of ours unread) ends the bearer after the datagrams still queued have
    /// been delivered.
    @inline(__always)
    private func receiveOne(_ buffer: UnsafeMutableRawBufferPointer, _ sink: any ATTTransportSink) -> Received {
        var truncated: Int32 = 0
        let got = cbz_recv_datagram(fd, buffer.baseAddress, buffer.count, &truncated)
        if got > 0 {
            if let end = deliver(got, truncated: truncated, buffer, sink) { return .ended(end) }
            return .delivered
        }
        if let closing = closeRequested() { return .ended(closing) }
        if got == 0 {
            // End of file, or an empty datagram: the peer's hang-up tells them apart.
            if cbz_peer_hung_up(fd) != 0 { return .ended(.closedByPeer) }
            // An empty datagram (no hang-up): delivered (traced, diverted) like any other; the engine rejects it.
            if let end = deliver(0, truncated: 0, buffer, sink) { return .ended(end) }
            return .delivered
        }
        let code = cbz_errno()
        if code == EAGAIN || code == EWOULDBLOCK || code == EINTR { return .nothing }
        let end = TransportError.socket(socketError("recv", code, "the connection to \(label) ended", domain))
        while true {
            let queued = cbz_recv_datagram(fd, buffer.baseAddress, buffer.count, &truncated)
            guard queued > 0 else { return .ended(end) }
            if let other = deliver(queued, truncated: truncated, buffer, sink) { return .ended(other) }
        }
    }

    /// EPOLLOUT: takes EPOLLOUT out of the set and calls the writable waiters (each once).
    private func fireWritable() {
        let now = monotonicNanoseconds()
        let waiters = state.withLock { s -> [@Sendable () -> Void] in
            guard s.pollOutArmed, !s.released else { return [] }
            s.pollOutArmed = false
            s.backpressure.writable(at: now)
            _ = loop.modify(fd: fd, token: token, events: CBZ_EPOLLIN)
            defer { s.writableWaiters.removeAll(keepingCapacity: true) }
            return s.writableWaiters
        }
        for w in waiters { w() }
    }

    /// The bearer ends, on the loop: the socket leaves the loop's set and is closed, waiters and loans left wake
    /// (a loan with nil), then the sink hears why, once. The loop's reference to the bearer goes with the source.
    private func finish(_ reason: TransportError) {
        let sink = self.sink
        let (waiters, tap, diverted) = state.withLock { s -> ([@Sendable () -> Void], (any ATTBearerTap)?, (any ATTTransportSink)?) in
            if s.released { return ([], nil, nil) }
            s.released = true
            s.finalReason = reason
            publish(s)
            loop.deregister(fd: fd, token: token)
            _ = cbz_close(fd)
            let w = s.writableWaiters
            s.writableWaiters = []
            let loans = s.loans.sorted { $0.key < $1.key }.map(\.value)
            s.loans = [:]
            defer { s.diverted = nil }
            return (w + loans.map { loan in { loan(nil) } }, s.tap, s.diverted)
        }
        self.sink = nil
        buffer?.deallocate()
        buffer = nil
        for w in waiters { w() }
        // The tap first (the shell's lost-connection line, the trace's `closed:`), then a diversion, then the sink.
        tap?.bearer(ended: reason)
        diverted?.transport(didCloseWith: reason)
        sink?.transport(didCloseWith: reason)
    }
}

/// What watches a socket bearer from inside it (GATTPeer's `ObservedTransport`: --trace, the shell's lost-connection
/// line): called on the bearer's slow path only (`ATTBearer.observe(with:tracing:)`), never per PDU while untraced.
public protocol ATTBearerTap: AnyObject, Sendable {
    /// A PDU went out (while tracing), under the bearer's lock: its answer's `received` comes after this returns.
    func bearer(sent pdu: UnsafeRawBufferPointer)
    /// A PDU came in (while tracing), before it is delivered, under the bearer's lock.
    func bearer(received pdu: UnsafeRawBufferPointer)
    /// This host asked the bearer to close (said while tracing, once, as it is asked).
    func bearer(closing reason: TransportError)
    /// The bearer ended, for either side's reason: once, before its sink hears it.
    func bearer(ended reason: TransportError)
}

/// Where a bearer's PDUs are captured: the writer, the index, and an Enhanced ATT bearer's channel (its PDUs then on
/// the channel's CIDs, not CID 4).
struct BearerCapture {
    let writer: BTSnoopWriter
    let index: UInt16
    let channel: (local: UInt16, remote: UInt16)?

    func record(_ direction: BTSnoopWriter.Direction, _ pdu: UnsafeRawBufferPointer) {
        if let channel { writer.write(index: index, direction: direction, pdu: pdu, channel: channel) }
        else { writer.write(index: index, direction: direction, pdu: pdu) }
    }
}

extension ATTBearer: SecurableTransport {}
