// Making bearers: an LE connection on CID 4, an AF_UNIX SOCK_SEQPACKET path, a socketpair; and listeners.

import ATTStack
import LinkCore
import CBlueZSocket
import Glibc

extension Optional where Wrapped == [UInt8] {
    /// The bytes' address for a C call, or NULL when there are none.
    fileprivate func withOptionalPointer<R>(_ body: (UnsafePointer<UInt8>?) -> R) -> R {
        guard let self else { return body(nil) }
        return self.withUnsafeBufferPointer { body($0.baseAddress) }
    }
}

extension ATTBearer {
    /// The default connect timeout, in seconds.
    public static let defaultConnectTimeout: Double = 10

    /// Connects to a target: an LE device address (with `type`, through `adapter` or the kernel's choice) or
    /// `unix:/path`. `timeout` bounds the LE connection attempt.
    public static func connect(to target: BearerTarget, type: LEAddressType = .public, adapter: String? = nil,
                               timeout: Double = defaultConnectTimeout,
                               security: BTSecurityLevel? = nil, loop: EventLoop? = nil) throws(TransportError) -> ATTBearer {
        switch target {
        case .unix(let path): return try connect(unixPath: path, loop: loop)
        case .bluetooth(let address):
            return try connect(to: address, type: type, adapter: adapter, timeout: timeout, security: security, loop: loop)
        }
    }

    /// Opens an LE connection to `address` on the ATT fixed channel (L2CAP CID 4, PSM 0), bound to `adapter`
    /// ("hci0", or an adapter address; nil lets the kernel route). Waits at most `timeout` seconds. `loop`: the
    /// link's event loop when the caller made it first (its task already prefers it); nil makes one.
    public static func connect(to address: BluetoothAddress, type: LEAddressType = .public, adapter: String? = nil,
                               timeout: Double = defaultConnectTimeout,
                               security: BTSecurityLevel? = nil, loop: EventLoop? = nil) throws(TransportError) -> ATTBearer {
        try connectLE(to: address, type: type, adapter: adapter, timeout: timeout, security: security, enhanced: nil, loop: loop)
    }

    /// The smallest MTU of an ECRED channel (Core Spec 5.4 Vol 3 Part A §4.25), and the EATT bearer's minimum.
    public static let minimumEnhancedMTU = 64

    /// The syscall an ECRED channel's socket fails in on a kernel without ECRED (`SocketError.enhancedModeSyscall`).
    public static var enhancedModeSyscall: String { SocketError.enhancedModeSyscall }

    /// Opens an Enhanced ATT bearer to `address` (Core Spec 5.4 Vol 3 Part F §3.2.11): an L2CAP Enhanced Credit
    /// Based Flow Control channel (BT_MODE_EXT_FLOWCTL) on SPSM 0x0027 over the existing LE link, receiving at most
    /// `mtu` bytes per SDU. Its ATT_MTU is `enhancedMTU()` (the smaller of both sides' MTUs). The kernel must have
    /// ECRED (the bluetooth module's enable_ecred: otherwise setsockopt(BT_MODE) fails); a refusal by the peer
    /// comes back as the connect's errno (the kernel's mapping of the L2CAP result).
    public static func connectEnhanced(to address: BluetoothAddress, type: LEAddressType = .public, adapter: String? = nil,
                                       mtu: Int = ATTMTU.maximum, timeout: Double = defaultConnectTimeout,
                                       security: BTSecurityLevel? = nil, loop: EventLoop? = nil) throws(TransportError) -> ATTBearer {
        try connectLE(to: address, type: type, adapter: adapter, timeout: timeout, security: security,
                      enhanced: UInt16(clamping: max(minimumEnhancedMTU, mtu)), loop: loop)
    }

    /// An Enhanced ATT bearer's ATT_MTU (`EnhancedATTTransport`): the smaller of the channel's two MTUs (Vol 3 Part F §3.2.8); over unix:,
    /// the smaller of the two its handshake carried.
    public func enhancedMTU() throws(TransportError) -> Int {
        if let fixedEnhancedMTU { return fixedEnhancedMTU }
        let m = try l2capMTUs()
        return min(m.send, m.receive)
    }

