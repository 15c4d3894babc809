// The plain ATT peer the benches measure against: a unix-socket listener with one thread per connection that
// answers at once and counts what it receives, so that what a client costs shows, not the peer's own work.
import ATTStack
import CBlueZSocket
import Glibc
import LinuxBluetooth
import LinkCore
import Synchronization

/// Listens at `path` (AF_UNIX SOCK_SEQPACKET); each connection's thread answers Exchange MTU with 517, Write
/// Requests with Write Responses, Read Requests of any handle with the little-endian count of writes received
/// (requests and commands, over every connection), other requests with Request Not Supported, and counts Write
/// Commands. Every PDU made and read by the ATTPDU codec. With `enhancedATT` it also serves Enhanced ATT bearers
/// at PATH.eatt (the unix: equivalent of ECRED channels on PSM 0x0027), answering and counting on each the same way,
/// and reads its Server Supported Features (0x2B3A) with the EATT bit by type (Core Spec 5.4 Vol 3 Part G §7.4).
public final class PlainPeer: Sendable {
    public let path: String
    private let listener: Int32
    /// The listener at PATH.eatt, with `enhancedATT`.
    private let enhancedListener: ATTBearerListener?
    /// Guards the Enhanced ATT bearers accepted (kept until `close`), and how many since the latest CID 4
    /// connection (each numbers its CIDs 0x0040 + n).
    private let enhanced = Lock<(bearers: [ATTBearer], sinceConnect: Int)>(([], 0))
    /// Wakes the accept thread for `close`.
    private let wake: Int32
    private let requestCount = Atomic<Int>(0)
    private let commandCount = Atomic<Int>(0)
    /// The total of Write Commands `waitUntil` waits for (Int.max when nobody waits): the connection thread that
    /// counts it broadcasts on `reached`.
    private let target = Atomic<Int>(.max)
    private let reached = Lock<Void>(())
    /// The handle benches write to, and the one they read as the counter (any handle reads as the counter).
    public static let sinkHandle: UInt16 = 0x0012
    public static let counterHandle: UInt16 = 0x0014
    /// The Server Rx MTU it answers Exchange MTU with (Core Spec 5.4 Vol 3 Part F §3.4.2.2): ATT's largest.
    public static let serverRxMTU: UInt16 = UInt16(ATTMTU.maximum)
    /// With `enhancedATT`: the value handles of Client Supported Features (0x2B29, whose writes are not counted) and
    /// Server Supported Features (0x2B3A, bit 0: EATT Supported), found by Read By Type.
    public static let clientFeaturesHandle: UInt16 = 0x0020
    public static let serverFeaturesHandle: UInt16 = 0x0022
    private let servesEnhancedATT: Bool

    /// Write Requests and Write Commands received over every connection: what the counter reads.
    public var writes: Int { requestCount.load(ordering: .relaxed) + commandCount.load(ordering: .relaxed) }
    /// Write Commands received over every connection.
    public var writeCommands: Int { commandCount.load(ordering: .sequentiallyConsistent) }

    /// Listens at `path` (an old socket file there is removed first) and starts accepting; with `enhancedATT`, at
    /// PATH.eatt too, for Enhanced ATT bearers.
    public init(path: String, enhancedATT: Bool = false) throws(BareATTError) {
        self.path = path
        self.servesEnhancedATT = enhancedATT
        _ = cbz_unlink(path)
        let fd = cbz_unix_socket()
        guard fd >= 0 else { throw .syscall("socket(AF_UNIX, SOCK_SEQPACKET)", .current, during: .openingListener) }
        guard cbz_unix_bind(fd, path) == 0 else { throw .failed("bind", during: .listening(path: path), closing: fd) }
        guard cbz_listen(fd, 16) == 0 else { throw .failed("listen", during: .listening(path: path), closing: fd) }
        listener = fd
        wake = cbz_eventfd()
        guard wake >= 0 else { throw .failed("eventfd", during: .settingUpPeer, closing: fd) }
        do throws(TransportError) {
            enhancedListener = enhancedATT ? try ATTBearerListener.unixEnhanced(forUnixPath: path) : nil
        } catch {
            _ = cbz_close(wake)
            _ = cbz_close(fd)
            let e: Errno = if case .socket(let s) = error { s.errno } else { .current }
            throw .syscall("bind/listen", e, during: .listening(path: EnhancedBearerHandshake.path(forUnixPath: path)))
        }
        startDetachedThread { [self] in acceptLoop() }
        if enhancedListener != nil { startDetachedThread { [self] in acceptEnhancedLoop() } }
    }

