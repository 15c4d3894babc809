// The socket bearer: one owner of one non-blocking SOCK_SEQPACKET socket that moves whole ATT PDUs.

import CBlueZSocket
import Foundation
import Synchronization

/// The ATT bearer over a socket (Core Spec 5.4 Vol 3 Part F §3.2: each L2CAP SDU on the LE fixed channel
/// CID 4 carries one whole ATT PDU); also over AF_UNIX SOCK_SEQPACKET, where each datagram is one PDU.
///
/// Readiness comes from epoll on one reader thread per bearer; an eventfd wakes it for `close`. The sink is
/// called on that thread, in arrival order. `trySend` is one non-blocking `send` under an uncontended lock.
/// The reader thread keeps the bearer alive until it ends: call `close(reason:)` when done (its fds are
/// released before the sink hears `didCloseWith`).
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

    private let fd: Int32
    private let epfd: Int32
    private let wakefd: Int32
    private let state: LockedValue<State>
    /// True once a capture is attached or `close(reason:)` was called: only then does the reader take the lock
    /// for each received PDU (to record it, or to drop it after close). Set under the lock with those fields.
    private let receiveNeedsLock = Atomic<Bool>(false)

    private static let socketToken: UInt64 = 1
    private static let wakeToken: UInt64 = 2
    private static var readEvents: UInt32 { CBZ_EPOLLIN | CBZ_EPOLLRDHUP }

    private struct State {
        var started = false
        /// Set by `close(reason:)`; the reader ends with `.closedLocally(reason)`.
        var closeRequested: String?
        /// The three fds are closed; `finalReason` says why.
        var released = false
        var finalReason: TransportError?
        var writableWaiters: [@Sendable () -> Void] = []
        var pollOutArmed = false
        var snoop: (writer: BTSnoopWriter, index: UInt16)?
        /// Bodies waiting to borrow the socket (`lend`), run by the reader thread at its next wake-up.
        var loans: [@Sendable (Int32?) -> Void] = []
        /// A loan is running: `trySend` answers `.wouldBlock` (its waiter wakes on POLLOUT after the loan).
        var lent = false
    }

    /// Takes ownership of a connected, non-blocking SOCK_SEQPACKET socket.
    /// On failure the socket is closed.
    init(adopting socket: Int32, endpoint: Endpoint, label: String, receiveBufferSize: Int = 1024) throws(TransportError) {
        let ep = cbz_epoll_create()
        if ep < 0 {
            let e = lastSocketError("epoll_create1", "setting up the bearer for \(label)", .local)
            _ = cbz_close(socket)
            throw .socket(e)
        }
        let wake = cbz_eventfd()
        if wake < 0 {
            let e = lastSocketError("eventfd", "setting up the bearer for \(label)", .local)
            _ = cbz_close(socket)
            _ = cbz_close(ep)
            throw .socket(e)
        }
        if cbz_epoll_add(ep, socket, Self.readEvents, Self.socketToken) < 0
            || cbz_epoll_add(ep, wake, CBZ_EPOLLIN, Self.wakeToken) < 0 {
            let e = lastSocketError("epoll_ctl", "setting up the bearer for \(label)", .local)
            _ = cbz_close(socket)
            _ = cbz_close(ep)
            _ = cbz_close(wake)
            throw .socket(e)
        }
        self.fd = socket
        self.epfd = ep
        self.wakefd = wake
        self.label = label
        self.endpoint = endpoint
        self.receiveBufferSize = max(1024, receiveBufferSize)
        self.state = LockedValue(State())
    }

    deinit {
        // Only reachable when the reader thread is not running (it holds a strong reference while it runs).
        let mustRelease = state.withLock { s in
            defer { s.released = true }
            return !s.released
        }
        if mustRelease { releaseFDs() }
    }

    private func releaseFDs() {
        _ = cbz_close(fd)
        _ = cbz_close(epfd)
        _ = cbz_close(wakefd)
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
        let first = state.withLock { s in
            defer { s.started = true }
            return !s.started
        }
        guard first else { return } // start is documented as call-once; later calls have no effect
        let thread = Thread { [self] in
            _ = cbz_set_thread_name("att-bearer")
            self.readLoop(sink)
        }
        thread.start()
    }

    public func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        // The lock keeps the fd open for the duration of the send (the reader closes it under the same lock).
        // A capture records the PDU before the lock is released, so that its answer, which the reader records
        // under the same lock, always follows it in the file.
        let outcome: (n: Int, errno: Int32) = try state.withLock { s throws(TransportError) in
            if let reason = s.finalReason { throw reason }
            if let reason = s.closeRequested { throw TransportError.closedLocally(reason: reason) }
            if s.lent { return (-1, EAGAIN) }
            let n = cbz_send(fd, pdu.baseAddress, pdu.count)
            if n < 0 { return (n, cbz_errno()) }
            if let snoop = s.snoop { snoop.writer.write(index: snoop.index, direction: .sent, pdu: pdu) }
            return (n, 0)
        }
        if outcome.n >= 0 { return .sent }
        switch outcome.errno {
        case EAGAIN, ENOBUFS:
            return .wouldBlock
        default:
            throw .socket(socketError("send", outcome.errno, "sending a \(pdu.count)-byte PDU to \(label)", domain))
        }
    }

    public func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        let fireNow = state.withLock { s -> Bool in
            if s.released { return true }
            s.writableWaiters.append(callback)
            if !s.pollOutArmed {
                if cbz_epoll_mod(epfd, fd, Self.readEvents | CBZ_EPOLLOUT, Self.socketToken) < 0 {
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
                // The reader thread owns the teardown; the eventfd is still open because `released` is false.
                _ = cbz_eventfd_signal(wakefd)
                return []
            }
            // No reader yet: release now (a later start() still delivers didCloseWith once) and wake writers.
            s.released = true
            s.finalReason = .closedLocally(reason: reason)
            releaseFDs()
            defer { s.writableWaiters = [] }
            return s.writableWaiters
        }
        for w in waiters { w() }
    }

    /// Lends the connected socket to `body`, which the reader thread runs at its next wake-up: while it runs,
    /// the bearer reads nothing (the body owns the socket: it sends and receives as it likes) and `trySend`
    /// answers `.wouldBlock`, so a sender waits for POLLOUT after the loan. The body must not close the socket
    /// and must return within a bounded time (it blocks the reader). It gets nil, at once or at the reader's
    /// next wake-up, when the bearer is not started, ended, or closing. An LE link takes one ATT socket, so
    /// this is how something other than the ATT engine (a bare socket loop) uses the same link in turn.
    public func lend(_ body: @escaping @Sendable (Int32?) -> Void) {
        let queued = state.withLock { s -> Bool in
            guard s.started, !s.released, s.closeRequested == nil else { return false }
            s.loans.append(body)
            _ = cbz_eventfd_signal(wakefd)
            return true
        }
        if !queued { body(nil) }
    }

    /// Runs the loans queued so far, on the reader thread (each gets nil when the bearer is closing).
    private func runLoans() {
        let (loans, closing) = state.withLock { s -> ([@Sendable (Int32?) -> Void], Bool) in
            let loans = s.loans
            s.loans = []
            s.lent = !loans.isEmpty && s.closeRequested == nil
            return (loans, s.closeRequested != nil)
        }
        for loan in loans { loan(closing ? nil : fd) }
        if !loans.isEmpty { state.withLock { $0.lent = false } }
    }

    // MARK: Options

    /// Writes every PDU sent and received from now on to `writer`, under a new adapter index of its own.
    public func capture(into writer: BTSnoopWriter) {
        let index = writer.addIndex(label: label, address: peerAddress)
        state.withLock { s in
            s.snoop = (writer, index)
            receiveNeedsLock.store(true, ordering: .releasing)
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
    public func securityLevel() throws(TransportError) -> BTSecurityLevel {
        try withOpenFD { fd throws(TransportError) in
            var level: UInt8 = 0, keySize: UInt8 = 0
            if cbz_bt_security_get(fd, &level, &keySize) < 0 {
                throw .socket(lastSocketError("getsockopt(BT_SECURITY)", "reading the security level of \(label)", domain))
            }
            return BTSecurityLevel(rawValue: level) ?? .sdp
        }
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
        let size = receiveBufferSize
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        var events = [cbz_epoll_event](repeating: cbz_epoll_event(), count: 4)
        let reason: TransportError = events.withUnsafeMutableBufferPointer { ev in
            // An L2CAP link that drops sets the socket error (ETIMEDOUT, ECONNRESET, ...) and shuts the socket
            // down; recv then reports plain EOF. EPOLLERR tells us to fetch SO_ERROR first, and the data still
            // queued is delivered before the error closes the bearer.
            var disconnect: TransportError?
            while true {
                let n = cbz_epoll_wait(epfd, ev.baseAddress, Int32(ev.count), -1)
                if n < 0 { return .socket(lastSocketError("epoll_wait", "waiting for data from \(label)", .local)) }
                for i in 0..<Int(n) {
                    let e = ev[i]
                    if e.data == Self.wakeToken {
                        _ = cbz_eventfd_drain(wakefd)
                        runLoans()
                        if let r = state.withLock({ $0.closeRequested }) { return .closedLocally(reason: r) }
                        continue
                    }
                    if e.events & CBZ_EPOLLERR != 0, disconnect == nil { disconnect = pendingError() }
                    if e.events & CBZ_EPOLLOUT != 0 { fireWritable() }
                    guard e.events & (CBZ_EPOLLIN | CBZ_EPOLLERR | CBZ_EPOLLHUP | CBZ_EPOLLRDHUP) != 0 else { continue }
                    // One datagram per wake-up: epoll is level-triggered, so more data wakes us again at once.
                    var truncated: Int32 = 0
                    let got = cbz_recv_datagram(fd, buffer.baseAddress, size, &truncated)
                    if got > 0 {
                        if truncated != 0 { return .truncated(received: got, bufferSize: size) }
                        let pdu = UnsafeRawBufferPointer(rebasing: buffer[0..<got])
                        // After close(reason:) no PDU is delivered, even one already read.
                        if receiveNeedsLock.load(ordering: .acquiring) {
                            let closing = state.withLock { s -> String? in
                                if s.closeRequested == nil, let snoop = s.snoop {
                                    snoop.writer.write(index: snoop.index, direction: .received, pdu: pdu)
                                }
                                return s.closeRequested
                            }
                            if let closing { return .closedLocally(reason: closing) }
                        }
                        sink.transport(didReceiveBytes: pdu)
                    } else if got == 0 {
                        if e.events & (CBZ_EPOLLHUP | CBZ_EPOLLRDHUP) != 0 || disconnect != nil {
                            return disconnect ?? .closedByPeer
                        }
                        sink.transport(didReceive: []) // an empty datagram (no hang-up): the engine rejects it
                    } else {
                        let code = cbz_errno()
                        if code == EAGAIN {
                            if let d = disconnect { return d }
                            continue
                        }
                        return .socket(socketError("recv", code, "receiving from \(label)", domain))
                    }
                }
            }
        }
        finish(reason, sink)
    }

    private func pendingError() -> TransportError? {
        var code: Int32 = 0
        if cbz_socket_error(fd, &code) < 0 { code = cbz_errno() }
        if code == 0 { return nil }
        return .socket(socketError("recv", code, "the connection to \(label) ended", domain))
    }

    private func fireWritable() {
        let waiters = state.withLock { s -> [@Sendable () -> Void] in
            let w = s.writableWaiters
            s.writableWaiters.removeAll(keepingCapacity: true)
            s.pollOutArmed = false
            _ = cbz_epoll_mod(epfd, fd, Self.readEvents, Self.socketToken)
            return w
        }
        for w in waiters { w() }
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