    /// CID 4 (`enhanced` nil) or an ECRED channel on SPSM 0x0027 with that receive MTU; the wait for the link
    /// blocks this thread in poll (`connect(to:...on:)` waits on the loop instead).
    private static func connectLE(to address: BluetoothAddress, type: LEAddressType, adapter: String?, timeout: Double,
                                  security: BTSecurityLevel?, enhanced rxMTU: UInt16?, loop: EventLoop? = nil) throws(TransportError) -> ATTBearer {
        let attempt = try PendingLEConnect.start(to: address, type: type, adapter: adapter, security: security, enhanced: rxMTU)
        if attempt.inProgress {
            do { try waitForConnection(fd: attempt.fd, label: attempt.waitLabel, timeout: timeout, domain: attempt.domain) } catch {
                attempt.abandon()
                throw rxMTU == nil ? error : enhancedConnectError(error, peer: attempt.peer)
            }
        }
        return try attempt.finish(loop: loop)
    }

    /// Connects as `connect(to:type:adapter:timeout:security:loop:)` does, but the wait for the LE link is a source
    /// of `loop` (POLLOUT and a loop timer): the task suspends and no thread blocks while the link is made (Vol 6
    /// Part B §4.5: the controller's connection procedure). A unix: target connects at once.
    public static func connect(to target: BearerTarget, type: LEAddressType = .public, adapter: String? = nil,
                               timeout: Double = defaultConnectTimeout, security: BTSecurityLevel? = nil,
                               on loop: EventLoop) async throws(TransportError) -> ATTBearer {
        guard case .bluetooth(let address) = target else { return try connect(to: target, loop: loop) }
        let attempt = try PendingLEConnect.start(to: address, type: type, adapter: adapter, security: security, enhanced: nil)
        if attempt.inProgress {
            do { try await waitForConnection(fd: attempt.fd, label: attempt.waitLabel, timeout: timeout, domain: attempt.domain, on: loop) } catch {
                attempt.abandon()
                throw error
            }
        }
        return try attempt.finish(loop: loop)
    }

    /// An LE connect between its connect(2) and the link: the socket (owned until `finish` or `abandon`), and
    /// the words its errors use.
    struct PendingLEConnect {
        let fd: Int32
        let address: BluetoothAddress
        let type: LEAddressType
        let adapterName: String?
        let rxMTU: UInt16?
        let domain: SocketDomain
        let peer: String
        let label: String
        /// False when connect(2) finished at once.
        let inProgress: Bool
        /// What a timeout or a failed attempt names.
        var waitLabel: String { rxMTU == nil ? label : "\(label) (Enhanced ATT bearer, PSM 0x0027)" }

