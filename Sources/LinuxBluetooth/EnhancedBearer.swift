// Enhanced ATT bearers over AF_UNIX: the documented equivalent of an L2CAP ECRED channel on SPSM 0x0027 (Core Spec
// 5.4 Vol 3 Part F §3.2.11), both sides: a 4-octet request and a 4-octet answer, then ATT PDUs as on CID 4.

import ATTStack
import LinkCore
import CBlueZSocket
import Glibc

/// The unix: handshake of an Enhanced ATT bearer: the request is SPSM then the client's receive MTU, the answer
/// Result then the server's receive MTU; each field LE16, each message one 4-octet datagram.
public enum EnhancedBearerHandshake {
    /// The SPSM of Enhanced ATT (Core Spec 5.4 Vol 3 Part F §3.2.11; Assigned Numbers: 0x0027).
    public static let spsm = UInt16(CBZ_EATT_PSM)
    /// The path a peer at `unix:PATH` listens on for its Enhanced ATT bearers (the PSM 0x0027 equivalent).
    public static func path(forUnixPath path: String) -> String { path + ".eatt" }
    /// How long either side waits for the other's 4-octet message (the request, after accept; the answer, after
    /// the client's request is sent, unless the caller gives its own timeout).
    public static let messageLimit: Double = 5
    /// The CID both ends give the `n`th Enhanced ATT bearer over unix: (n = 1, 2, ...): the first dynamic LE CIDs.
    public static func channelID(bearer n: Int) -> UInt16 { UInt16(clamping: 0x0040 + n) }

    static func encode(_ first: UInt16, _ second: UInt16) -> [UInt8] {
        [UInt8(first & 0xFF), UInt8(first >> 8), UInt8(second & 0xFF), UInt8(second >> 8)]
    }

    static func decode(_ bytes: [UInt8]) -> (UInt16, UInt16)? {
        guard bytes.count == 4 else { return nil }
        return (bytes.littleEndianUInt16(at: 0), bytes.littleEndianUInt16(at: 2))
    }

    /// Waits at most `timeout` seconds for the peer's 4-octet message on `fd` (non-blocking). `waitingFor` names it
    /// in the timeout (`.handshakeTimedOut`); the peer's hang-up or a message of another length is a named EPROTO.
    static func receive(fd: Int32, timeout: Double, peer: String, waitingFor: String,
                        domain: SocketDomain) throws(TransportError) -> (UInt16, UInt16) {
        let ms = Int32(clamping: Int((max(0, timeout) * 1000).rounded(.up)))
        var revents: Int16 = 0
        var ready: Int32
        repeat { ready = cbz_poll_one(fd, CBZ_POLLIN, ms, &revents) } while ready < 0 && cbz_errno() == EINTR
        if ready < 0 { throw .socket(lastSocketError("poll", "waiting for \(waitingFor) from \(peer)", domain)) }
        if ready == 0 { throw .handshakeTimedOut(peer: peer, waitingFor: waitingFor, seconds: timeout) }
        var buffer = [UInt8](repeating: 0, count: 16)
        var truncated: Int32 = 0
        let got = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
        if got < 0 { throw .socket(lastSocketError("recv", "receiving \(waitingFor) from \(peer)", domain)) }
        guard got > 0 else {
            throw .socket(SocketError(syscall: "recv", errno: .connectionReset,
                                      context: "\(peer) closed the socket instead of sending \(waitingFor)"))
        }
        guard truncated == 0, let fields = decode(Array(buffer[0..<got])) else {
            let size = truncated == 0 ? "\(got) octets (\(ATTHex.bytes(buffer[0..<got])))" : "more than \(buffer.count) octets"
            throw .socket(SocketError(syscall: "recv", errno: Errno(EPROTO),
                                      context: "\(peer) sent \(size) as \(waitingFor), which has 4"))
        }
        return fields
    }

    static func send(fd: Int32, _ message: [UInt8], peer: String, what: String, domain: SocketDomain) throws(TransportError) {
        let n = message.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }
        if n != message.count { throw .socket(lastSocketError("send", "sending \(what) to \(peer)", domain)) }
    }
}

