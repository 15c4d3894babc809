// A hostile ATT server on an AF_UNIX SOCK_SEQPACKET socket (each datagram one ATT PDU, as on L2CAP CID 4):
// the one GATT server (GATTServer; Core Spec 5.4 Vol 3 Part F §3.4, Part G) wrapped by faults that break the protocol in one chosen way.
// Blocking sockets and a thread per connection: the peer must be able to stop reading, flood, or go silent.
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTServer
#if canImport(Glibc)
import Glibc
#endif

/// What the hostile peer saw and did, for tests to wait on and check.
public struct HostilePeerStats: Sendable, Equatable {
    public var connections = 0
    public var closedConnections = 0
    /// Requests received (every PDU whose opcode is a request).
    public var requests = 0
    /// Requests by opcode.
    public var requestsByOpcode: [UInt8: Int] = [:]
    /// Write Commands received.
    public var commands = 0
    /// Handle Value Confirmations received.
    public var confirmations = 0
    public var notificationsSent = 0
    public var indicationsSent = 0
    /// Floods and storms that ran to their end.
    public var floodsDone = 0
    public var stormsDone = 0
    /// Markers sent after unsolicited responses.
    public var markersSent = 0
    /// Execute Write flags received, in order (0x00 cancel, 0x01 write).
    public var executeWrites: [UInt8] = []
    /// Sockets the peer closed on purpose (`close` scenario).
    public var closedOnPurpose = 0
}

/// A hostile ATT peer listening on a unix socket: accepts any number of connections and runs the scenario on
/// each (Core Spec 5.4 Vol 3 Part F; see `HostileScenario`).
public final class HostilePeer: @unchecked Sendable {
    // @unchecked: `condition` guards `stats`, `connectionFDs` and `closed`; the fds are set once in init.
    public let path: String
    public let options: HostileOptions
    private let listenFD: Int32
    private let wakePipe: (read: Int32, write: Int32)
    private let condition = NSCondition()
    private var _stats = HostilePeerStats()
    private var connectionFDs: Set<Int32> = []
    private var threads = 0
    private var closed = false

    /// Listens at `path` (a stale socket file is replaced). Call `start()` to accept.
    public init(path: String, options: HostileOptions) throws {
        self.path = path
        self.options = options
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HostilePeerError("socket(AF_UNIX, SOCK_SEQPACKET)", errno) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            Glibc.close(fd)
            throw HostilePeerError("bind: path too long", ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { p in
            for (i, b) in bytes.enumerated() { p[i] = b }
            p[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw HostilePeerError("bind/listen at \(path)", e)
        }
        var p: [Int32] = [-1, -1]
        guard pipe(&p) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw HostilePeerError("pipe2", e)
        }
        for f in [p[0], p[1]] { _ = fcntl(f, F_SETFD, FD_CLOEXEC) }
        listenFD = fd
        wakePipe = (p[0], p[1])
    }

    deinit {
        Glibc.close(listenFD)
        Glibc.close(wakePipe.read)
        Glibc.close(wakePipe.write)
    }

    /// "unix:PATH", as `mirror` takes it.
    public var target: String { "unix:\(path)" }

    /// A copy of the counters.
    public var stats: HostilePeerStats {
        condition.lock()
        defer { condition.unlock() }
        return _stats
    }

    /// Waits (without polling) until `predicate` holds for the counters, at most `timeout` seconds.
    @discardableResult
    public func wait(timeout: Double, until predicate: (HostilePeerStats) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(_stats) {
            if !condition.wait(until: deadline) { return predicate(_stats) }
        }
        return true
    }

    func update(_ body: (inout HostilePeerStats) -> Void) {
        condition.lock()
        body(&_stats)
        condition.broadcast()
        condition.unlock()
    }

    /// Accepts connections on a thread of its own until `close()`.
    public func start() {
        retainThread()
        let t = Thread { [self] in
            acceptLoop()
            releaseThread()
        }
        t.name = "hostile-accept"
        t.start()
    }

    /// Stops accepting, shuts every connection down and waits (at most 10 s) for their threads to end.
    public func close() {
        condition.lock()
        closed = true
        for fd in connectionFDs { shutdown(fd, Int32(SHUT_RDWR)) }
        condition.unlock()
        var one: UInt8 = 1
        _ = write(wakePipe.write, &one, 1)
        _ = wait(timeout: 10) { _ in self.threads == 0 }
        unlink(path)
    }

    /// Called with `condition` not held.
    private func retainThread() {
        condition.lock()
        threads += 1
        condition.unlock()
    }

    private func releaseThread() {
        condition.lock()
        threads -= 1
        condition.broadcast()
        condition.unlock()
    }

    private func acceptLoop() {
        while true {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakePipe.read, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, -1)
            if n < 0 { if errno == EINTR { continue }; return }
            if fds[1].revents != 0 { return }
            let c = accept(listenFD, nil, nil)
            if c < 0 { continue }
            _ = fcntl(c, F_SETFD, FD_CLOEXEC)
            condition.lock()
            if closed {
                condition.unlock()
                Glibc.close(c)
                return
            }
            connectionFDs.insert(c)
            threads += 1
            _stats.connections += 1
            let number = _stats.connections
            condition.broadcast()
            condition.unlock()
            let connection = HostileConnection(fd: c, peer: self, number: number)
            let t = Thread { [self] in
                connection.run()
                condition.lock()
                connectionFDs.remove(c)
                _stats.closedConnections += 1
                condition.broadcast()
                condition.unlock()
                // Closed after it left the set, so `close()` never shuts down a reused fd number.
                Glibc.close(c)
                releaseThread()
            }
            t.name = "hostile-conn"
            t.start()
        }
    }
}