        /// Opens the socket, binds it to the adapter, asks for ECRED and security, and calls connect(2) (non-blocking).
        static func start(to address: BluetoothAddress, type: LEAddressType, adapter: String?,
                          security: BTSecurityLevel?, enhanced rxMTU: UInt16?) throws(TransportError) -> PendingLEConnect {
            let peer = "\(address) (LE \(type))"
            let domain = SocketDomain.l2cap(peer: address.description)
            let what = rxMTU == nil ? "an ATT socket" : "an Enhanced ATT bearer (ECRED, PSM 0x0027)"
            let channel = rxMTU == nil ? "CID 4" : "PSM 0x0027"
            // The socket first: on a kernel without Bluetooth this is where EAFNOSUPPORT shows.
            let fd = cbz_l2cap_socket()
            if fd < 0 { throw .socket(lastSocketError("socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP)", "opening \(what) for \(peer)", domain)) }
            var owned = true
            defer { if owned { _ = cbz_close(fd) } }

            var adapterName: String? = nil
            var source: BluetoothAddress? = nil
            if let adapter {
                let a = try HCIAdapter.resolve(adapter)
                guard a.isUp else { throw .adapterDown(a.name) }
                adapterName = a.name
                source = a.address
            }
            let label = adapterName.map { "\(peer) via \($0)" } ?? peer
            let bound: Int32 = source.map { $0.bytes }.withOptionalPointer { p in
                rxMTU == nil ? cbz_l2cap_bind_le(fd, p, UInt8(CBZ_LE_PUBLIC)) : cbz_l2cap_bind_le_psm(fd, p, UInt8(CBZ_LE_PUBLIC), 0)
            }
            if bound < 0 { throw .socket(lastSocketError("bind", "binding \(rxMTU == nil ? "the ATT socket" : what) to \(adapterName ?? "any adapter") (\(channel))", domain)) }
            if let rxMTU {
                if cbz_bt_set_mode(fd, UInt8(CBZ_BT_MODE_EXT_FLOWCTL)) < 0 {
                    throw .socket(lastSocketError(enhancedModeSyscall,
                                                  "asking for an ECRED channel to \(label) (the kernel needs the bluetooth module's enable_ecred)", domain))
                }
                if cbz_bt_set_rcvmtu(fd, rxMTU) < 0 {
                    throw .socket(lastSocketError("setsockopt(BT_RCVMTU)", "setting the ECRED channel's MTU to \(rxMTU) for \(label)", domain))
                }
            }
            if let security, cbz_bt_security_set(fd, security.rawValue) < 0 {
                throw .socket(lastSocketError("setsockopt(BT_SECURITY)", "asking for \(security) security on \(label)", domain))
            }

            let r = address.bytes.withUnsafeBufferPointer { a in
                rxMTU == nil ? cbz_l2cap_connect_le(fd, a.baseAddress, type.rawValue)
                    : cbz_l2cap_connect_le_psm(fd, a.baseAddress, type.rawValue, UInt16(CBZ_EATT_PSM))
            }
            var inProgress = false
            if r < 0 {
                let code = cbz_errno()
                guard code == EINPROGRESS || code == EAGAIN else {
                    throw .socket(socketError("connect", code, "connecting \(rxMTU == nil ? "" : "an Enhanced ATT bearer ")to \(label)", domain))
                }
                inProgress = true
            }
            owned = false
            return PendingLEConnect(fd: fd, address: address, type: type, adapterName: adapterName, rxMTU: rxMTU,
                                    domain: domain, peer: peer, label: label, inProgress: inProgress)
        }

        /// Closes the socket: the attempt is cancelled.
        func abandon() { _ = cbz_close(fd) }

        /// The bearer over the connected socket, a source of `loop` (nil: a new one).
        func finish(loop: EventLoop?) throws(TransportError) -> ATTBearer {
            var rcv: UInt16 = 0
            let rcvMTU = cbz_bt_rcvmtu(fd, &rcv) == 0 ? Int(rcv) : 0
            let cids = rxMTU == nil ? nil : channelIDs(of: fd)
            var label = self.label
            if let cids { label += " PSM 0x0027 CID \(ATTHex.handle(cids.local))" }
            return try ATTBearer(adopting: fd, endpoint: .le(peer: address, type: type, adapter: adapterName),
                                 label: label, receiveBufferSize: max(1024, rcvMTU), channelIDs: cids, loop: loop)
        }
    }

    /// What an ECRED connect's errno means on a link that is up (tools/vm/README.md, eattprobe): Linux gives every
    /// L2CAP refusal result as ECONNREFUSED, and bluetoothd closes a channel past its `[GATT] Channels` at once.
    static func enhancedConnectError(_ error: TransportError, peer: String) -> TransportError {
        guard case .socket(var e) = error else { return error }
        switch e.errno {
        case .connectionRefused:
            e.advice = "\(peer) refused the ECRED channel on PSM 0x0027: Linux reports every L2CAP refusal result this way (btmon shows which; with no listener there it is 0x0002 SPSM not supported): the peer serves no Enhanced ATT bearer"
        case .connectionReset:
            e.advice = "\(peer) accepted the ECRED channel and closed it at once (bluetoothd does so past its main.conf [GATT] Channels, which count the CID 4 bearer)"
        default: return error
        }
        return .socket(e)
    }