    /// Stops accepting (the accept thread closes the listening socket) and removes the socket file; connections
    /// already accepted end when their clients close them.
    public func close() {
        _ = cbz_eventfd_signal(wake)
        _ = cbz_unlink(path)
        enhancedListener?.close()
        for b in enhanced.withLock({ s in defer { s.bearers = [] }; return s.bearers }) { b.close(reason: "the plain peer closed") }
    }

    /// Waits until the peer has counted `total` Write Commands in all (`writeCommands`), at most `timeout`
    /// seconds. One waiter at a time.
    public func waitUntil(writeCommands total: Int, timeout: Double) throws(BareATTError) {
        target.store(total, ordering: .sequentiallyConsistent)
        defer { target.store(.max, ordering: .sequentiallyConsistent) }
        let counted: Void? = reached.wait(until: { _ in writeCommands >= total ? () : nil },
                                          timeoutNanoseconds: Int(timeout * 1e9))
        if counted == nil { throw .timeout(.writeCommandsCounted(total), seconds: timeout) }
    }

    private func acceptLoop() {
        var revents: Int16 = 0
        var wakeEvents: Int16 = 0
        while true {
            guard cbz_poll_two(listener, CBZ_POLLIN, wake, CBZ_POLLIN, -1, &revents, &wakeEvents) > 0 else {
                if cbz_errno() == EINTR { continue }
                break
            }
            if wakeEvents != 0 || revents & (CBZ_POLLERR | CBZ_POLLHUP) != 0 { break }
            let c = cbz_accept(listener)
            if c < 0 {
                if cbz_errno() == EAGAIN || cbz_errno() == EINTR { continue }
                break
            }
            enhanced.withLock { $0.sinceConnect = 0 }
            startDetachedThread { [self] in serve(c) }
        }
        _ = cbz_close(listener)
        _ = cbz_close(wake)
    }

