// A hostile ATT server on an AF_UNIX SOCK_SEQPACKET socket (each datagram one ATT PDU, as on L2CAP CID 4): a
// GATTServerHost (Core Spec 5.4 Vol 3 Part F §3.4, Part G) whose inbound hook breaks the protocol in one chosen way.
// The host accepts, reads, answers, delays and closes; a flood streams, a storm borrows the socket (`lend`).
import ATTStack
import LinuxBluetooth
import LinkCore
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
/// each (Core Spec 5.4 Vol 3 Part F; see `HostileScenario`). Its lock is taken inside the host's, never around a call into it.
public final class HostilePeer: Sendable {
    public let path: String
    public let options: HostileOptions
    private let listener: ATTBearerListener
    private let host: GATTServerHost
    private let state = Lock(State())

    struct State {
        var stats = HostilePeerStats()
        /// Each open connection's own counts, by its `ATTServerConnection`.
        var connections: [ObjectIdentifier: Connection] = [:]
        /// The accept thread runs (from `start()` until the listener closes).
        var accepting = false
    }

    /// What the scenario keeps of one connection.
    struct Connection {
        /// 1 for the peer's first connection, 2 for the next, ...
        let number: Int
        var victimsSeen = 0
        var firstDiscoveryStart: [UInt8: UInt16] = [:]
    }

    /// Listens at `path` (a stale socket file is replaced). Call `start()` to accept.
    public init(path: String, options: HostileOptions) throws {
        self.path = path
        self.options = options
        listener = try ATTBearerListener.unix(path: path)
        let link = HookOwner<HostilePeer>()
        var hooks = GATTServerHost.Hooks()
        hooks.inbound = { bytes, c in link.owner?.inbound(bytes, c) ?? .drop }
        hooks.serve = { pdu, c, ctx in link.owner?.serve(pdu, c, &ctx) ?? .none }
        hooks.answered = { pdu, c in link.owner?.answered(pdu, c) }
        hooks.attached = { c, _ in link.owner?.attached(c) }
        hooks.closed = { c, _ in link.owner?.closed(c) }
        // Each connection gets its own copy of the database: no client sees another's writes.
        host = GATTServerHost(database: Self.database, serverRxMTU: UInt16(clamping: options.serverRxMTU), hooks: hooks,
                              databasePerConnection: true)
        link.set(self)
    }

    /// "unix:PATH", as `mirror` takes it.
    public var target: String { "unix:\(path)" }

    /// A copy of the counters.
    public var stats: HostilePeerStats { state.withLock { $0.stats } }

    /// Waits (without polling) until `predicate` holds for the counters, at most `timeout` seconds.
    @discardableResult
    public func wait(timeout: Double, until predicate: (HostilePeerStats) -> Bool) -> Bool {
        waitFor(timeout) { predicate($0.stats) }
    }

    /// Waits until `predicate` holds for the state (every change broadcasts), at most `timeout` seconds.
    private func waitFor(_ timeout: Double, _ predicate: (State) -> Bool) -> Bool {
        state.wait(until: { s in predicate(s) ? true : nil }, timeoutNanoseconds: Int(max(0, timeout) * 1e9)) ?? false
    }

    func update(_ body: (inout HostilePeerStats) -> Void) {
        state.withLockBroadcasting { body(&$0.stats) }
    }

    /// Accepts connections (the host's accept thread) until `close()`.
    public func start() {
        state.withLock { $0.accepting = true }
        host.acceptConnections(on: listener) { [self] _ in state.withLockBroadcasting { $0.accepting = false } }
    }

    /// Stops accepting, closes every connection (a borrowed socket too) and waits, at most 10 s each, for the accept
    /// thread and the connections to end.
    public func close() {
        listener.close()
        // The accept thread wakes at once (the listener's eventfd); a connection it attached just before is closed below.
        _ = waitFor(10) { !$0.accepting }
        host.disconnectAll(reason: "the hostile peer is closing")
        _ = waitFor(10) { $0.connections.isEmpty }
    }

    // MARK: - the host's events

    private func attached(_ c: ATTServerConnection) {
        state.withLockBroadcasting { s in
            s.stats.connections += 1
            s.connections[ObjectIdentifier(c)] = Connection(number: s.stats.connections)
        }
    }

    private func closed(_ c: ATTServerConnection) {
        state.withLockBroadcasting { s in
            s.connections[ObjectIdentifier(c)] = nil
            s.stats.closedConnections += 1
        }
    }