    /// An ECRED socket's CIDs (getsockname / getpeername `l2_cid`); nil when either cannot be read.
    static func channelIDs(of fd: Int32) -> (local: UInt16, remote: UInt16)? {
        var addr = [UInt8](repeating: 0, count: 6), t: UInt8 = 0, local: UInt16 = 0, remote: UInt16 = 0
        guard cbz_l2cap_local(fd, &addr, &t, &local) == 0, cbz_l2cap_peer(fd, &addr, &t, &remote) == 0 else { return nil }
        return (local, remote)
    }

    /// Waits for a non-blocking connect on `fd` to finish (POLLOUT), at most `timeout` seconds, then reads its
    /// outcome (SO_ERROR). Throws `.connectTimedOut` naming `label` and the limit when POLLOUT does not come (the
    /// caller closes the socket, which cancels the attempt), or the connect's error. Any socket type: the tests
    /// drive it with an AF_UNIX socket whose send buffer is full.
    static func waitForConnection(fd: Int32, label: String, timeout: Double, domain: SocketDomain) throws(TransportError) {
        let ms = Int32(clamping: Int((max(0, timeout) * 1000).rounded(.up)))
        // May hold the link's loop (an Enhanced ATT bearer's connect): signals are taken meanwhile.
        let ready = BlockingWait.poll(fd: fd, events: Int16(CBZ_POLLOUT), timeoutMilliseconds: ms)
        if ready < 0 { throw .socket(lastSocketError("poll", "waiting for the connection to \(label)", domain)) }
        if ready == 0 { throw .connectTimedOut(peer: label, seconds: timeout) } // closing the socket cancels it
        try connectOutcome(fd: fd, label: label, domain: domain).get()
    }

    /// A finished non-blocking connect's outcome: its SO_ERROR.
    static func connectOutcome(fd: Int32, label: String, domain: SocketDomain) -> Result<Void, TransportError> {
        var soError: Int32 = 0
        if cbz_socket_error(fd, &soError) < 0 { soError = cbz_errno() }
        if soError != 0 { return .failure(.socket(connectFailure(soError, label: label, domain: domain))) }
        return .success(())
    }

    /// The error of a connect whose SO_ERROR is `code`. EACCES there is the link ended with Authentication Failure
    /// while it was made (HCI 0x05 as net/bluetooth's bt_to_errno maps it: pairing failed before the channel opened,
    /// no capability involved), so it is named SO_ERROR, which `SocketError.isAuthenticationFailure` reads as such;
    /// any other errno stays the connect's.
    static func connectFailure(_ code: Int32, label: String, domain: SocketDomain) -> SocketError {
        socketError(code == EACCES ? "SO_ERROR" : "connect", code, "connecting to \(label)", domain)
    }