    /// One connection: answers and counts until the client closes it.
    private func serve(_ fd: Int32) {
        let inbound = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 1)
        let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
        defer {
            inbound.deallocate()
            out.deallocate()
            _ = cbz_close(fd)
        }
        // The Write Response, encoded once: the answer to nearly every request.
        let writeResponse = UnsafeMutableRawBufferPointer.allocate(byteCount: 1, alignment: 1)
        defer { writeResponse.deallocate() }
        let writeResponseLength = try! ATTPDU.writeResponse.encode(into: writeResponse)
        var revents: Int16 = 0
        var truncated: Int32 = 0
        func reply(_ buffer: UnsafeMutableRawBufferPointer, _ n: Int) {
            while cbz_send(fd, buffer.baseAddress, n) < 0 {
                guard cbz_errno() == EAGAIN || cbz_errno() == EINTR else { return }
                _ = cbz_poll_one(fd, CBZ_POLLOUT, -1, &revents)
            }
        }
        func reply(_ pdu: ATTPDU) {
            guard let n = try? pdu.encode(into: out) else { return }
            reply(out, n)
        }
        while true {
            let n = cbz_recv_datagram(fd, inbound.baseAddress, inbound.count, &truncated)
            if n > 0 {
                respond(to: UnsafeRawBufferPointer(rebasing: inbound[0..<n]),
                        writeResponse: { reply(writeResponse, writeResponseLength) }, reply: reply)
                continue
            }
            if n < 0 && (cbz_errno() == EAGAIN || cbz_errno() == EINTR) {
                _ = cbz_poll_one(fd, CBZ_POLLIN, -1, &revents)
                continue
            }
            break
        }
    }

    /// Answers (`writeResponse`, `reply`) and counts one PDU, on CID 4 or an Enhanced ATT bearer alike.
    @inline(__always)
    private func respond(to pdu: UnsafeRawBufferPointer, writeResponse: () -> Void, reply: (ATTPDU) -> Void) {
        let opcode = ATTOpcode(rawValue: pdu[0])
        switch opcode {
        case .writeCommand:
            if commandCount.add(1, ordering: .sequentiallyConsistent).newValue == target.load(ordering: .sequentiallyConsistent) {
                reached.withLockBroadcasting { _ in }
            }
        case .writeRequest:
            // The client's write of its Supported Features is not a bench write.
            let handle = pdu.count >= 3 ? pdu.littleEndianUInt16(at: 1) : 0
            if !(servesEnhancedATT && handle == PlainPeer.clientFeaturesHandle) { requestCount.add(1, ordering: .relaxed) }
            writeResponse()
        case .exchangeMTURequest:
            reply(.exchangeMTUResponse(serverRxMTU: PlainPeer.serverRxMTU))
        case .readRequest:
            let count = UInt32(truncatingIfNeeded: writes)
            let value = (0..<4).map { UInt8(truncatingIfNeeded: count >> (8 * $0)) }
            reply(.readResponse(value: value[...]))
        case .readByTypeRequest where servesEnhancedATT:
            reply(featuresAnswer(pdu))
        default:
            // Requests it does not serve, and opcodes it does not know that are not commands (§3.4.1.1).
            if opcode.kind == .request || (opcode.kind == .unknown && !opcode.isCommand) {
                reply(.errorResponse(requestOpcode: opcode, handle: 0, error: .requestNotSupported))
            }
        }
    }

    /// A Read By Type of Client or Server Supported Features in range: its value (0x00; 0x01, EATT Supported);
    /// anything else: Attribute Not Found at the range's start (Vol 3 Part F §3.4.4.1).
    private func featuresAnswer(_ pdu: UnsafeRawBufferPointer) -> ATTPDU {
        let request = try? ATTPDU.decode(Array(pdu))
        guard case .readByTypeRequest(let range, let type)? = request else {
            return .errorResponse(requestOpcode: .readByTypeRequest, handle: 0, error: .invalidPDU)
        }
        let found: (UInt16, [UInt8])? = switch type {
        case .clientSupportedFeatures: (PlainPeer.clientFeaturesHandle, [0x00])
        case .serverSupportedFeatures: (PlainPeer.serverFeaturesHandle, [0x01])
        default: nil
        }
        guard let (handle, value) = found, range.start <= handle, handle <= range.end,
              let list = try? ATTAttributeDataList([(handle: handle, value: value)]) else {
            return .errorResponse(requestOpcode: .readByTypeRequest, handle: range.start, error: .attributeNotFound)
        }
        return .readByTypeResponse(list)
    }

    /// Accepts Enhanced ATT bearers at PATH.eatt until `close`: each joins the latest CID 4 connection, numbered
    /// from 1 since it (its CIDs 0x0040 + n), and is served as CID 4 is.
    private func acceptEnhancedLoop() {
        guard let listener = enhancedListener else { return }
        while true {
            let request: EnhancedBearerRequest
            do throws(TransportError) { request = try listener.acceptEnhancedRequest() } catch {
                if case .closedLocally = error { return }
                continue
            }
            let n = enhanced.withLock { s in
                s.sinceConnect += 1
                return s.sinceConnect
            }
            if let refusal = request.refusal(hasClient: true, opened: n - 1, limit: PlainPeer.enhancedBearerLimit) {
                request.refuse(refusal)
                continue
            }
            guard let bearer = try? request.accept(mtu: Int(PlainPeer.serverRxMTU), bearer: n) else { continue }
            enhanced.withLock { $0.bearers.append(bearer) }
            bearer.start(EnhancedBearerServer(peer: self, bearer: bearer))
        }
    }

    /// How many Enhanced ATT bearers one client may open (as `--bearers` allows: 5 in all, CID 4 and 4 more).
    public static let enhancedBearerLimit = 4

    /// One PDU that arrived on an Enhanced ATT bearer, answered on it.
    fileprivate func serve(_ pdu: [UInt8], on bearer: ATTBearer) {
        func send(_ p: ATTPDU) {
            let bytes = p.bytes
            _ = try? bytes.withUnsafeBytes { b throws(TransportError) in try bearer.trySend(b) }
        }
        pdu.withUnsafeBytes { respond(to: $0, writeResponse: { send(.writeResponse) }, reply: send) }
    }
}

/// The sink of an Enhanced ATT bearer of the plain peer: every PDU answered as on CID 4.
private final class EnhancedBearerServer: ATTTransportSink {
    let peer: PlainPeer
    let bearer: ATTBearer
    init(peer: PlainPeer, bearer: ATTBearer) {
        self.peer = peer
        self.bearer = bearer
    }
    func transport(didReceive pdu: [UInt8]) { peer.serve(pdu, on: bearer) }
    func transport(didCloseWith reason: TransportError) {}
}