/// A failed syscall of the hostile peer: which one and errno's name.
public struct HostilePeerError: Error, CustomStringConvertible {
    public var what: String
    public var code: Int32
    init(_ what: String, _ code: Int32) {
        self.what = what
        self.code = code
    }
    public var description: String { "\(what) failed: \(String(cString: strerror(code))) (errno \(code))" }
}

/// One connection: reads requests on its own thread and answers them per the scenario.
final class HostileConnection: @unchecked Sendable {
    // @unchecked: the mutable properties below are touched only by the connection's own thread.
    let fd: Int32
    let peer: HostilePeer
    let options: HostileOptions
    /// 1 for the peer's first connection, 2 for the next, ...
    let number: Int
    /// The well-behaved server this connection's faults wrap, with its own copy of the database.
    var server: ATTServer
    var session = ATTSession()
    var mtu: Int {
        get { session.mtu }
        set { session.mtu = newValue }
    }
    var victimsSeen = 0
    var firstDiscoveryStart: [UInt8: UInt16] = [:]
    /// A flood runs on a thread of its own; `run` waits for it before returning.
    let floodDone = DispatchSemaphore(value: 0)
    var floodRunning = false

    init(fd: Int32, peer: HostilePeer, number: Int) {
        self.fd = fd
        self.peer = peer
        self.number = number
        self.options = peer.options
        self.server = ATTServer(database: HostilePeer.database, serverRxMTU: UInt16(clamping: peer.options.serverRxMTU))
    }

    /// The server's answer to a request, with discovery bent per `mode`.
    func answer(_ bytes: [UInt8], mode: DiscoveryMode) -> [UInt8] {
        var request = (try? ATTPDU.decode(bytes))
        if case .executeWriteRequest(let flags)? = request { peer.update { $0.executeWrites.append(flags.rawValue) } }
        if case .from(let start) = mode, let r = request { request = Discovery.starting(r, at: start) }
        let reply = request.map { server.answer($0, session: &session) } ?? server.answer(bytes: bytes, session: &session)
        guard case .now(var answer) = reply else { return Self.notSupported(bytes[0]) }
        if case .backwards = mode, let r = request, let start = Discovery.start(r) { answer = Discovery.backwards(answer, start: start) }
        return answer.bytes
    }

    /// Request Not Supported for `opcode` (Vol 3 Part F §3.4.1.1).
    static func notSupported(_ opcode: UInt8) -> [UInt8] {
        ATTPDU.errorResponse(requestOpcode: ATTOpcode(rawValue: opcode), handle: 0, error: .requestNotSupported).bytes
    }