    /// `waitForConnection` as a source of `loop`: the task suspends until POLLOUT (then SO_ERROR) or `timeout`
    /// seconds (a loop timer, then `.connectTimedOut`); no thread blocks in poll while the link is made.
    static func waitForConnection(fd: Int32, label: String, timeout: Double, domain: SocketDomain,
                                  on loop: EventLoop) async throws(TransportError) {
        let outcome: Result<Void, TransportError> = await withLinkLoop(loop) {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Void, TransportError>, Never>) in
                ConnectWait(loop: loop, fd: fd, continuation: c).start(timeout: timeout, label: label, domain: domain)
            }
        }
        try outcome.get()
    }

    /// Connects to an AF_UNIX SOCK_SEQPACKET socket at `path` (each datagram one ATT PDU), as a source of `loop`
    /// (nil: a new one).
    public static func connect(unixPath path: String, loop: EventLoop? = nil) throws(TransportError) -> ATTBearer {
        let label = "unix:\(path)"
        let domain = SocketDomain.unix(path: path)
        let fd = cbz_unix_socket()
        if fd < 0 { throw .socket(lastSocketError("socket(AF_UNIX, SOCK_SEQPACKET)", "opening a socket for \(label)", domain)) }
        if cbz_unix_connect(fd, path) < 0 {
            let e = lastSocketError("connect", "connecting to \(label)", domain)
            _ = cbz_close(fd)
            throw .socket(e)
        }
        restartEnhancedNumbering(unixPath: path)
        return try ATTBearer(adopting: fd, endpoint: .unix(path: path), label: label, loop: loop)
    }

    /// Takes ownership of a connected SOCK_SEQPACKET socket made elsewhere (inherited, or from another API).
    /// The socket is switched to non-blocking; on failure it is closed.
    public convenience init(adoptingConnected socket: Int32, label: String) throws(TransportError) {
        if cbz_set_nonblocking(socket) < 0 {
            let e = lastSocketError("fcntl(O_NONBLOCK)", "adopting the socket for \(label)", .local)
            _ = cbz_close(socket)
            throw .socket(e)
        }
        try self.init(adopting: socket, endpoint: .socketPair, label: label)
    }

    /// Two connected bearers over a socketpair (in-process tests and loopback).
    public static func pair(labels: (String, String) = ("socketpair:a", "socketpair:b"),
                            receiveBufferSize: Int = 1024) throws(TransportError) -> (ATTBearer, ATTBearer) {
        var fds: [Int32] = [-1, -1]
        if cbz_unix_socketpair(&fds) < 0 {
            throw .socket(lastSocketError("socketpair(AF_UNIX, SOCK_SEQPACKET)", "creating a bearer pair", .local))
        }
        let a: ATTBearer
        do { a = try ATTBearer(adopting: fds[0], endpoint: .socketPair, label: labels.0, receiveBufferSize: receiveBufferSize) } catch {
            _ = cbz_close(fds[1])
            throw error
        }
        let b = try ATTBearer(adopting: fds[1], endpoint: .socketPair, label: labels.1, receiveBufferSize: receiveBufferSize)
        return (a, b)
    }
}

/// Accepts ATT connections and hands each over as an `ATTBearer`: on an AF_UNIX SOCK_SEQPACKET path (the
/// simulator, tests) or on the LE ATT fixed channel CID 4 of an adapter (Core Spec 5.4 Vol 3 Part F §3.2).
/// `accept` blocks in poll(2) on the listening socket and an eventfd, so `close` wakes it.
public final class ATTBearerListener: Sendable {
    public enum Kind: Sendable, Equatable {
        case unix(path: String)
        case le(adapter: String?, address: BluetoothAddress)
        /// ECRED channels (BT_MODE_EXT_FLOWCTL) on SPSM 0x0027: Enhanced ATT bearers (Vol 3 Part F §3.2.11).
        case leEnhanced(adapter: String?, address: BluetoothAddress)
    }

    public let kind: Kind
    /// "unix:/tmp/sim.sock", or "LE CID 4 on hci1 (00:AA:01:01:00:01)".
    public let label: String
    private let fd: Int32
    private let wakefd: Int32

    private struct State {
        var closed = false
        var accepting = 0
        var released = false
    }
    // Guards the two fds' lifetime: they are closed once closed is set and no accept is running.
    private let state = Lock(State())

    private init(fd: Int32, wakefd: Int32, kind: Kind, label: String) {
        self.fd = fd
        self.wakefd = wakefd
        self.kind = kind
        self.label = label
    }

    deinit {
        let release = state.withLock { s in
            defer { s.released = true }
            return !s.released
        }
        if release { releaseFDs() }
    }

    private func releaseFDs() {
        _ = cbz_close(fd)
        _ = cbz_close(wakefd)
        if case .unix(let path) = kind { _ = cbz_unlink(path) }
    }

