// The socket bearer: one owner of one SOCK_SEQPACKET socket that moves whole ATT PDUs.

import CBlueZSocket
import Glibc
import Synchronization

/// The ATT bearer over a socket (Core Spec 5.4 Vol 3 Part F §3.2: each L2CAP SDU on the LE fixed channel
/// CID 4 carries one whole ATT PDU); also over AF_UNIX SOCK_SEQPACKET, where each datagram is one PDU.
///
/// One event loop per bearer, as BlueZ's src/shared/att.c has one io loop: one thread ("att-bearer") waits in one
/// `epoll_wait` on the socket (EPOLLIN always, EPOLLOUT while a `whenWritable` waiter waits) and an eventfd that
/// other threads signal when they post work (a loan, an inline read to look at again). On EPOLLIN it reads one
/// datagram (MSG_DONTWAIT) and calls the sink, in arrival order; on EPOLLOUT it calls the writable waiters; a loan
/// runs between two events. No signal is used. `close` shuts the socket down, which the loop sees as EPOLLIN. A
/// dropped L2CAP link ends the bearer with the link's errno (ETIMEDOUT, ECONNRESET, ECONNABORTED: the kernel's
/// l2cap_sock_teardown_cb sets sk_err, which recvmsg returns), after the PDUs already queued; the sink may run those
/// receives itself from inside a delivery (`readInline`). `trySend` is one non-blocking `send`, under an uncontended
/// lock except on the loop thread. The loop keeps the bearer alive until it ends: call `close(reason:)` when done
/// (its fds are released before the sink hears `didCloseWith`).
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

    /// The socket. It stays blocking for a loan's body (which may block in it); the loop's every recvmsg and every
    /// send pass MSG_DONTWAIT.
    private let fd: Int32
    /// The loop's epoll fd: the socket (EPOLLIN, and EPOLLOUT while `pollOutArmed`) and `wakefd`.
    private let epfd: Int32
    /// The eventfd other threads signal after posting work to the loop (`lend`, `interruptInlineRead`).
    private let wakefd: Int32
    private let state: Lock<State>
    /// True once a capture is attached or `close(reason:)` was called: only then does the reader take the lock
    /// for each received PDU (to record it, or to drop it after close). Set under the lock with those fields.
    private let receiveNeedsLock = Atomic<Bool>(false)
    /// True while `lend` has queued a body the loop has not taken yet (set and cleared under the lock with
    /// `loans`): the loop looks at it after each wake-up.
    private let loanPending = Atomic<Bool>(false)

    /// The loop thread (pthread_self), 0 before it starts and after it ends: `readInline` reads only there, and a
    /// send there needs no lock.
    private let readerThreadID = Atomic<UInt>(0)
    /// An inline read met the bearer's end (kept in `State.inlineEnd`): the loop ends with it.
    private let inlineEnded = Atomic<Bool>(false)
    /// The loop's sink, receive buffer and epoll event buffer (for `readInline` too), and whether an inline read runs:
    /// set by the loop thread before its first wait and used only on that thread (so no lock).
    nonisolated(unsafe) private var readerContext: (sink: any ATTTransportSink, buffer: UnsafeMutableRawBufferPointer,
                                                    events: UnsafeMutableBufferPointer<cbz_epoll_event>)?
    nonisolated(unsafe) private var inlineReading = false

    private static let socketToken: UInt64 = 1
    private static let wakeToken: UInt64 = 2

    private struct State {
        var started = false
        /// Set by `close(reason:)`; the reader ends with `.closedLocally(reason)`.
        var closeRequested: String?
        /// The fds are closed; `finalReason` says why.
        var released = false
        var finalReason: TransportError?
        var writableWaiters: [@Sendable () -> Void] = []
        /// The socket's EPOLLOUT is in the loop's interest set (while writable waiters wait).
        var pollOutArmed = false
        var snoop: BearerCapture?
        /// Bodies waiting to borrow the socket (`lend`), run by the loop between two events.
        var loans: [@Sendable (Int32?) -> Void] = []
        /// A loan is running: `trySend` answers `.wouldBlock` (its waiter wakes on EPOLLOUT after the loan).
        var lent = false
        /// The end an inline read met (`inlineEnded`), for the loop to end with.
        var inlineEnd: TransportError?
    }

    /// Takes ownership of a connected, non-blocking SOCK_SEQPACKET socket.
    /// On failure the socket is closed.
    init(adopting socket: Int32, endpoint: Endpoint, label: String, receiveBufferSize: Int = 1024,
         channelIDs: (local: UInt16, remote: UInt16)? = nil, fixedEnhancedMTU: Int? = nil) throws(TransportError) {
        var opened: [Int32] = [socket]
        func fail(_ syscall: String) -> TransportError {
            let e = lastSocketError(syscall, "setting up the bearer for \(label)", .local)
            for fd in opened { _ = cbz_close(fd) }
            return .socket(e)
        }
        let wake = cbz_eventfd()
        if wake < 0 { throw fail("eventfd") }
        opened.append(wake)
        let ep = cbz_epoll_create()
        if ep < 0 { throw fail("epoll_create1") }
        opened.append(ep)
        // Level-triggered: a datagram left unread, or a socket still writable, is reported again at the next wait.
        if cbz_epoll_add(ep, socket, CBZ_EPOLLIN, Self.socketToken) < 0
            || cbz_epoll_add(ep, wake, CBZ_EPOLLIN, Self.wakeToken) < 0 {
            throw fail("epoll_ctl")
        }
        if cbz_set_blocking(socket) < 0 { throw fail("fcntl(F_SETFL)") }
        self.fd = socket
        self.wakefd = wake
        self.epfd = ep
        self.label = label
        self.endpoint = endpoint
        self.receiveBufferSize = max(1024, receiveBufferSize)
        self.channelIDs = channelIDs
        self.fixedEnhancedMTU = fixedEnhancedMTU
        self.state = Lock(State())
    }

    deinit {
        // Only reachable when the loop does not run (it holds a strong reference while it runs).
        let mustRelease = state.withLock { s in
            defer { s.released = true }
            return !s.released
        }
        if mustRelease { releaseFDs() }
    }

    private func releaseFDs() {
        _ = cbz_close(fd)
        _ = cbz_close(wakefd)
        _ = cbz_close(epfd)
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
        startDetachedThread { [self] in
            _ = cbz_set_thread_name("att-bearer")
            self.readLoop(sink)
        }
    }

    public func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        // On the reader thread, with no capture attached and no close requested, nothing else can release the fd
        // or lend the socket meanwhile (only this thread does either): the send needs no lock.
        if !receiveNeedsLock.load(ordering: .acquiring), readerThreadID.load(ordering: .relaxed) == UInt(pthread_self()) {
            let n = cbz_send(fd, pdu.baseAddress, pdu.count)
            return try sent(n, n < 0 ? cbz_errno() : 0, pdu.count)
        }
        // The lock keeps the fd open for the duration of the send (the reader closes it under the same lock).
        // A capture records the PDU before the lock is released, so that its answer, which the reader records
        // under the same lock, always follows it in the file.
        let outcome: (n: Int, errno: Int32) = try state.withLock { s throws(TransportError) in
            if let reason = s.finalReason { throw reason }
            if let reason = s.closeRequested { throw TransportError.closedLocally(reason: reason) }
            if s.lent { return (-1, EAGAIN) }
            let n = cbz_send(fd, pdu.baseAddress, pdu.count)
            if n < 0 { return (n, cbz_errno()) }
            if let snoop = s.snoop { snoop.record(.sent, pdu) }
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
                // epoll_ctl from any thread changes the set the loop waits on (epoll(7)); no wake-up is needed.
                if cbz_epoll_mod(epfd, fd, CBZ_EPOLLIN | CBZ_EPOLLOUT, Self.socketToken) < 0 {
                    s.writableWaiters.removeLast()
                    return true // cannot wait: wake the waiter now so that it retries (and sees the error)
                }
                s.pollOutArmed = true
            }
            return false
        }
        if fireNow { callback() }
    }

    public func close(reason: String) {
        let waiters = state.withLock { s -> [@Sendable () -> Void] in
            guard !s.released, s.closeRequested == nil else { return [] }
            s.closeRequested = reason
            receiveNeedsLock.store(true, ordering: .releasing)
            if s.started {
                // The loop owns the teardown; the fds are still open because `released` is false. shutdown makes
                // the socket readable (recvmsg returns 0), which wakes the loop, and reaches the peer as end of file.
                // Under a loan the socket stays whole: the loop ends when the loan returns.
                if !s.lent { _ = cbz_shutdown(fd) }
                return []
            }
            // No loop yet: release now (a later start() still delivers didCloseWith once) and wake writers.
            s.released = true
            s.finalReason = .closedLocally(reason: reason)
            releaseFDs()
            defer { s.writableWaiters = [] }
            return s.writableWaiters
        }
        for w in waiters { w() }
    }

    /// Lends the connected socket to `body`, which the loop thread runs between two events: while it runs, the
    /// bearer reads nothing (the body owns the socket: it sends and receives as it likes) and `trySend` answers
    /// `.wouldBlock`, so a sender waits for EPOLLOUT after the loan. One owner at a time: loans run one after another,
    /// in the order they were given. The body must not close the socket and must return within a bounded time (it
    /// holds the loop). The loop is woken for it through its eventfd; a loop busy in a delivery takes it when that
    /// returns. The body gets nil, at once or when the loop ends, when the bearer is not started, ended or closing.
    /// An LE link takes one ATT socket, so this is how something other than the ATT engine (a bare socket loop) uses
    /// it in turn.
    public func lend(_ body: @escaping @Sendable (Int32?) -> Void) {
        let queued = state.withLock { s -> Bool in
            guard s.started, !s.released, s.closeRequested == nil else { return false }
            s.loans.append(body)
            loanPending.store(true, ordering: .releasing)
            // Under the lock, so that the fds are open (the loop releases them under it).
            _ = cbz_eventfd_signal(wakefd)
            return true
        }
        if !queued { body(nil) }
    }

    /// Runs the loans queued so far, on the loop thread (each gets nil when the bearer is closing).
    private func runLoans() {
        let (loans, closing) = state.withLock { s -> ([@Sendable (Int32?) -> Void], Bool) in
            let loans = s.loans
            s.loans = []
            loanPending.store(false, ordering: .releasing)
            s.lent = !loans.isEmpty && s.closeRequested == nil
            return (loans, s.closeRequested != nil)
        }
        for loan in loans { loan(closing ? nil : fd) }
        guard !loans.isEmpty else { return }
        // Senders that met the loan (`.wouldBlock`) armed EPOLLOUT: the next wait reports it, and they wake then.
        state.withLock { $0.lent = false }
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
            receiveNeedsLock.store(true, ordering: .releasing)
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
            receiveNeedsLock.store(true, ordering: .releasing)
        }
        return index
    }

    /// Stops what `capture(into:)` started: no PDU goes to its file from now on (the file is its owner's to close).
    public func endCapture() {
        state.withLock { $0.snoop = nil }
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
    public func securityLevel() throws(TransportError) -> BTSecurityLevel {
        try withOpenFD { fd throws(TransportError) in
            var level: UInt8 = 0, keySize: UInt8 = 0
            if cbz_bt_security_get(fd, &level, &keySize) < 0 {
                throw .socket(lastSocketError("getsockopt(BT_SECURITY)", "reading the security level of \(label)", domain))
            }
            return BTSecurityLevel(rawValue: level) ?? .sdp
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
    public func setSecurityLevel(_ level: BTSecurityLevel) throws(TransportError) {
        try withOpenFD { fd throws(TransportError) in
            if cbz_bt_security_set(fd, level.rawValue) < 0 {
                throw .socket(lastSocketError("setsockopt(BT_SECURITY)", "raising the security of \(label) to \(level)", domain))
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

    // MARK: The loop

    private func readLoop(_ sink: any ATTTransportSink) {
        if let already = state.withLock({ s in s.released ? (s.finalReason ?? .closedLocally(reason: s.closeRequested ?? "closed")) : nil }) {
            sink.transport(didCloseWith: already)
            return
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: receiveBufferSize, alignment: 16)
        defer { buffer.deallocate() }
        // Two events at most: the socket and the eventfd.
        let events = UnsafeMutableBufferPointer<cbz_epoll_event>.allocate(capacity: 2)
        events.initialize(repeating: cbz_epoll_event())
        defer { events.deallocate() }
        let reason = eventLoop(buffer, events, sink)
        // No longer the loop: another thread may get this thread's ID once it ends, and must not send unlocked.
        readerThreadID.store(0, ordering: .releasing)
        readerContext = nil // the sink (which holds this bearer) and the buffers, which are released next
        finish(reason, sink)
    }

    /// Hands one received datagram of `got` bytes to the sink; returns the bearer's end instead when it must end.
    @inline(__always)
    private func deliver(_ got: Int, truncated: Int32, _ buffer: UnsafeMutableRawBufferPointer,
                         _ sink: any ATTTransportSink) -> TransportError? {
        if truncated != 0 { return .truncated(received: got, bufferSize: buffer.count) }
        let pdu = UnsafeRawBufferPointer(rebasing: buffer[0..<got])
        // After close(reason:) no PDU is delivered, even one already read.
        if receiveNeedsLock.load(ordering: .acquiring) {
            let closing = state.withLock { s -> String? in
                if s.closeRequested == nil, let snoop = s.snoop {
                    snoop.record(.received, pdu)
                }
                return s.closeRequested
            }
            if let closing { return .closedLocally(reason: closing) }
        }
        sink.transport(didReceiveBytes: pdu)
        return nil
    }

    /// The close reason once `close(reason:)` has been called.
    private func closeRequested() -> TransportError? {
        guard receiveNeedsLock.load(ordering: .acquiring) else { return nil }
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
            sink.transport(didReceive: []) // an empty datagram (no hang-up): the engine rejects it
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

    /// What one `epoll_wait` of the loop reported.
    private struct Ready {
        var readable = false
        var writable = false
    }

    /// One wait in the loop's epoll set (unbounded: every operation above has its own deadline, and `close` or the
    /// socket's end wakes it), its eventfd drained.
    @inline(__always)
    private func waitForEvents(_ events: UnsafeMutableBufferPointer<cbz_epoll_event>) -> Ready {
        var ready = Ready()
        let n = cbz_epoll_wait(epfd, events.baseAddress, Int32(events.count), -1)
        // A failed wait (it cannot fail on a valid epoll fd): read, so that the socket's state decides.
        if n < 0 { ready.readable = true }
        for i in 0..<max(0, Int(n)) {
            if events[i].data == Self.wakeToken {
                _ = cbz_eventfd_drain(wakefd)
            } else {
                let e = events[i].events
                // EPOLLERR/EPOLLHUP: the recvmsg reports the error or the end.
                if e & (CBZ_EPOLLIN | CBZ_EPOLLERR | CBZ_EPOLLHUP) != 0 { ready.readable = true }
                if e & CBZ_EPOLLOUT != 0 { ready.writable = true }
            }
        }
        return ready
    }

    /// The loop: wait, read one datagram, call the writable waiters, run the loans; until the bearer ends (here or
    /// in an inline read).
    private func eventLoop(_ buffer: UnsafeMutableRawBufferPointer, _ events: UnsafeMutableBufferPointer<cbz_epoll_event>,
                           _ sink: any ATTTransportSink) -> TransportError {
        readerContext = (sink, buffer, events)
        readerThreadID.store(UInt(pthread_self()), ordering: .releasing)
        while true {
            if loanPending.load(ordering: .acquiring) {
                runLoans()
                if let closing = closeRequested() { return closing }
            }
            let ready = waitForEvents(events)
            if ready.readable, case .ended(let end) = receiveOne(buffer, sink) { return end }
            if inlineEnded.load(ordering: .acquiring), let end = state.withLock({ $0.inlineEnd }) { return end }
            if ready.writable { fireWritable() }
        }
    }

    /// EPOLLOUT: takes EPOLLOUT out of the set and calls the writable waiters (each once).
    private func fireWritable() {
        let waiters = state.withLock { s -> [@Sendable () -> Void] in
            guard s.pollOutArmed, !s.released else { return [] }
            s.pollOutArmed = false
            _ = cbz_epoll_mod(epfd, fd, CBZ_EPOLLIN, Self.socketToken)
            defer { s.writableWaiters.removeAll(keepingCapacity: true) }
            return s.writableWaiters
        }
        for w in waiters { w() }
    }

    /// `ATTTransport.readInline`: on the loop thread, inside a delivery (a caller the sink resumed inline, see
    /// BearerExecutor), waits and reads in the loop's own epoll set until `done()`: the caller's own response is read
    /// without its task suspending. It returns, leaving the rest to the loop, when a loan waits, when the socket is
    /// writable for a waiter (the loop calls waiters, not an inline read), and when a read ends the bearer (the loop
    /// then ends with that reason). `interruptInlineRead` wakes it to look at `done` again.
    public func readInline(until done: () -> Bool) {
        guard !inlineReading, readerThreadID.load(ordering: .relaxed) == UInt(pthread_self()), let context = readerContext else { return }
        inlineReading = true
        defer { inlineReading = false }
        while !done(), !loanPending.load(ordering: .acquiring), !inlineEnded.load(ordering: .relaxed) {
            let ready = waitForEvents(context.events)
            if ready.readable, case .ended(let end) = receiveOne(context.buffer, context.sink) {
                state.withLock { $0.inlineEnd = end }
                inlineEnded.store(true, ordering: .releasing)
                return
            }
            if ready.writable { return }
        }
    }

    /// `ATTTransport.interruptInlineRead`: wakes an inline read in progress (its eventfd) to look at `done` again.
    /// No wait and no signal: the eventfd's count stays until the loop drains it, so a wake-up is never lost.
    public func interruptInlineRead() {
        guard readerThreadID.load(ordering: .acquiring) != UInt(pthread_self()) else { return }
        state.withLock { s in
            if !s.released { _ = cbz_eventfd_signal(wakefd) }
        }
    }

    private func finish(_ reason: TransportError, _ sink: any ATTTransportSink) {
        let waiters = state.withLock { s -> [@Sendable () -> Void] in
            s.released = true
            s.finalReason = reason
            releaseFDs()
            let w = s.writableWaiters
            s.writableWaiters = []
            let loans = s.loans
            s.loans = []
            loanPending.store(false, ordering: .releasing)
            return w + loans.map { loan in { loan(nil) } }
        }
        for w in waiters { w() }
        sink.transport(didCloseWith: reason)
    }
}

/// The link security levels of BT_SECURITY (Linux; Core Spec 5.4 Vol 3 Part C §10.2 LE security modes).
public enum BTSecurityLevel: UInt8, Sendable, CustomStringConvertible, CaseIterable {
    case sdp = 0
    /// No encryption.
    case low = 1
    /// Encryption, unauthenticated (Just Works) pairing.
    case medium = 2
    /// Encryption with an authenticated (MITM-protected) key.
    case high = 3
    /// LE Secure Connections with a 128-bit key.
    case fips = 4

    /// "low", "medium", "high", "fips".
    public init?(name: String) {
        guard let l = Self.allCases.first(where: { $0.description == name.lowercased() }) else { return nil }
        self = l
    }

    public var description: String {
        switch self {
        case .sdp: return "sdp"
        case .low: return "low"
        case .medium: return "medium"
        case .high: return "high"
        case .fips: return "fips"
        }
    }
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