    /// Request Not Supported for `opcode` (Vol 3 Part F §3.4.1.1).
    static func notSupported(_ opcode: UInt8) -> [UInt8] {
        ATTPDU.errorResponse(requestOpcode: ATTOpcode(rawValue: opcode), handle: 0, error: .requestNotSupported).bytes
    }

    /// The scenario's treatment of one PDU from the client: counted, then served, bent, delayed, dropped or closed on.
    private func inbound(_ bytes: [UInt8], _ c: ATTServerConnection) -> ATTInterception {
        guard let op = bytes.first else { return .drop }
        let later = (state.withLock { $0.connections[ObjectIdentifier(c)]?.number } ?? 1) > 1
        if later && options.scenario == .laterConnectionsSilent {
            countSilently(op)
            return .drop
        }
        if later && options.scenario == .laterConnectionsStopReading {
            stopReading(c)
            if op == 0x02 { return handle(bytes, op, c) }
            countSilently(op)
            return .drop
        }
        return handle(bytes, op, c)
    }

    /// Reads nothing more after the PDU being delivered: the socket is borrowed until the client closes it, while
    /// whatever it sends fills the buffers; then the connection closes.
    private func stopReading(_ c: ATTServerConnection) {
        c.lend { fd in
            guard let fd else { return }
            // Waits, without polling, for the client's hang-up (POLLHUP), or for the peer's close, which shuts the
            // lent socket down (`GATTServerHost.disconnectAll`).
            var p = pollfd(fd: fd, events: 0, revents: 0)
            while poll(&p, 1, -1) < 0 && errno == EINTR {}
            c.close(reason: "the client closed the connection this peer stopped reading")
        }
    }

    /// Counts a PDU that gets no answer.
    private func countSilently(_ op: UInt8) {
        update { s in
            if op == 0x52 { s.commands += 1 } else if HostileScenario.requestOpcodes.contains(op) {
                s.requests += 1
                s.requestsByOpcode[op, default: 0] += 1
            }
        }
    }

    /// Counts one PDU and picks its treatment: requests the scenario attacks go to `attack`, the rest are served.
    private func handle(_ bytes: [UInt8], _ op: UInt8, _ c: ATTServerConnection) -> ATTInterception {
        if op == 0x1E {
            update { $0.confirmations += 1 }
            return .drop
        }
        if op == 0x52 {
            update { $0.commands += 1 }
            return .serve
        }
        guard HostileScenario.requestOpcodes.contains(op) else { return op & 0x40 == 0 ? .reply(Self.notSupported(op)) : .drop }
        let id = ObjectIdentifier(c)
        let start = (try? ATTPDU.decode(bytes)).flatMap(Discovery.start)
        let (attacked, firstStart) = state.withLockBroadcasting { s -> (Bool, UInt16?) in
            s.stats.requests += 1
            s.stats.requestsByOpcode[op, default: 0] += 1
            guard var conn = s.connections[id] else { return (false, nil) }
            defer { s.connections[id] = conn }
            if let start, conn.firstDiscoveryStart[op] == nil { conn.firstDiscoveryStart[op] = start }
            guard options.effectiveVictims.contains(op) else { return (false, nil) }
            conn.victimsSeen += 1
            if let nth = options.effectiveNth, nth != conn.victimsSeen { return (false, nil) }
            return (true, conn.firstDiscoveryStart[op])
        }
        guard attacked else { return .serve }
        return attack(bytes, op, c, firstDiscoveryStart: firstStart)
    }

    /// The scenario's treatment of an attacked request: the host serves, delays, drops or closes; a bent answer is
    /// made from the server's own in the host's context and sent as raw bytes.
    private func attack(_ pdu: [UInt8], _ op: UInt8, _ c: ATTServerConnection, firstDiscoveryStart: UInt16?) -> ATTInterception {
        switch options.scenario {
        case .wellBehaved, .laterConnectionsSilent, .laterConnectionsStopReading, .notificationFlood, .indicationStorm:
            // (The later-connections scenarios attack no request: their connections after the first are handled in
            // `inbound`; a flood or a storm starts after the CCCD write's answer, in `answered`.)
            return .serve
        case .lateResponse: return .delay(milliseconds: max(0, options.delayMilliseconds))
        case .silent: return .drop
        case .floodInRequest:
            // The request is never answered; notifications go out as fast as the socket takes them meanwhile.
            let count = options.effectiveCount, h = Self.longValueHandle
            let value = [UInt8](repeating: 0x46, count: 20)[...]
            c.stream({ i, _ in i < count ? ATTPDU.handleValueNotification(handle: h, value: value).bytes : nil }) { [self] sent, finished in
                update {
                    $0.notificationsSent += sent
                    if finished { $0.floodsDone += 1 }
                }
            }
            return .drop
        case .close:
            update { $0.closedOnPurpose += 1 }
            return .close(reason: "the close scenario closes on this request")
        default:
            host.withContext { ctx in bend(pdu, op, c, firstDiscoveryStart: firstDiscoveryStart, &ctx) }
            return .drop
        }
    }