    /// Listens at `path`. A stale socket file nobody listens on is replaced; a live one is EADDRINUSE.
    public static func unix(path: String, backlog: Int32 = 16) throws(TransportError) -> ATTBearerListener {
        let domain = SocketDomain.unix(path: path)
        let fd = cbz_unix_socket()
        if fd < 0 { throw .socket(lastSocketError("socket(AF_UNIX, SOCK_SEQPACKET)", "opening a listener at \(path)", domain)) }
        var owned = true
        defer { if owned { _ = cbz_close(fd) } }
        if cbz_unix_bind(fd, path) < 0 {
            let code = cbz_errno()
            guard code == EADDRINUSE, isStale(path) else {
                if code == EADDRINUSE, cbz_is_socket_file(path) == 0 {
                    throw .socket(SocketError(syscall: "bind", errno: Errno(code), context: "listening at \(path)",
                                              advice: "\(path) exists and is not a socket: choose another path (it is left untouched)"))
                }
                throw .socket(socketError("bind", code, "listening at \(path)", domain))
            }
            _ = cbz_unlink(path)
            if cbz_unix_bind(fd, path) < 0 { throw .socket(lastSocketError("bind", "listening at \(path)", domain)) }
        }
        if cbz_listen(fd, backlog) < 0 {
            let e = lastSocketError("listen", "listening at \(path)", domain)
            _ = cbz_unlink(path)
            throw .socket(e)
        }
        let wake = cbz_eventfd()
        if wake < 0 {
            let e = lastSocketError("eventfd", "listening at \(path)", .local)
            _ = cbz_unlink(path)
            throw .socket(e)
        }
        owned = false
        return ATTBearerListener(fd: fd, wakefd: wake, kind: .unix(path: path), label: "unix:\(path)")
    }

    /// A socket file that refuses connections: left behind by a listener that exited. Anything that is not a
    /// socket (a regular file, a directory) is never stale: it is not ours to remove.
    private static func isStale(_ path: String) -> Bool {
        guard cbz_is_socket_file(path) == 1 else { return false }
        let probe = cbz_unix_socket()
        guard probe >= 0 else { return false }
        defer { _ = cbz_close(probe) }
        return cbz_unix_connect(probe, path) < 0 && cbz_errno() == ECONNREFUSED
    }

    /// Listens for LE connections on the ATT fixed channel of `adapter` ("hci1", an address, or nil for any),
    /// as a peripheral does. Advertising (so that centrals find and connect) is separate: see `HCISocket`.
    public static func le(adapter: String?, addressType: LEAddressType = .public, backlog: Int32 = 4) throws(TransportError) -> ATTBearerListener {
        try leListener(adapter: adapter, addressType: addressType, enhancedMTU: nil, backlog: backlog)
    }

    /// Listens for Enhanced ATT bearers on `adapter` (nil: any): L2CAP ECRED channels (BT_MODE_EXT_FLOWCTL) on SPSM
    /// 0x0027, each accepted channel receiving at most `mtu` bytes per SDU (at least 64, Vol 3 Part A §4.25). The
    /// kernel needs the bluetooth module's enable_ecred (setsockopt(BT_MODE) fails with ENOPROTOOPT, listen with
    /// EOPNOTSUPP otherwise), and SPSM 0x0027 is below 0x0080, so bind needs CAP_NET_BIND_SERVICE (else EACCES).
    public static func leEnhanced(adapter: String?, mtu: Int = ATTMTU.maximum, backlog: Int32 = 8) throws(TransportError) -> ATTBearerListener {
        try leListener(adapter: adapter, addressType: .public, enhancedMTU: UInt16(clamping: max(ATTBearer.minimumEnhancedMTU, mtu)),
                       backlog: backlog)
    }