extension ATTBearer {
    /// Opens an Enhanced ATT bearer to the peer at `unix:PATH` (the unix: equivalent of an ECRED channel on SPSM
    /// 0x0027): connects to PATH.eatt, asks with SPSM 0x0027 and `mtu` (at least 64), and waits at most `timeout`
    /// seconds for the answer. A result other than success throws `.enhancedBearerRefused` with its code and name.
    /// The bearer's `enhancedMTU()` is the smaller MTU (Vol 3 Part F §3.2.8); its `channelIDs` are 0x0040 + n on both
    /// sides, n counting the bearers this process opened to PATH since its latest `connect(unixPath: PATH)`.
    /// `loop`: the link's event loop (the unenhanced bearer's), so that one thread serves every bearer of the link.
    public static func connectEnhanced(unixPath path: String, mtu: Int = ATTMTU.maximum,
                                       timeout: Double = defaultConnectTimeout, loop: EventLoop? = nil) throws(TransportError) -> ATTBearer {
        let eattPath = EnhancedBearerHandshake.path(forUnixPath: path)
        let peer = "unix:\(eattPath)"
        let domain = SocketDomain.unix(path: eattPath)
        let rxMTU = UInt16(clamping: max(minimumEnhancedMTU, mtu))
        let fd = cbz_unix_socket()
        if fd < 0 { throw .socket(lastSocketError("socket(AF_UNIX, SOCK_SEQPACKET)", "opening an Enhanced ATT bearer to \(peer)", domain)) }
        var owned = true
        defer { if owned { _ = cbz_close(fd) } }
        if cbz_unix_connect(fd, eattPath) < 0 {
            throw .socket(lastSocketError("connect", "connecting an Enhanced ATT bearer to \(peer)", domain))
        }
        try EnhancedBearerHandshake.send(fd: fd, EnhancedBearerHandshake.encode(EnhancedBearerHandshake.spsm, rxMTU),
                                         peer: peer, what: "the Enhanced ATT bearer request (SPSM 0x0027, MTU \(rxMTU))", domain: domain)
        let (result, serverMTU) = try EnhancedBearerHandshake.receive(
            fd: fd, timeout: timeout, peer: peer, waitingFor: "the answer to the Enhanced ATT bearer request (SPSM 0x0027)", domain: domain)
        let outcome = L2CAPConnectionResult(rawValue: result)
        guard outcome == .success else { throw .enhancedBearerRefused(peer: peer, result: outcome) }
        guard Int(serverMTU) >= minimumEnhancedMTU else {
            throw .socket(SocketError(syscall: "recv", errno: Errno(EPROTO),
                                      context: "\(peer) accepted the Enhanced ATT bearer with MTU \(serverMTU), below the minimum \(minimumEnhancedMTU) (Vol 3 Part A §4.25)"))
        }
        let n = unixBearerNumbers.withLock { numbers -> Int in
            numbers[path, default: 0] += 1
            return numbers[path]!
        }
        let cid = EnhancedBearerHandshake.channelID(bearer: n)
        owned = false
        return try ATTBearer(adopting: fd, endpoint: .unix(path: eattPath), label: "\(peer).\(n)",
                             channelIDs: (cid, cid), fixedEnhancedMTU: min(Int(rxMTU), Int(serverMTU)), loop: loop)
    }

    /// Restarts the numbering of the Enhanced ATT bearers to `unix:PATH` (a new CID 4 connection there).
    static func restartEnhancedNumbering(unixPath path: String) {
        unixBearerNumbers.withLock { _ = $0.removeValue(forKey: path) }
    }
}

extension ATTBearer {
    /// Whether `transport` is an LE bearer to the same peer (the same link, which an accepted ECRED channel on PSM
    /// 0x0027 joins): the CID 4 connection of the client this Enhanced ATT bearer belongs to.
    public func sharesLink(with transport: any ATTTransport) -> Bool {
        guard case .le(let peer, _, _) = endpoint, let other = transport as? ATTBearer,
              case .le(let otherPeer, _, _) = other.endpoint else { return false }
        return peer == otherPeer
    }
}

/// Per unix: path, how many Enhanced ATT bearers this process opened there since its latest CID 4 connection.
private let unixBearerNumbers = Lock([String: Int]())

/// One connection at PATH.eatt whose request has been read, waiting for its answer: `accept` makes it a bearer,
/// `refuse` answers a result and closes it. Unanswered, it is closed when released.
public final class EnhancedBearerRequest: Sendable {
    /// The SPSM the client asked for (0x0027 for EATT).
    public let spsm: UInt16
    /// The client's receive MTU.
    public let clientMTU: Int
    /// "unix:/tmp/sim.sock.eatt".
    public let peer: String
    private let path: String
    // Guards the accepted socket until accept or refuse hands it on or closes it (nil after).
    private let socket: Lock<Int32?>