    /// Sends the bent answer of the scenarios that answer wrongly (under the host's lock).
    private func bend(_ pdu: [UInt8], _ op: UInt8, _ c: ATTServerConnection, firstDiscoveryStart: UInt16?,
                      _ ctx: inout GATTServerHost.Context) {
        switch options.scenario {
        case .wrongOpcode:
            var a = answer(pdu, .normal, c, &ctx)
            a[0] = a[0] == 0x0B ? 0x0D : 0x0B
            ctx.sendRaw(a, to: c)
        case .errorForOtherRequest:
            let other: UInt8 = op == 0x0A ? 0x12 : 0x0A
            let handle = pdu.count >= 3 ? pdu.littleEndianUInt16(at: 1) : 0
            ctx.sendRaw(ATTPDU.errorResponse(requestOpcode: ATTOpcode(rawValue: other), handle: handle, error: .attributeNotFound).bytes, to: c)
        case .unsolicitedResponses:
            ctx.sendRaw(answer(pdu, .normal, c, &ctx), to: c)
            // Responses the client never expects after the MTU exchange: Exchange MTU, Read Multiple (Variable)
            // Responses, and a Handle Value Confirmation (this client sends no indications); then the marker.
            // The empty Read Multiple Variable Response is raw: the codec makes no PDU without a tuple.
            ctx.sendRaw(ATTPDU.exchangeMTUResponse(serverRxMTU: 23).bytes, to: c)
            ctx.sendRaw(ATTPDU.readMultipleResponse(values: [0x01, 0x02]).bytes, to: c)
            ctx.sendRaw([ATTOpcode.readMultipleVariableResponse.rawValue], to: c)
            ctx.sendRaw(ATTPDU.handleValueConfirmation.bytes, to: c)
            ctx.sendRaw(ATTPDU.handleValueNotification(handle: Self.markerHandle, value: Array("marker".utf8)[...]).bytes, to: c)
            update { $0.markersSent += 1 }
        case .truncated:
            ctx.sendRaw(Array(answer(pdu, .normal, c, &ctx).prefix(2)), to: c)
        case .oversized:
            let a = answer(pdu, .normal, c, &ctx)
            ctx.sendRaw(a + [UInt8](repeating: 0, count: max(0, ctx.session(of: c).mtu + 8 - a.count)), to: c)
        case .overBuffer:
            let a = answer(pdu, .normal, c, &ctx)
            ctx.sendRaw(a + [UInt8](repeating: 0, count: max(0, 2000 - a.count)), to: c)
        case .mtuBelowMinimum, .mtuAboveMaximum:
            guard case .exchangeMTURequest(let client)? = (try? ATTPDU.decode(pdu)) else { return ctx.sendRaw(answer(pdu, .normal, c, &ctx), to: c) }
            let server: UInt16 = options.scenario == .mtuBelowMinimum ? 10 : 0xFFFF
            ctx.updateSession(of: c) { $0.mtu = ATTMTU.negotiated(clientRxMTU: client, serverRxMTU: server) }
            ctx.sendRaw(ATTPDU.exchangeMTUResponse(serverRxMTU: server).bytes, to: c)
        case .handlesBackwards:
            ctx.sendRaw(answer(pdu, .backwards, c, &ctx), to: c)
        case .handlesRepeat:
            ctx.sendRaw(answer(pdu, .from(firstDiscoveryStart ?? 1), c, &ctx), to: c)
        case .endlessServices:
            // Found at the start handle, its group ending there (Part F §3.4.3.4's Handles Information List).
            let start = pdu.count >= 3 ? pdu.littleEndianUInt16(at: 1) : 1
            ctx.sendRaw([ATTOpcode.findByTypeValueResponse.rawValue, UInt8(start & 0xFF), UInt8(start >> 8), UInt8(start & 0xFF), UInt8(start >> 8)], to: c)
        case .endlessBlob:
            let full = [UInt8](repeating: 0xEE, count: ATTMTU.readBlobPartBudget(ctx.session(of: c).mtu))[...]
            ctx.sendRaw((op == 0x0A ? ATTPDU.readResponse(value: full) : .readBlobResponse(value: full)).bytes, to: c)
        case .prepareEchoDiffers:
            // The echo's first value byte flipped, or (an empty part) its offset moved by one.
            let a = answer(pdu, .normal, c, &ctx)
            guard case .prepareWriteResponse(let h, let offset, let value)? = (try? ATTPDU.decode(a)) else { return ctx.sendRaw(a, to: c) }
            var bent = Array(value)
            if bent.isEmpty {
                ctx.sendRaw(ATTPDU.prepareWriteResponse(handle: h, offset: offset &+ 1, value: []).bytes, to: c)
            } else {
                bent[0] ^= 0x01
                ctx.sendRaw(ATTPDU.prepareWriteResponse(handle: h, offset: offset, value: bent[...]).bytes, to: c)
            }
        case .wellBehaved, .laterConnectionsSilent, .laterConnectionsStopReading, .notificationFlood, .indicationStorm,
             .lateResponse, .silent, .close, .floodInRequest:
            break
        }
    }