    /// CID 4 (`rxMTU` nil), or ECRED channels on SPSM 0x0027 receiving at most `rxMTU`: the socket bound to the
    /// adapter (BT_MODE and BT_RCVMTU set after bind, in BT_BOUND, as the kernel requires), listening.
    private static func leListener(adapter: String?, addressType: LEAddressType, enhancedMTU rxMTU: UInt16?,
                                   backlog: Int32) throws(TransportError) -> ATTBearerListener {
        let domain = SocketDomain.l2cap(peer: "any central")
        let what = rxMTU == nil ? "ATT" : "Enhanced ATT"
        let fd = cbz_l2cap_socket()
        if fd < 0 { throw .socket(lastSocketError("socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP)", "opening an \(what) listener", domain)) }
        var owned = true
        defer { if owned { _ = cbz_close(fd) } }
        var name: String? = nil
        var address = BluetoothAddress.any
        if let adapter {
            let a = try HCIAdapter.resolve(adapter)
            guard a.isUp else { throw .adapterDown(a.name) }
            name = a.name
            address = a.address
        }
        let on = name ?? "any adapter"
        let bound = address.bytes.withUnsafeBufferPointer { a in
            let p = adapter == nil ? nil : a.baseAddress
            return rxMTU == nil ? cbz_l2cap_bind_le(fd, p, addressType.rawValue)
                : cbz_l2cap_bind_le_psm(fd, p, addressType.rawValue, UInt16(CBZ_EATT_PSM))
        }
        if bound < 0 { throw .socket(lastSocketError("bind", "binding the \(what) listener to \(on) (\(rxMTU == nil ? "CID 4" : "PSM 0x0027"))", domain)) }
        if let rxMTU {
            if cbz_bt_set_mode(fd, UInt8(CBZ_BT_MODE_EXT_FLOWCTL)) < 0 {
                throw .socket(lastSocketError(ATTBearer.enhancedModeSyscall,
                                              "asking for ECRED channels on \(on) (the kernel needs the bluetooth module's enable_ecred)", domain))
            }
            if cbz_bt_set_rcvmtu(fd, rxMTU) < 0 {
                throw .socket(lastSocketError("setsockopt(BT_RCVMTU)", "setting the Enhanced ATT listener's MTU to \(rxMTU) on \(on)", domain))
            }
        }
        if cbz_listen(fd, backlog) < 0 {
            throw .socket(lastSocketError("listen", rxMTU == nil ? "listening for ATT connections on \(on)" : "listening for Enhanced ATT bearers (PSM 0x0027) on \(on)", domain))
        }
        let wake = cbz_eventfd()
        if wake < 0 { throw .socket(lastSocketError("eventfd", "setting up the \(what) listener", .local)) }
        owned = false
        if rxMTU == nil {
            let label = name.map { "LE CID 4 on \($0) (\(address))" } ?? "LE CID 4 on any adapter"
            return ATTBearerListener(fd: fd, wakefd: wake, kind: .le(adapter: name, address: address), label: label)
        }
        let label = name.map { "LE PSM 0x0027 (ECRED) on \($0) (\(address))" } ?? "LE PSM 0x0027 (ECRED) on any adapter"
        return ATTBearerListener(fd: fd, wakefd: wake, kind: .leEnhanced(adapter: name, address: address), label: label)
    }

    /// Waits for the next connection (at most `timeout` seconds; nil waits until `close`).
    /// Throws `.closedLocally` after `close`, `.connectTimedOut` when the timeout passes.
    public func accept(timeout: Double? = nil) throws(TransportError) -> ATTBearer {
        let c = try acceptSocket(timeout: timeout)
        switch kind {
        case .unix(let path):
            return try ATTBearer(adopting: c.fd, endpoint: .unix(path: path), label: "unix:\(path) (accepted)")
        case .le(let adapter, _), .leEnhanced(let adapter, _):
            let address = c.peer ?? .any
            let leType = c.type ?? .public
            var rcv: UInt16 = 0
            let rcvMTU = cbz_bt_rcvmtu(c.fd, &rcv) == 0 ? Int(rcv) : 0
            var label = "\(address) (LE \(leType))" + (adapter.map { " via \($0)" } ?? "")
            var cids: (local: UInt16, remote: UInt16)? = nil
            if case .leEnhanced = kind {
                cids = ATTBearer.channelIDs(of: c.fd)
                label += " PSM 0x0027 CID " + (cids.map { ATTHex.handle($0.local) } ?? "?")
            }
            return try ATTBearer(adopting: c.fd, endpoint: .le(peer: address, type: leType, adapter: adapter),
                                 label: label, receiveBufferSize: max(1024, rcvMTU), channelIDs: cids)
        }
    }

