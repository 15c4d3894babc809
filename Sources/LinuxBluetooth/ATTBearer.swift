// The socket bearer: one owner of one SOCK_SEQPACKET socket that moves whole ATT PDUs.

import CBlueZSocket
import Glibc
import Synchronization

/// The ATT bearer over a socket (Core Spec 5.4 Vol 3 Part F §3.2: each L2CAP SDU on the LE fixed channel
/// CID 4 carries one whole ATT PDU); also over AF_UNIX SOCK_SEQPACKET, where each datagram is one PDU.
///
/// One reader thread per bearer calls the sink in arrival order. It waits in a blocking `recvmsg` (one syscall per
/// PDU, on L2CAP as on AF_UNIX) and `close` wakes it with `shutdown`. A dropped L2CAP link ends that recvmsg with the
/// link's errno (ETIMEDOUT, ECONNRESET, ECONNABORTED: the kernel's l2cap_sock_teardown_cb sets sk_err, which
/// recvmsg returns), after the PDUs already queued; the sink may run those receives itself from inside a delivery
/// (`readInline`). `trySend` is one non-blocking `send`, under an uncontended lock except on the reader thread.
/// POLLOUT waits (`whenWritable`) run on a second thread, started by the first of them. The threads keep the bearer
/// alive until they end: call `close(reason:)` when done (its fds are released before the sink hears `didCloseWith`).
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

    /// The socket, made blocking for the reader's recvmsg; every send passes MSG_DONTWAIT.
    private let fd: Int32
    /// The writable thread's epoll fd (the socket, armed EPOLLOUT|EPOLLONESHOT while waiters wait, and the
    /// eventfd that wakes it when the reader ends).
    private let writerEpfd: Int32
    private let writerWakefd: Int32
    private let state: Lock<State>
    /// True once a capture is attached or `close(reason:)` was called: only then does the reader take the lock
    /// for each received PDU (to record it, or to drop it after close). Set under the lock with those fields.
    private let receiveNeedsLock = Atomic<Bool>(false)
    /// True while `lend` has queued a body the reader has not taken yet (set and cleared under the lock with
    /// `loans`): the blocking reader looks at it before each recvmsg.
    private let loanPending = Atomic<Bool>(false)
    /// How long `lend` keeps interrupting a blocking reader that has not taken its body (each interrupt is
    /// followed by a 1 ms wait for the reader): a reader that EINTR cannot reach (the app's SIGURG handler
    /// with SA_RESTART) gives the body nil after this.
    public static let loanInterruptLimit: Duration = .seconds(5)

    /// The reader thread (pthread_self), 0 before it starts: `readInline` reads only there.
    private let readerThreadID = Atomic<UInt>(0)
    /// Counts `readInline` entries and exits: odd while one reads (`interruptInlineRead` waits for it to change).
    private let inlineReads = Atomic<UInt64>(0)
    /// Threads in `interruptInlineRead` waiting for an inline read to return: only then does it broadcast.
    private let inlineInterrupters = Atomic<Int>(0)
    /// An inline read met the bearer's end (kept in `State.inlineEnd`): the reader loop ends with it.
    private let inlineEnded = Atomic<Bool>(false)
    /// The reader loop's sink and receive buffer, for `readInline`: set by the reader thread before its first
    /// receive and used only on that thread (so no lock), from inside a delivery of the loop.
    nonisolated(unsafe) private var readerContext: (sink: any ATTTransportSink, buffer: UnsafeMutableRawBufferPointer)?

    private static let socketToken: UInt64 = 1
    private static let wakeToken: UInt64 = 2

    /// The writable thread's life: not started, running, or ended (after the reader told it to stop).
    private enum WriterPhase { case none, running, ended }

    private struct State {
        var started = false
        /// Set by `close(reason:)`; the reader ends with `.closedLocally(reason)`.
        var closeRequested: String?
        /// The fds are closed; `finalReason` says why.
        var released = false
        var finalReason: TransportError?
        var writableWaiters: [@Sendable () -> Void] = []
        /// The writable thread ("att-bearer-out"): started by the first `whenWritable` once the reader runs, it waits
        /// in epoll for POLLOUT and ends when the reader ends (`stopWriter`), before the fds are closed.
        var writer = WriterPhase.none
        var stopWriter = false
        /// The socket is armed for one EPOLLOUT in the writable thread's epoll set.
        var pollOutArmed = false
        var snoop: BearerCapture?
        /// Bodies waiting to borrow the socket (`lend`), run by the reader thread at its next wake-up.
        var loans: [@Sendable (Int32?) -> Void] = []
        /// A loan is running: `trySend` answers `.wouldBlock` (its waiter wakes on POLLOUT after the loan).
        var lent = false
        /// The reader thread, for `lend`'s interrupt; set when the reader starts.
        var readerThread: UInt?
        /// How long `lend` interrupts a blocking reader before it gives up (`loanInterruptLimit`; tests shorten it).
        var loanLimit = ATTBearer.loanInterruptLimit
        /// The end an inline read met (`inlineEnded`), for the reader loop to end with.
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
        let writerWake = cbz_eventfd()
        if writerWake < 0 { throw fail("eventfd") }
        opened.append(writerWake)
        let writerEp = cbz_epoll_create()
        if writerEp < 0 { throw fail("epoll_create1") }
        opened.append(writerEp)
        // The socket sits in the writable thread's set disarmed (EPOLLONESHOT and no event: at most one hang-up
        // report) until a waiter arms EPOLLOUT.
        if cbz_epoll_add(writerEp, socket, CBZ_EPOLLONESHOT, Self.socketToken) < 0
            || cbz_epoll_add(writerEp, writerWake, CBZ_EPOLLIN, Self.wakeToken) < 0 {
            throw fail("epoll_ctl")
        }
        if cbz_set_blocking(socket) < 0 { throw fail("fcntl(F_SETFL)") }
        self.fd = socket
        self.writerWakefd = writerWake
        self.writerEpfd = writerEp
        self.label = label
        self.endpoint = endpoint
        self.receiveBufferSize = max(1024, receiveBufferSize)
        self.channelIDs = channelIDs
        self.fixedEnhancedMTU = fixedEnhancedMTU
        self.state = Lock(State())
    }

    deinit {
        // Only reachable when neither thread runs (each holds a strong reference while it runs).
        let mustRelease = state.withLock { s in
            defer { s.released = true }
            return !s.released
        }
        if mustRelease { releaseFDs() }
    }

    private func releaseFDs() {
        _ = cbz_close(fd)
        _ = cbz_close(writerWakefd)
        _ = cbz_close(writerEpfd)
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
        let (first, startWriter) = state.withLock { s -> (Bool, Bool) in
            if s.started { return (false, false) }
            s.started = true
            return (true, claimWriter(&s))
        }
        guard first else { return } // start is documented as call-once; later calls have no effect
        startDetachedThread { [self] in
            _ = cbz_set_thread_name("att-bearer")
            self.readLoop(sink)
        }
        if startWriter { startWriterThread() }
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

    /// Calls `callback` once, on the bearer's writable thread ("att-bearer-out"), when the socket polls writable;
    /// or, when the bearer has closed, at once (on the caller's thread) or on the reader thread as it ends.
    public func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        let (fireNow, startWriter) = state.withLock { s -> (Bool, Bool) in
            if s.released { return (true, false) }
            s.writableWaiters.append(callback)
            if !s.pollOutArmed {
                if cbz_epoll_mod(writerEpfd, fd, CBZ_EPOLLOUT | CBZ_EPOLLONESHOT, Self.socketToken) < 0 {
                    s.writableWaiters.removeLast()
                    return (true, false) // cannot wait: wake the waiter now so that it retries (and sees the error)
                }
                s.pollOutArmed = true
            }
            return (false, claimWriter(&s))
        }
        if fireNow { callback() }
        if startWriter { startWriterThread() }
    }

    public func close(reason: String) {
        let waiters = state.withLock { s -> [@Sendable () -> Void] in
            guard !s.released, s.closeRequested == nil else { return [] }
            s.closeRequested = reason
            receiveNeedsLock.store(true, ordering: .releasing)
            if s.started {
                // The reader thread owns the teardown; the fds are still open because `released` is false.
                // shutdown ends the reader's blocking recvmsg (it returns 0). Under a loan the socket stays whole:
                // the reader ends when the loan returns.
                if !s.lent { _ = cbz_shutdown(fd) }
                return []
            }
            // No reader yet (so no writable thread either): release now (a later start() still delivers
            // didCloseWith once) and wake writers.
            s.released = true
            s.finalReason = .closedLocally(reason: reason)
            releaseFDs()
            defer { s.writableWaiters = [] }
            return s.writableWaiters
        }
        for w in waiters { w() }
    }

    /// Lends the connected socket to `body`, which the reader thread runs between two receives: while it runs,
    /// the bearer reads nothing (the body owns the socket: it sends and receives as it likes) and `trySend`
    /// answers `.wouldBlock`, so a sender waits for POLLOUT after the loan. One owner at a time: loans run one after
    /// another. The body must not close the socket and must return within a bounded time (it blocks the reader).
    /// The reader is woken for it at once: SIGURG interrupts its recvmsg (EINTR), and the interrupt is repeated
    /// every 1 ms until the reader has taken the body (a signal that lands just before recvmsg starts is otherwise
    /// lost), within `loanInterruptLimit`. The body gets nil, at once or when the reader ends, when the bearer is not
    /// started, ended or closing, or past that limit. An LE link takes one ATT socket, so this is how something other
    /// than the ATT engine (a bare socket loop) uses it in turn.
    public func lend(_ body: @escaping @Sendable (Int32?) -> Void) {
        let queued = state.withLock { s -> Bool in
            guard s.started, !s.released, s.closeRequested == nil else { return false }
            s.loans.append(body)
            loanPending.store(true, ordering: .releasing)
            return true
        }
        guard queued else { return body(nil) }
        interruptReader()
    }

    /// Shortens (or lengthens) `loanInterruptLimit` for this bearer: tests make a reader that cannot be reached.
    package func setLoanInterruptLimit(_ limit: Duration) { state.withLock { $0.loanLimit = limit } }

    /// Interrupts the blocking reader until it has taken the queued loans (or ended), within `loanInterruptLimit`;
    /// past it, withdraws the loans it has not taken and gives them nil.
    private func interruptReader() {
        if interruptReader(until: { s in s.loans.isEmpty || s.released }) { return }
        let withdrawn = state.withLock { s -> [@Sendable (Int32?) -> Void] in
            defer { s.loans = []; loanPending.store(false, ordering: .releasing) }
            return s.loans
        }
        for loan in withdrawn { loan(nil) }
    }

    /// Interrupts the reader thread's recvmsg (SIGURG: EINTR) until `reached` holds, looked at under the lock after
    /// each interrupt and each broadcast: every 1 ms (a signal that lands just before recvmsg starts is otherwise
    /// lost), within `loanInterruptLimit`. Returns whether it was reached. `lend` and `interruptInlineRead` use it.
    private func interruptReader(until reached: (inout State) -> Bool) -> Bool {
        let attempts = max(1, Int(state.withLock { $0.loanLimit } / .milliseconds(1)))
        for _ in 0..<attempts {
            if let thread = state.withLock({ $0.readerThread }) { _ = cbz_reader_interrupt(thread) }
            if state.wait(until: { s in reached(&s) ? true : nil }, timeoutNanoseconds: 1_000_000) != nil { return true }
        }
        return false
    }

    /// Runs the loans queued so far, on the reader thread (each gets nil when the bearer is closing).
    private func runLoans() {
        let (loans, closing) = state.withLockBroadcasting { s -> ([@Sendable (Int32?) -> Void], Bool) in
            let loans = s.loans
            s.loans = []
            loanPending.store(false, ordering: .releasing)
            s.lent = !loans.isEmpty && s.closeRequested == nil
            return (loans, s.closeRequested != nil)
        }
        for loan in loans { loan(closing ? nil : fd) }
        guard !loans.isEmpty else { return }
        state.withLock { s in
            s.lent = false
            // Senders that met the loan (`.wouldBlock`) wait for POLLOUT: the writable thread held them while the
            // socket was lent; arm it again so that they wake now.
            if !s.writableWaiters.isEmpty, !s.pollOutArmed, !s.released,
               cbz_epoll_mod(writerEpfd, fd, CBZ_EPOLLOUT | CBZ_EPOLLONESHOT, Self.socketToken) == 0 {
                s.pollOutArmed = true
            }
        }
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

    // MARK: The reader thread

    private func readLoop(_ sink: any ATTTransportSink) {
        if let already = state.withLock({ s in s.released ? (s.finalReason ?? .closedLocally(reason: s.closeRequested ?? "closed")) : nil }) {
            sink.transport(didCloseWith: already)
            return
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: receiveBufferSize, alignment: 16)
        defer { buffer.deallocate() }
        let reason = receiveLoop(buffer, sink)
        // No longer the reader: another thread may get this thread's ID once it ends, and must not send unlocked.
        readerThreadID.store(0, ordering: .releasing)
        readerContext = nil // the sink (which holds this bearer) and the buffer, which is released next
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
        /// A signal ended the wait (`lend`'s or `interruptInlineRead`'s interrupt): look at what it asks, then read again.
        case interrupted
        case ended(TransportError)
    }

    /// One blocking recvmsg and the delivery of what it read. `close(reason:)` shuts the socket down, which ends the
    /// wait (recvmsg returns 0). A socket error (an L2CAP link's loss; on AF_UNIX ECONNRESET, the peer closed with
    /// data of ours unread) ends the bearer after the datagrams still queued have been delivered.
    @inline(__always)
    private func receiveOne(_ buffer: UnsafeMutableRawBufferPointer, _ sink: any ATTTransportSink) -> Received {
        var truncated: Int32 = 0
        let got = cbz_recv_datagram_wait(fd, buffer.baseAddress, buffer.count, &truncated)
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
        if code == EINTR { return .interrupted }
        let end = TransportError.socket(socketError("recv", code, "the connection to \(label) ended", domain))
        while true {
            let queued = cbz_recv_datagram(fd, buffer.baseAddress, buffer.count, &truncated)
            guard queued > 0 else { return .ended(end) }
            if let other = deliver(queued, truncated: truncated, buffer, sink) { return .ended(other) }
        }
    }

    /// The reader loop: one `receiveOne` after another until the bearer ends (here or in an inline read).
    private func receiveLoop(_ buffer: UnsafeMutableRawBufferPointer, _ sink: any ATTTransportSink) -> TransportError {
        let thread = cbz_reader_interruptible()
        readerContext = (sink, buffer)
        readerThreadID.store(thread, ordering: .releasing)
        state.withLock { $0.readerThread = thread }
        while true {
            // A loan is taken between two receives; `lend` interrupts the recvmsg below to get here.
            if loanPending.load(ordering: .acquiring) {
                runLoans()
                if let closing = closeRequested() { return closing }
            }
            if case .ended(let end) = receiveOne(buffer, sink) { return end }
            if inlineEnded.load(ordering: .acquiring), let end = state.withLock({ $0.inlineEnd }) { return end }
        }
    }

    /// `ATTTransport.readInline`: on the reader thread, inside a delivery (a caller the sink resumed inline, see
    /// BearerExecutor), reads and delivers PDUs until `done()`: the caller's own response is read without its task
    /// suspending. It stops, leaving the rest to the reader loop, when a loan waits, and when a read ends the bearer
    /// (the loop then ends with that reason). `interruptInlineRead` wakes it to look at `done` again.
    public func readInline(until done: () -> Bool) {
        guard readerThreadID.load(ordering: .relaxed) == UInt(pthread_self()), let context = readerContext,
              inlineReads.load(ordering: .relaxed) & 1 == 0 else { return }
        inlineReads.wrappingAdd(1, ordering: .sequentiallyConsistent)
        defer {
            inlineReads.wrappingAdd(1, ordering: .sequentiallyConsistent)
            if inlineInterrupters.load(ordering: .sequentiallyConsistent) > 0 { state.withLockBroadcasting { _ in } }
        }
        while !done(), !loanPending.load(ordering: .acquiring), !inlineEnded.load(ordering: .relaxed) {
            if case .ended(let end) = receiveOne(context.buffer, context.sink) {
                state.withLock { $0.inlineEnd = end }
                inlineEnded.store(true, ordering: .releasing)
                return
            }
        }
    }

    /// `ATTTransport.interruptInlineRead`: interrupts the reader's recvmsg (SIGURG, EINTR) until the inline read in
    /// progress has returned, repeated every 1 ms (a signal that lands just before recvmsg starts is otherwise
    /// lost), within `loanInterruptLimit`. Nothing to do on the reader thread itself or when none reads.
    public func interruptInlineRead() {
        let reading = inlineReads.load(ordering: .sequentiallyConsistent)
        let thread = readerThreadID.load(ordering: .acquiring)
        guard reading & 1 == 1, thread != 0, thread != UInt(pthread_self()) else { return }
        inlineInterrupters.wrappingAdd(1, ordering: .sequentiallyConsistent)
        defer { inlineInterrupters.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
        _ = interruptReader(until: { _ in inlineReads.load(ordering: .sequentiallyConsistent) != reading })
    }

    private func finish(_ reason: TransportError, _ sink: any ATTTransportSink) {
        // The writable thread polls the socket: it must be gone before the fds are closed.
        let writerRuns = state.withLock { s -> Bool in
            s.stopWriter = true
            guard s.writer == .running else { return false }
            _ = cbz_eventfd_signal(writerWakefd)
            return true
        }
        if writerRuns {
            // Bounded: the eventfd wakes the writable thread at once.
            state.wait(until: { s in s.writer == .running ? nil : () })
        }
        let waiters = state.withLockBroadcasting { s -> [@Sendable () -> Void] in
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

    // MARK: The writable thread

    /// Claims the start of the writable thread (under the lock): true when a waiter needs it and it may start.
    private func claimWriter(_ s: inout State) -> Bool {
        guard s.writer == .none, s.started, !s.stopWriter, !s.released, !s.writableWaiters.isEmpty else { return false }
        s.writer = .running
        return true
    }

    private func startWriterThread() {
        startDetachedThread { [self] in
            _ = cbz_set_thread_name("att-bearer-out")
            self.writableLoop()
        }
    }

    /// Waits in epoll for the one-shot EPOLLOUT that `whenWritable` arms, and calls the waiters. Ends when the reader
    /// ends (`stopWriter`, with the eventfd signalled); the reader closes the fds only after that.
    private func writableLoop() {
        var events = [cbz_epoll_event](repeating: cbz_epoll_event(), count: 2)
        events.withUnsafeMutableBufferPointer { ev in
            while true {
                // The fds stay open while this thread runs: the reader releases them only after it has ended.
                let n = cbz_epoll_wait(writerEpfd, ev.baseAddress, Int32(ev.count), -1)
                // EPOLLOUT, or EPOLLERR/EPOLLHUP (a send then reports the error), or a failed wait: wake the waiters
                // so that they retry. The eventfd alone means the reader is ending.
                var socketReady = n < 0
                for i in 0..<max(0, Int(n)) where ev[i].data == Self.socketToken { socketReady = true }
                let waiters = state.withLock { s -> [@Sendable () -> Void]? in
                    if s.stopWriter { return nil } // the reader's finish fires the waiters after the close
                    guard socketReady else { return [] }
                    s.pollOutArmed = false
                    if s.lent { return [] } // the socket is lent: the loan's end arms POLLOUT again
                    defer { s.writableWaiters.removeAll(keepingCapacity: true) }
                    return s.writableWaiters
                }
                guard let waiters else { return }
                for w in waiters { w() }
            }
        }
        state.withLockBroadcasting { s in s.writer = .ended }
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