    /// The server's answer to `bytes` from `c` (under the host's lock), with discovery bent per `mode`.
    private func answer(_ bytes: [UInt8], _ mode: DiscoveryMode, _ c: ATTServerConnection, _ ctx: inout GATTServerHost.Context) -> [UInt8] {
        var request: ATTPDU? = nil
        let reply: ATTServerReply
        switch ATTServer.decode(bytes) {
        case .malformed(_, let r): reply = r
        case .pdu(let p):
            request = p
            if case .from(let start) = mode { reply = serve(Discovery.starting(p, at: start), c, &ctx) } else { reply = serve(p, c, &ctx) }
        }
        guard case .now(var answer) = reply else { return Self.notSupported(bytes[0]) }
        if case .backwards = mode, let r = request, let start = Discovery.start(r) { answer = Discovery.backwards(answer, start: start) }
        return answer.bytes
    }

    /// The server's answer to a decoded PDU (the host's `serve` hook, and the bent answers): Execute Write flags counted.
    private func serve(_ pdu: ATTPDU, _ c: ATTServerConnection, _ ctx: inout GATTServerHost.Context) -> ATTServerReply {
        if case .executeWriteRequest(let flags) = pdu { update { $0.executeWrites.append(flags.rawValue) } }
        return ctx.answer(pdu, from: c)
    }

    /// After an answer: a CCCD write starts the flood or the storm.
    private func answered(_ pdu: ATTPDU, _ c: ATTServerConnection) {
        guard case .writeRequest(Self.cccdHandle, let value) = pdu, value.first != 0 else { return }
        let count = options.effectiveCount
        let h = Self.longValueHandle
        switch options.scenario {
        case .notificationFlood:
            // As fast as the socket takes them, requests answered between (the host's stream).
            c.stream({ i, _ in i < count ? ATTPDU.handleValueNotification(handle: h, value: Self.counter(i)).bytes : nil }) { [self] sent, finished in
                update {
                    $0.notificationsSent += sent
                    if finished { $0.floodsDone += 1 }
                }
            }
        case .indicationStorm:
            // The storm borrows the socket: nothing is read (no confirmation either) until it ends.
            c.lend { [self] fd in
                var sent = 0
                while let fd, sent < count, Self.send(ATTPDU.handleValueIndication(handle: h, value: Self.counter(sent)).bytes, on: fd) {
                    sent += 1
                }
                update {
                    $0.indicationsSent += sent
                    if sent == count { $0.stormsDone += 1 }
                }
            }
        default:
            break
        }
    }

    /// The i-th value of a flood or a storm: i as 4 little-endian bytes.
    static func counter(_ i: Int) -> ArraySlice<UInt8> {
        let v = UInt32(truncatingIfNeeded: i)
        return [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)][...]
    }

    /// Sends one datagram on a lent (blocking) socket; false when the socket is gone. Waits for room until the client
    /// reads, or closes, or the peer's close shuts the socket down (`disconnectAll` interrupts the loan).
    static func send(_ pdu: [UInt8], on fd: Int32) -> Bool {
        pdu.withUnsafeBytes { p in
            while true {
                let n = Glibc.send(fd, p.baseAddress, p.count, Int32(MSG_NOSIGNAL))
                if n < 0 && errno == EINTR { continue }
                return n == p.count
            }
        }
    }
}