    /// The next accepted socket (non-blocking), with the LE peer's address and type; the caller owns it.
    func acceptSocket(timeout: Double?) throws(TransportError) -> (fd: Int32, peer: BluetoothAddress?, type: LEAddressType?) {
        try state.withLock { s throws(TransportError) in
            if s.closed { throw TransportError.closedLocally(reason: "the listener \(label) is closed") }
            s.accepting += 1
        }
        defer {
            let release = state.withLock { s in
                s.accepting -= 1
                if s.closed && s.accepting == 0 && !s.released { s.released = true; return true }
                return false
            }
            if release { releaseFDs() }
        }
        let ms: Int32 = timeout.map { Int32(clamping: Int((max(0, $0) * 1000).rounded(.up))) } ?? -1
        while true {
            var r1: Int16 = 0, r2: Int16 = 0
            let n = cbz_poll_two(fd, CBZ_POLLIN, wakefd, CBZ_POLLIN, ms, &r1, &r2)
            if n < 0 {
                if cbz_errno() == EINTR { continue }
                throw .socket(lastSocketError("poll", "waiting for a connection on \(label)", .local))
            }
            if state.withLock({ $0.closed }) { throw .closedLocally(reason: "the listener \(label) is closed") }
            if n == 0 { throw .connectTimedOut(peer: "a connection on \(label)", seconds: timeout ?? 0) }
            if r1 == 0 { continue }
            switch kind {
            case .unix(let path):
                let c = cbz_accept(fd)
                if c < 0 {
                    let code = cbz_errno()
                    if code == EAGAIN || code == ECONNABORTED { continue }
                    throw .socket(socketError("accept", code, "accepting on \(label)", .unix(path: path)))
                }
                return (c, nil, nil)
            case .le, .leEnhanced:
                var peer = [UInt8](repeating: 0, count: 6)
                var type: UInt8 = 0
                let c = cbz_l2cap_accept(fd, &peer, &type)
                if c < 0 {
                    let code = cbz_errno()
                    if code == EAGAIN || code == ECONNABORTED { continue }
                    throw .socket(socketError("accept", code, "accepting on \(label)", .l2cap(peer: "a central")))
                }
                return (c, BluetoothAddress(uncheckedBytes: peer), LEAddressType(rawValue: type) ?? .public)
            }
        }
    }

    /// Stops listening: a running `accept` wakes and throws `.closedLocally`; a unix socket file is removed.
    public func close() {
        let release = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.closed = true
            if s.accepting > 0 {
                _ = cbz_eventfd_signal(wakefd)
                return false
            }
            s.released = true
            return true
        }
        if release { releaseFDs() }
    }
}

extension ATTBearer: EnhancedATTTransport {}

/// One LE connect's wait on the loop: the socket's POLLOUT and the timer race; the first ends it, on the loop.
private final class ConnectWait: Sendable {
    let loop: EventLoop
    let fd: Int32
    let token: UInt64
    /// Guards the continuation (taken once, by the winner) and the timer to cancel.
    let state: Lock<(continuation: CheckedContinuation<Result<Void, TransportError>, Never>?, timer: LoopTimer?)>

    init(loop: EventLoop, fd: Int32, continuation: CheckedContinuation<Result<Void, TransportError>, Never>) {
        self.loop = loop
        self.fd = fd
        token = loop.makeSourceToken()
        state = Lock((continuation, nil))
    }

    /// Registers the socket for POLLOUT and arms the timer (on the loop's thread).
    func start(timeout: Double, label: String, domain: SocketDomain) {
        let registered = loop.register(fd: fd, token: token, events: CBZ_EPOLLOUT) { [self] _ in
            finish(ATTBearer.connectOutcome(fd: fd, label: label, domain: domain), registered: true)
        }
        guard registered else {
            return finish(.failure(.socket(lastSocketError("epoll_ctl", "waiting for the connection to \(label)", domain))), registered: false)
        }
        let deadline = monotonicNanoseconds() + UInt64(max(0, timeout) * 1e9)
        let timer = loop.schedule(atNanoseconds: deadline) { [self] in
            finish(.failure(.connectTimedOut(peer: label, seconds: timeout)), registered: true)
        }
        state.withLock { $0.timer = timer }
    }

    private func finish(_ outcome: Result<Void, TransportError>, registered: Bool) {
        let (continuation, timer) = state.withLock { s in
            defer { s = (nil, nil) }
            return (s.continuation, s.timer)
        }
        guard let continuation else { return }
        timer?.cancel()
        if registered { loop.deregister(fd: fd, token: token) }
        continuation.resume(returning: outcome)
    }
}