    func run() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let later = number > 1
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            let pdu = Array(buffer[0..<n])
            if later && options.scenario == .laterConnectionsSilent {
                countSilently(pdu)
                continue
            }
            if later && options.scenario == .laterConnectionsStopReading {
                if pdu.first == 0x02 { _ = handle(pdu) } else { countSilently(pdu) }
                // Read nothing more: wait, without polling, for the client to close (or `close()` to shut the
                // socket down), while whatever the client sends fills the buffers.
                var p = pollfd(fd: fd, events: 0, revents: 0)
                while poll(&p, 1, -1) < 0 && errno == EINTR {}
                break
            }
            if !handle(pdu) { break }
        }
        shutdown(fd, Int32(SHUT_RDWR))
        if floodRunning { floodDone.wait() }
    }

    /// Counts a PDU that gets no answer.
    func countSilently(_ pdu: [UInt8]) {
        guard let op = pdu.first else { return }
        peer.update { s in
            if op == 0x52 { s.commands += 1 } else if HostileScenario.requestOpcodes.contains(op) {
                s.requests += 1
                s.requestsByOpcode[op, default: 0] += 1
            }
        }
    }

    /// Sends one datagram (blocking); false when the socket is gone.
    @discardableResult
    func send(_ pdu: [UInt8]) -> Bool {
        pdu.withUnsafeBytes { p in
            while true {
                let n = Glibc.send(fd, p.baseAddress, p.count, Int32(MSG_NOSIGNAL))
                if n < 0 && errno == EINTR { continue }
                return n == p.count
            }
        }
    }

    /// Handles one PDU from the client; false closes the connection.
    func handle(_ pdu: [UInt8]) -> Bool {
        guard let op = pdu.first else { return true }
        if op == 0x1E {
            peer.update { $0.confirmations += 1 }
            return true
        }
        if op == 0x52 {
            peer.update { $0.commands += 1 }
            _ = server.answer(bytes: pdu, session: &session)
            return true
        }
        guard HostileScenario.requestOpcodes.contains(op) else {
            if op & 0x40 == 0 { send(Self.notSupported(op)) }
            return true
        }
        peer.update {
            $0.requests += 1
            $0.requestsByOpcode[op, default: 0] += 1
        }
        if let s = (try? ATTPDU.decode(pdu)).flatMap(Discovery.start), firstDiscoveryStart[op] == nil { firstDiscoveryStart[op] = s }
        var attacked = options.effectiveVictims.contains(op)
        if attacked {
            victimsSeen += 1
            if let nth = options.effectiveNth, nth != victimsSeen { attacked = false }
        }
        guard attacked else {
            send(answer(pdu, mode: .normal))
            afterAnswer(pdu)
            return true
        }
        return attack(pdu)
    }

    /// The scenario's treatment of an attacked request; false closes the connection.
    func attack(_ pdu: [UInt8]) -> Bool {
        let op = pdu[0]
        switch options.scenario {
        case .wellBehaved, .laterConnectionsSilent, .laterConnectionsStopReading:
            // (The later-connections scenarios attack no request: their connections after the first are handled in `run`.)
            send(answer(pdu, mode: .normal))
        case .wrongOpcode:
            var a = answer(pdu, mode: .normal)
            a[0] = a[0] == 0x0B ? 0x0D : 0x0B
            send(a)
        case .errorForOtherRequest:
            let other: UInt8 = op == 0x0A ? 0x12 : 0x0A
            let handle = pdu.count >= 3 ? pdu.littleEndianUInt16(at: 1) : 0
            send(ATTPDU.errorResponse(requestOpcode: ATTOpcode(rawValue: other), handle: handle, error: .attributeNotFound).bytes)
        case .unsolicitedResponses:
            send(answer(pdu, mode: .normal))
            afterAnswer(pdu)
            // Responses the client never expects after the MTU exchange: Exchange MTU, Read Multiple (Variable)
            // Responses, and a Handle Value Confirmation (this client sends no indications); then the marker.
            // The empty Read Multiple Variable Response is raw: the codec makes no PDU without a tuple.
            send(ATTPDU.exchangeMTUResponse(serverRxMTU: 23).bytes)
            send(ATTPDU.readMultipleResponse(values: [0x01, 0x02]).bytes)
            send([ATTOpcode.readMultipleVariableResponse.rawValue])
            send(ATTPDU.handleValueConfirmation.bytes)
            send(ATTPDU.handleValueNotification(handle: HostilePeer.markerHandle, value: Array("marker".utf8)[...]).bytes)
            peer.update { $0.markersSent += 1 }
        case .lateResponse:
            usleep(UInt32(max(0, options.delayMilliseconds)) * 1000)
            return send(answer(pdu, mode: .normal))
        case .truncated:
            send(Array(answer(pdu, mode: .normal).prefix(2)))
        case .oversized:
            let a = answer(pdu, mode: .normal)
            send(a + [UInt8](repeating: 0, count: max(0, mtu + 8 - a.count)))
        case .overBuffer:
            let a = answer(pdu, mode: .normal)
            send(a + [UInt8](repeating: 0, count: max(0, 2000 - a.count)))
        case .mtuBelowMinimum, .mtuAboveMaximum:
            guard case .exchangeMTURequest(let client)? = (try? ATTPDU.decode(pdu)) else { send(answer(pdu, mode: .normal)); return true }
            let server: UInt16 = options.scenario == .mtuBelowMinimum ? 10 : 0xFFFF
            mtu = ATTMTU.negotiated(clientRxMTU: client, serverRxMTU: server)
            send(ATTPDU.exchangeMTUResponse(serverRxMTU: server).bytes)
        case .handlesBackwards:
            send(answer(pdu, mode: .backwards))
        case .handlesRepeat:
            send(answer(pdu, mode: .from(firstDiscoveryStart[op] ?? 1)))
        case .endlessBlob:
            let full = [UInt8](repeating: 0xEE, count: ATTMTU.readBlobPartBudget(mtu))[...]
            send((op == 0x0A ? ATTPDU.readResponse(value: full) : .readBlobResponse(value: full)).bytes)
        case .prepareEchoDiffers:
            // The echo's first value byte flipped, or (an empty part) its offset moved by one.
            let a = answer(pdu, mode: .normal)
            guard case .prepareWriteResponse(let h, let offset, let value)? = (try? ATTPDU.decode(a)) else { send(a); return true }
            var bent = Array(value)
            if bent.isEmpty {
                send(ATTPDU.prepareWriteResponse(handle: h, offset: offset &+ 1, value: []).bytes)
            } else {
                bent[0] ^= 0x01
                send(ATTPDU.prepareWriteResponse(handle: h, offset: offset, value: bent[...]).bytes)
            }
        case .notificationFlood, .indicationStorm:
            send(answer(pdu, mode: .normal))
            afterAnswer(pdu)
        case .silent:
            break
        case .close:
            peer.update { $0.closedOnPurpose += 1 }
            return false
        }
        return true
    }

    /// What follows an answer: a CCCD write starts the flood or the storm.
    func afterAnswer(_ pdu: [UInt8]) {
        guard case .writeRequest(HostilePeer.cccdHandle, let value)? = (try? ATTPDU.decode(pdu)), value.first != 0 else { return }
        let count = options.effectiveCount
        let h = HostilePeer.longValueHandle
        /// The i-th value: i as 4 little-endian bytes.
        @Sendable func counter(_ i: Int) -> ArraySlice<UInt8> {
            let v = UInt32(truncatingIfNeeded: i)
            return [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)][...]
        }
        switch options.scenario {
        case .notificationFlood:
            floodRunning = true
            let t = Thread { [self] in
                var sent = 0
                for i in 0..<count {
                    if !send(ATTPDU.handleValueNotification(handle: h, value: counter(i)).bytes) { break }
                    sent += 1
                    if sent % 4096 == 0 { peer.update { $0.notificationsSent += 4096 } }
                }
                peer.update {
                    $0.notificationsSent += sent % 4096
                    if sent == count { $0.floodsDone += 1 }
                }
                floodDone.signal()
            }
            t.name = "hostile-flood"
            t.start()
        case .indicationStorm:
            // On this thread: nothing is read (no confirmation either) until the storm ends.
            var sent = 0
            for i in 0..<count {
                if !send(ATTPDU.handleValueIndication(handle: h, value: counter(i)).bytes) { break }
                sent += 1
            }
            peer.update {
                $0.indicationsSent += sent
                if sent == count { $0.stormsDone += 1 }
            }
        default:
            break
        }
    }
}