    init(fd: Int32, spsm: UInt16, clientMTU: Int, path: String) {
        self.spsm = spsm
        self.clientMTU = clientMTU
        self.path = path
        self.peer = "unix:\(path)"
        socket = Lock(fd)
    }

    deinit {
        if let fd = socket.withLock({ $0 }) { _ = cbz_close(fd) }
    }

    private func take() throws(TransportError) -> Int32 {
        guard let fd = socket.withLock({ s -> Int32? in defer { s = nil }; return s }) else {
            throw .closedLocally(reason: "the Enhanced ATT bearer request at \(peer) was already answered")
        }
        return fd
    }

    /// Why a server refuses this request, or nil to accept it: an SPSM other than 0x0027 ("SPSM not supported"), an MTU
    /// below 64 ("unacceptable parameters", Vol 3 Part A §4.25), no client to join or `opened` already at `limit`
    /// ("no resources available").
    public func refusal(hasClient: Bool, opened: Int, limit: Int) -> L2CAPConnectionResult? {
        if spsm != EnhancedBearerHandshake.spsm { return .spsmNotSupported }
        if clientMTU < ATTBearer.minimumEnhancedMTU { return .unacceptableParameters }
        if !hasClient || opened >= limit { return .noResourcesAvailable }
        return nil
    }

    /// Answers success with `mtu` (at least 64) and returns the bearer, numbered `bearer` (its CIDs 0x0040 + n):
    /// its ATT_MTU is the smaller of both MTUs.
    public func accept(mtu: Int, bearer n: Int) throws(TransportError) -> ATTBearer {
        let fd = try take()
        let serverMTU = UInt16(clamping: max(ATTBearer.minimumEnhancedMTU, mtu))
        do {
            try EnhancedBearerHandshake.send(fd: fd, EnhancedBearerHandshake.encode(L2CAPConnectionResult.success.rawValue, serverMTU),
                                             peer: peer, what: "the Enhanced ATT bearer's acceptance", domain: .unix(path: path))
        } catch {
            _ = cbz_close(fd)
            throw error
        }
        let cid = EnhancedBearerHandshake.channelID(bearer: n)
        return try ATTBearer(adopting: fd, endpoint: .unix(path: path), label: "\(peer).\(n) (accepted)",
                             channelIDs: (cid, cid), fixedEnhancedMTU: min(clientMTU, Int(serverMTU)))
    }

    /// Answers `result` (a refusal) and closes the connection.
    public func refuse(_ result: L2CAPConnectionResult) {
        guard let fd = try? take() else { return }
        try? EnhancedBearerHandshake.send(fd: fd, EnhancedBearerHandshake.encode(result.rawValue, 0),
                                          peer: peer, what: "the refusal \(result)", domain: .unix(path: path))
        _ = cbz_close(fd)
    }
}

extension ATTBearerListener {
    /// Listens at PATH.eatt for the Enhanced ATT bearers of the peer at `unix:PATH`.
    public static func unixEnhanced(forUnixPath path: String, backlog: Int32 = 16) throws(TransportError) -> ATTBearerListener {
        try unix(path: EnhancedBearerHandshake.path(forUnixPath: path), backlog: backlog)
    }

    /// Accepts the next connection (within `timeout`, as `accept`) on a unix listener at PATH.eatt and reads its
    /// request, at most `requestTimeout` seconds (`.handshakeTimedOut` naming it; the connection is closed).
    public func acceptEnhancedRequest(timeout: Double? = nil,
                                      requestTimeout: Double = EnhancedBearerHandshake.messageLimit) throws(TransportError) -> EnhancedBearerRequest {
        guard case .unix(let path) = kind else {
            throw .closedLocally(reason: "\(label) is not a unix: listener for Enhanced ATT bearers")
        }
        let fd = try acceptSocket(timeout: timeout).fd
        do {
            let (spsm, mtu) = try EnhancedBearerHandshake.receive(
                fd: fd, timeout: requestTimeout, peer: "a client of unix:\(path)",
                waitingFor: "an Enhanced ATT bearer request (SPSM, MTU)", domain: .unix(path: path))
            return EnhancedBearerRequest(fd: fd, spsm: spsm, clientMTU: Int(mtu), path: path)
        } catch {
            _ = cbz_close(fd)
            throw error
        }
    }
}
