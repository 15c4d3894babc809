// The simulated mirror: GATTServer's host (Core Spec 5.4 Vol 3 Part F §3.4) over the mirror's database, and the
// mirror's state machine as a real mirror behaves: notifications only on change, the latched ERROR, the
// early SCALE_ALIGNMENT, the cloudToken limit, cancelScan, reboot, the Wi-Fi list flow, the upload.
import ATTStack
import LinuxBluetooth
import LinkCore
import Dispatch
import Foundation
import Mirror
import GATTClient
import GATTServer
import GATTVocabulary

/// A simulated body-scanning mirror: a `GATTServerHost` (connections, Enhanced ATT bearers, outboxes, indications)
/// with the mirror's behaviour in its hooks: read and write handlers for the values (Part F §3.4), `serve` for the
/// faults and Database Out Of Sync (Part G §2.5.2.1). The mirror's state has its own lock, always taken inside the
/// host's (hooks and `withContext`), never around a call into the host. Timers run on the host's serial queue and
/// check a generation before acting.
public final class SimulatedMirror: Sendable {
    public let options: SimOptions
    /// The attribute database as it is now (the fault change-database changes it during a connection).
    public var database: AttributeDatabase { host.database }
    private let host: GATTServerHost
    /// The host's timer queue: the mirror's notifications and the host's delayed Write Responses are ordered on one
    /// serial queue, so SCALE_ALIGNMENT (or a latched ERROR) goes out before the answer it precedes, however late both
    /// fire.
    var timers: DispatchQueue { host.timers }
    /// The mirror's state (internal: the conformance faults' extension reads and marks a connection's faults).
    let state: Lock<DeviceState>
    /// Each connection's number in the log: a leaf lock, so the host's outbound hook can name a connection anywhere.
    private let numbers = Lock<[ObjectIdentifier: Int]>([:])
    private let logSink: @Sendable (String) -> Void
    private let started: ContinuousClock.Instant

    /// What a test or the command line can see of the mirror right now.
    public struct Snapshot: Sendable, Equatable {
        public var scanState: UInt8
        public var scanError: UInt8
        public var wifiStatus: UInt8
        public var cloudToken: String
        public var connections: Int
        public var reboots: Int
        /// One line per upload attempt: "posted 1234 bytes to URL: HTTP 200" or the failure.
        public var uploads: [String]
        /// Write Requests and Write Commands received over every connection (any handle, accepted or not).
        public var writeRequests: Int
        public var writeCommands: Int
    }

    /// What the mirror keeps of one connection (the host keeps its session, outbox and indication slot).
    struct Conn {
        let number: Int
        /// The unenhanced connection (CID 4) of its client: itself, or an Enhanced ATT bearer's client, whose Client
        /// Supported Features and change-awareness are the client's (Vol 3 Part G §2.5.2.1).
        let owner: ObjectIdentifier
        /// Write Requests and Write Commands received on this connection (logged when it closes).
        var writeRequests = 0
        var writeCommands = 0
        /// What the client wrote to Client Supported Features (Vol 3 Part G §7.2): bit 0 is robust caching.
        var clientFeatures: [UInt8] = [0x00]
        /// Change-aware (Vol 3 Part G §2.5.2.1): false from a database change until the client confirms the
        /// Service Changed indication or reads the Database Hash.
        var changeAware = true
        /// A Service Changed indication awaits its confirmation.
        var serviceChangedPending = false
        /// The conformance faults that act once per connection and have acted on this one.
        var faultsFired: Set<SimConformanceFault> = []
    }

    /// A log line or a notification waiting for the host's context (the read and write handlers have none), in order.
    enum Pending {
        case log(String)
        case notify(String, [UInt8])
    }

    struct DeviceState {
        /// The database as the host serves it (the mirror's copy, for names in its handlers).
        var database: AttributeDatabase
        /// The fault change-database has run (once per simulator).
        var databaseChanged = false
        var scanState: UInt8
        var scanError: UInt8
        var wifiStatus: UInt8
        var cloudToken: [UInt8] = []
        var ssid: [UInt8]
        var wifiScanned = false
        var enumCursor = 0
        var extras: [String: [UInt8]] = [:]
        /// Bumped by every new scan, cancelScan and reboot: a scan step timer of an older generation does nothing.
        var scanGeneration = 0
        var wifiGeneration = 0
        var faults: [SimFault]
        var connections: [ObjectIdentifier: Conn] = [:]
        var nextConnectionID = 1
        var reboots = 0
        var uploads: [String] = []
        var writeRequests = 0
        var writeCommands = 0
        var pending: [Pending] = []

        mutating func log(_ line: String) { pending.append(.log(line)) }
        /// The number of `c`'s connection in the log (0 once it closed).
        func number(_ c: ATTServerConnection) -> Int { connections[ObjectIdentifier(c)]?.number ?? 0 }
        /// The key of the connection holding `c`'s client state: its CID 4 connection for an Enhanced ATT bearer.
        func owner(of c: ATTServerConnection) -> ObjectIdentifier { connections[ObjectIdentifier(c)]?.owner ?? ObjectIdentifier(c) }
    }

    private let connectionClosed: @Sendable (_ remaining: Int) -> Void

    /// `log` gets one line per event; `connectionClosed` runs after a connection ends (an LE listener
    /// re-enables advertising there, as a peripheral does after a disconnect).
    public init(options: SimOptions, log: @escaping @Sendable (String) -> Void = { _ in },
                connectionClosed: @escaping @Sendable (_ remaining: Int) -> Void = { _ in }) {
        self.options = options
        self.connectionClosed = connectionClosed
        let database = AttributeDatabase.mirror(profile: options.profile, deviceName: options.deviceName, caching: options.effectiveCaching,
                                                eatt: options.eatt, hashOrder: options.effectiveHashOrder, security: options.effectiveSecurity,
                                                faults: options.conformanceFaults)
        self.logSink = log
        self.started = ContinuousClock.now
        let connected = options.profile.wifiStatusByte("connected") ?? 2
        let notConnected = options.profile.wifiStatusByte("notConnected") ?? 0
        state = Lock(DeviceState(database: database, scanState: options.initialScanState, scanError: options.initialScanError,
                                  wifiStatus: options.wifiConnected ? connected : notConnected,
                                  ssid: options.wifiConnected ? Array(options.connectedSSID.utf8) : [],
                                  faults: options.faults))
        // The hooks reach the mirror through `link`, set below: the host is built with them, before the mirror exists.
        let link = HookOwner<SimulatedMirror>()
        var hooks = GATTServerHost.Hooks()
        hooks.read = { read, c in link.owner?.read(read, c) ?? .stored }
        hooks.write = { write, c in link.owner?.write(write, c) ?? .rejected(.unlikelyError) }
        hooks.inbound = { bytes, c in link.owner?.inbound(bytes, c) ?? .serve }
        hooks.serve = { pdu, c, ctx in link.owner?.serve(pdu, c, &ctx) ?? .none }
        hooks.outbound = { bytes, c in link.owner?.outbound(bytes, c) }
        hooks.attached = { c, client in link.owner?.attached(c, client: client) }
        hooks.closed = { c, reason in link.owner?.closed(c, reason) }
        let refusal = options.eattRefusal
        hooks.enhancedRequest = { _ in refusal }
        host = GATTServerHost(database: database, serverRxMTU: options.serverMTU, hooks: hooks,
                              enhancedBearerLimit: Self.enhancedBearerLimit, securityWithoutLink: options.unixSecurity)
        link.set(self)
    }

    public var snapshot: Snapshot {
        let clients = host.clientCount
        return state.withLock { s in
            Snapshot(scanState: s.scanState, scanError: s.scanError, wifiStatus: s.wifiStatus,
                     cloudToken: String(decoding: s.cloudToken, as: UTF8.self), connections: clients,
                     reboots: s.reboots, uploads: s.uploads, writeRequests: s.writeRequests, writeCommands: s.writeCommands)
        }
    }

    /// The value handle of a profile characteristic ("scanState" -> 0x000f).
    public func valueHandle(_ name: String) -> UInt16? { database.handle(name) }

    /// Serves a new connection (the host registers it, then starts the transport's reader).
    public func attach(_ transport: any ATTTransport) { host.attach(transport) }

    /// The most Enhanced ATT bearers one client may open beside CID 4.
    public static let enhancedBearerLimit = 4

    /// The answers for a link without the security a value asks for (Vol 3 Part F §3.4.1.1): always logged.
    static let securityRefusals: [ATTErrorCode] = [.insufficientAuthentication, .insufficientEncryption, .encryptionKeySizeTooShort]

    /// Answers an Enhanced ATT bearer request at PATH.eatt (the unix: ECRED equivalent) for the client connected
    /// last: refused with `options.eattRefusal` when set, else as `EnhancedBearerRequest.refusal` says; accepted, it
    /// is served as `attachEnhanced` does (`GATTServerHost.answerEnhancedRequest`). Returns the result answered.
    @discardableResult
    public func acceptEnhanced(_ request: EnhancedBearerRequest) -> L2CAPConnectionResult {
        do {
            switch try host.answerEnhancedRequest(request) {
            case .opened: return .success
            case .refused(let result):
                log("Enhanced ATT bearer request (SPSM \(ATTHex.handle(request.spsm)), MTU \(request.clientMTU)) refused: \(result)")
                return result
            }
        } catch {
            let (client, number) = host.withContext { ctx in (ctx.latestClient, ctx.latestClient.map { ctx.enhancedOpened(by: $0) } ?? 0) }
            let id = client.map { c in state.withLock { $0.number(c) } } ?? 0
            log("Enhanced ATT bearer \(number) of connection \(id) failed: \(error)")
            return .noResourcesAvailable
        }
    }

    /// Serves an accepted ECRED channel on PSM 0x0027 (an Enhanced ATT bearer over a real adapter) as a bearer of
    /// the client on the same LE link (its peer address); without one (or past the limit) it is closed.
    public func attachEnhanced(_ bearer: ATTBearer) {
        if case .refused = host.attachEnhanced(bearer) {
            log("Enhanced ATT bearer \(bearer.label): no CID 4 connection of that peer to join (or past the limit of \(Self.enhancedBearerLimit)); closed")
        }
    }

    /// Plays `security` as the link of every client connected now (a unix: test's pairing); nil: back to the
    /// transport's, else `options.unixSecurity` (`ATTServerConnection.setLinkSecurity`).
    public func setLinkSecurity(_ security: BTSecurity?) {
        host.withContext { ctx in for c in ctx.clients { ctx.setLinkSecurity(security, of: c) } }
    }

    /// Closes every connection (the listener is shutting down).
    public func disconnectAll(reason: String) { host.disconnectAll(reason: reason) }

    // MARK: - the host's events

    /// A connection registered: its number, its client, and (the first one) the timed database change.
    private func attached(_ c: ATTServerConnection, client: ATTServerConnection?) {
        let (id, clientNumber) = state.withLock { s in
            let id = s.nextConnectionID
            s.nextConnectionID += 1
            var conn = Conn(number: id, owner: ObjectIdentifier(client ?? c))
            if client == nil { conn.clientFeatures = [options.clientFeaturesAtConnect] }
            s.connections[ObjectIdentifier(c)] = conn
            return (id, client.map { s.number($0) })
        }
        numbers.withLock { $0[ObjectIdentifier(c)] = id }
        if id == 1, let ms = options.changeDatabaseAfterMilliseconds {
            after(ms) { [self] s, ctx in changeDatabase(&s, &ctx) }
        }
        if let clientNumber {
            log("connection \(id) opened: \(c.transport.label) (Enhanced ATT bearer of connection \(clientNumber), MTU \(c.session.mtu))")
        } else {
            log("connection \(id) opened: \(c.transport.label)")
        }
    }

    /// A connection ended: its count is logged; a client's CID 4 connection takes its Enhanced ATT bearers with it.
    private func closed(_ c: ATTServerConnection, _ reason: TransportError) {
        let key = ObjectIdentifier(c)
        let (conn, bearers) = state.withLock { s in
            let conn = s.connections.removeValue(forKey: key)
            let bearers = conn?.owner == key ? s.connections.filter { $0.value.owner == key }.map(\.key) : []
            return (conn, bearers)
        }
        numbers.withLock { $0[key] = nil }
        let id = conn?.number ?? 0
        for b in host.withContext({ ctx in ctx.allConnections.filter { bearers.contains(ObjectIdentifier($0)) } }) {
            b.close(reason: "its client's connection \(id) closed")
        }
        // The counts say how many writes of a benchmark arrived (tools/vm/scenarios/bench.sh reads this line).
        let counts = conn.map { "; received \($0.writeRequests) Write Requests, \($0.writeCommands) Write Commands" } ?? ""
        log("connection \(id) closed: \(reason)\(counts)")
        connectionClosed(host.clientCount)
    }

    /// Every PDU from a client, before the host decodes it: the verbose trace, a malformed PDU's answer logged, and
    /// the conformance faults on PDUs the codec cannot decode (`conformanceInterception`).
    private func inbound(_ bytes: [UInt8], _ c: ATTServerConnection) -> ATTInterception {
        defer { logMalformed(bytes, c) }
        return conformanceInterception(bytes, c)
    }

    private func logMalformed(_ bytes: [UInt8], _ c: ATTServerConnection) {
        let id = numbers.withLock { $0[ObjectIdentifier(c)] ?? 0 }
        if options.verbose { log("conn \(id) -> \(ATTHex.string(bytes, separator: " "))") }
        if case .malformed(let error, .now(let answer)) = ATTServer.decode(bytes), case .errorResponse(_, _, let code) = answer {
            log("conn \(id): \(error) -> \(code)")
            logError(id, answer)
        }
    }

    /// Every PDU the host sends (under its lock: only the leaf lock `numbers` is taken here).
    private func outbound(_ bytes: [UInt8], _ c: ATTServerConnection) {
        guard options.verbose else { return }
        let id = numbers.withLock { $0[ObjectIdentifier(c)] ?? 0 }
        log("conn \(id) <- \(ATTHex.string(bytes, separator: " "))")
    }

    private func read(_ read: AttributeRead, _ c: ATTServerConnection) -> ReadOutcome {
        state.withLock { s in readValue(&s, c, read) }
    }

    private func write(_ w: AttributeWrite, _ c: ATTServerConnection) -> WriteOutcome {
        state.withLock { s in
            guard w.opcode == .executeWriteRequest, options.conformanceFaults.contains(.executeWrite) else { return write(&s, c, w) }
            // The fault execute-write: the executed value is checked as usual, then dropped (a copy of the state takes it).
            var discarded = s
            let outcome = write(&discarded, c, w)
            s.log("conn \(s.number(c)): fault execute-write: the executed value of \(w.attribute.name ?? ATTHex.short(w.attribute.handle)) not applied")
            return outcome == .store ? .accepted(responseAfterMilliseconds: nil) : outcome
        }
    }

    /// The log line of a conformance fault that changed the answer to a PDU (as the other faults have theirs).
    func logFault(_ fault: SimConformanceFault, _ c: ATTServerConnection, _ opcode: ATTOpcode) {
        let id = numbers.withLock { $0[ObjectIdentifier(c)] ?? 0 }
        log("conn \(id): fault \(fault.rawValue) on \(opcode.isDefined ? opcode.name : "opcode " + ATTHex.byte(opcode.rawValue))")
    }

    private func log(_ line: String) {
        let ms = (ContinuousClock.now - started).components
        let t = Double(ms.seconds) + Double(ms.attoseconds) / 1e18
        logSink(String(format: "%8.3f ", t) + line)
    }

    /// Logs and notifies what waits, in order (under both locks: the host's context and the mirror's state).
    private func flush(_ s: inout DeviceState, _ ctx: inout GATTServerHost.Context) {
        let pending = s.pending
        s.pending = []
        for p in pending {
            switch p {
            case .log(let line): log(line)
            case .notify(let name, let value): notify(&s, &ctx, name, value)
            }
        }
    }

    /// Runs `body` in the host's context and under the mirror's lock after `milliseconds`, then what it left pending.
    private func after(_ milliseconds: Int, _ body: @escaping @Sendable (inout DeviceState, inout GATTServerHost.Context) -> Void) {
        timers.asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { [weak self] in
            self?.now(body)
        }
    }

    private func now(_ body: (inout DeviceState, inout GATTServerHost.Context) -> Void) {
        host.withContext { ctx in
            state.withLock { s in
                body(&s, &ctx)
                flush(&s, &ctx)
            }
        }
    }

    // MARK: - sending

    /// Notifies `name`'s value to every client that enabled notifications on it.
    private func notify(_ s: inout DeviceState, _ ctx: inout GATTServerHost.Context, _ name: String, _ value: [UInt8]) {
        guard let handle = s.database.handle(name) else { return }
        let subscribed = ctx.clients.filter { ctx.session(of: $0).subscribed(handle) }.sorted { s.number($0) < s.number($1) }
        for c in subscribed {
            log("conn \(s.number(c)): notify \(name) = \(ATTHex.string(value, separator: " "))")
            ctx.notify(handle: handle, value: value, to: c)
        }
    }

    // Notifications only on change (as a real mirror does: a latched ERROR sends nothing new).
    private func setScanState(_ s: inout DeviceState, _ value: UInt8) {
        guard s.scanState != value else { return }
        s.scanState = value
        s.log("scanState -> \(options.profile.scanStateName(value))")
        s.pending.append(.notify("scanState", [value]))
    }
    private func setScanError(_ s: inout DeviceState, _ value: UInt8) {
        guard s.scanError != value else { return }
        s.scanError = value
        s.log("scanError -> \(options.profile.scanErrorName(value))")
        s.pending.append(.notify("scanError", [value]))
    }
    private func setWiFiStatus(_ s: inout DeviceState, _ value: UInt8) {
        guard s.wifiStatus != value else { return }
        s.wifiStatus = value
        s.log("wifiConnectionStatus -> \(options.profile.wifiStatusName(value))")
        s.pending.append(.notify("wifiConnectionStatus", [value]))
    }

    private func byte(state name: String) -> UInt8 { options.profile.scanStateByte(name) ?? 0 }
    private func byte(error name: String) -> UInt8 { options.profile.scanErrorByte(name) ?? 0 }

    // MARK: - the faults around the server's answer

    /// The host's `serve` hook: faults match requests and commands on a characteristic's value handle; a
    /// change-unaware client with robust caching is refused; the writes' notifications go before the answer.
    private func serve(_ pdu: ATTPDU, _ c: ATTServerConnection, _ ctx: inout GATTServerHost.Context) -> ATTServerReply {
        let key = ObjectIdentifier(c)
        enum Before { case answer(SimFault?), reply(ATTServerReply) }
        let before: Before = state.withLock { s in
            defer { flush(&s, &ctx) }
            guard s.connections[key] != nil else { return .reply(.none) }
            let id = s.number(c), owner = s.owner(of: c)
            var fault: SimFault?
            if case .handleValueConfirmation = pdu, s.connections[owner]?.serviceChangedPending == true {
                // The Service Changed indication confirmed: the client is change-aware again (§2.5.2.1).
                s.connections[owner]?.serviceChangedPending = false
                s.connections[owner]?.changeAware = true
            }
            if let target = targetHandle(pdu), let name = s.database.name(of: target),
               let index = s.faults.firstIndex(where: { $0.characteristic == name }) {
                if s.faults[index].occurrence > 1 {
                    s.faults[index].occurrence -= 1
                } else {
                    fault = s.faults.remove(at: index)
                    s.log("conn \(id): fault \(fault!) on \(pdu.opcode.name)")
                }
            }
            if case .disconnect = fault?.kind {
                ctx.close(c, reason: "fault: disconnect during \(pdu.opcode.name)")
                return .reply(.none)
            }
            if case .changeDatabase = fault?.kind { changeDatabase(&s, &ctx) }
            if outOfSync(&s, c, pdu) {
                s.log("conn \(id): change-unaware with robust caching: Database Out Of Sync to \(pdu.opcode.name)")
                let refusal = ATTPDU.errorResponse(requestOpcode: pdu.opcode, handle: targetHandle(pdu) ?? 0x0000, error: .databaseOutOfSync)
                return .reply(.now(refusal))
            }
            switch pdu.opcode {
            case .writeCommand:
                s.connections[key]?.writeCommands += 1
                s.writeCommands += 1
            case .writeRequest:
                s.connections[key]?.writeRequests += 1
                s.writeRequests += 1
            default: break
            }
            return .answer(fault)
        }
        let fault: SimFault?
        switch before {
        case .reply(let reply): return reply
        case .answer(let f): fault = f
        }
        // The server's answer, with the mirror's values behind the host's read and write hooks (they take `state`),
        // as the conformance faults change it.
        let reply = conformanceAnswer(pdu, c, &ctx)
        return state.withLock { s in
            let id = s.number(c)
            if case .exchangeMTURequest(let clientRx) = pdu {
                s.log("conn \(id): Exchange MTU client \(clientRx), server \(options.serverMTU): \(ctx.session(of: c).mtu)")
            }
            if case .now(let p) = reply, case .errorResponse(let opcode, let handle, let code) = p,
               options.verbose || Self.securityRefusals.contains(code) {
                // A refusal for the link's security is always logged, with the level it was checked against.
                let link = Self.securityRefusals.contains(code) ? " (link: \(ctx.linkSecurity(of: c)))" : ""
                s.log("conn \(id): Error Response \(code) to \(opcode.name) handle \(ATTHex.short(handle))\(link)")
            } else if pdu.opcode == .writeCommand, case .writeCommand(let handle, _) = pdu,
                      let refusal = ctx.database.attribute(handle).flatMap({ $0.writable ? $0.writeSecurity.refusal(on: ctx.linkSecurity(of: c)) : nil }) {
                // A Write Command the link's security refuses has no answer (Vol 3 Part F §3.4.5.3): only this line.
                s.log("conn \(id): Write Command to handle \(ATTHex.short(handle)) dropped: \(refusal) (link: \(ctx.linkSecurity(of: c)))")
            }
            flush(&s, &ctx)
            switch fault?.kind {
            case .drop?: return .none
            case .notifyFirst?: notifyUnchanged(&s, &ctx, c)
            default: break
            }
            guard case .delay(let extra)? = fault?.kind else { return reply }
            switch reply {
            case .none: return .none
            case .now(let p): return .later(milliseconds: extra, p)
            case .later(let ms, let p): return .later(milliseconds: ms + extra, p)
            }
        }
    }

    /// The fault change-database (once): the mirror service gets a characteristic at its start ("simAdded"), so
    /// every mirror handle moves up by 2; every client becomes change-unaware and those that enabled indications
    /// of Service Changed get one for the range from the mirror service to 0xFFFF (Vol 3 Part G §7.1, §2.5.2.1).
    private func changeDatabase(_ s: inout DeviceState, _ ctx: inout GATTServerHost.Context) {
        guard !s.databaseChanged else { return }
        s.databaseChanged = true
        let changed = AttributeDatabase.mirror(profile: options.profile, deviceName: options.deviceName, caching: options.effectiveCaching,
                                               eatt: options.eatt, addedCharacteristic: true, hashOrder: options.effectiveHashOrder,
                                               security: options.effectiveSecurity, faults: options.conformanceFaults)
        s.database = changed
        ctx.database = changed
        let start = changed.attributes.first { $0.type == .primaryService && $0.value == options.profile.service.attWireBytes }?.handle ?? 0x0001
        let serviceChanged = changed.attributes.first { $0.type == .serviceChanged }?.handle
        s.log("fault: the database changed from \(ATTHex.handle(start)) (simAdded; the mirror's handles move up by 2)")
        flush(&s, &ctx)
        for c in ctx.clients.sorted(by: { s.number($0) < s.number($1) }) {
            let key = ObjectIdentifier(c)
            s.connections[key]?.changeAware = false
            guard let h = serviceChanged, ctx.session(of: c).subscribed(h, indications: true) else { continue }
            s.connections[key]?.serviceChangedPending = true
            ctx.indicate(handle: h, value: [UInt8(start & 0xFF), UInt8(start >> 8), 0xFF, 0xFF], to: c)
        }
    }

    /// A request from a change-unaware client that enabled robust caching gets Database Out Of Sync (0x12), except a
    /// read of the Database Hash, which is answered and makes it change-aware (Vol 3 Part G §2.5.2.1).
    private func outOfSync(_ s: inout DeviceState, _ c: ATTServerConnection, _ pdu: ATTPDU) -> Bool {
        let owner = s.owner(of: c)
        guard pdu.opcode.kind == .request, let conn = s.connections[owner], !conn.changeAware,
              (conn.clientFeatures.first ?? 0) & 0x01 != 0 else { return false }
        let hash = s.database.handle(AttributeDatabase.databaseHashName)
        var readsHash = false
        if case .readByTypeRequest(_, let type) = pdu, type == .databaseHash { readsHash = true }
        if case .readRequest(let h) = pdu, h == hash { readsHash = true }
        if readsHash { s.connections[owner]?.changeAware = true }
        return !readsHash
    }

    /// The fault "notify-first": scanState and scanError go out before the answer even when unchanged.
    private func notifyUnchanged(_ s: inout DeviceState, _ ctx: inout GATTServerHost.Context, _ c: ATTServerConnection) {
        for (name, value) in [("scanState", s.scanState), ("scanError", s.scanError)] {
            guard let handle = s.database.handle(name), ctx.session(of: c).subscribed(handle) else { continue }
            ctx.notify(handle: handle, value: [value], to: c)
        }
    }

    private func targetHandle(_ pdu: ATTPDU) -> UInt16? {
        switch pdu {
        case .readRequest(let h), .readBlobRequest(let h, _): return h
        case .writeRequest(let h, _), .writeCommand(let h, _), .prepareWriteRequest(let h, _, _): return h
        default: return nil
        }
    }

    private func logError(_ id: Int, _ pdu: ATTPDU) {
        guard options.verbose, case .errorResponse(let opcode, let handle, let code) = pdu else { return }
        log("conn \(id): Error Response \(code) to \(opcode.name) handle \(ATTHex.short(handle))")
    }

    // MARK: - the mirror's values

    /// A named attribute is one of the mirror's values; the Wi-Fi list's cursor moves on a Read Request only.
    private func readValue(_ s: inout DeviceState, _ c: ATTServerConnection, _ read: AttributeRead) -> ReadOutcome {
        guard case .value = read.attribute.role, let name = read.attribute.name else { return .stored }
        switch name {
        case AttributeDatabase.clientSupportedFeaturesName: return .value(s.connections[s.owner(of: c)]?.clientFeatures ?? [0])
        case AttributeDatabase.databaseHashName, AttributeDatabase.serverSupportedFeaturesName, AttributeDatabase.deviceNameName: return .stored
        case "scanState": return .value([s.scanState])
        case "scanError": return .value([s.scanError])
        case "cloudToken": return .value(s.cloudToken)
        case "wifiNumNetworks": return .value([UInt8(s.wifiScanned ? min(options.networks.count, 255) : 0)])
        case "wifiNetworkSSIDEnum":
            guard s.wifiScanned, s.enumCursor < options.networks.count else { return .value([]) }
            let ssid = Array(options.networks[s.enumCursor].utf8)
            if read.opcode == .readRequest { s.enumCursor += 1 }
            return .value(ssid)
        case "wifiSetSSID": return .value(s.ssid)
        case "wifiConnectionStatus": return .value([s.wifiStatus])
        default: return .value(s.extras[name] ?? [])
        }
    }

    /// A write to an attribute: a CCCD is logged (the server keeps it); a mirror value runs the state machine
    /// (prepared parts only when executed).
    private func write(_ s: inout DeviceState, _ c: ATTServerConnection, _ w: AttributeWrite) -> WriteOutcome {
        switch w.attribute.role {
        case .cccd(let valueHandle):
            let v = w.value.littleEndianUInt16(at: 0)
            s.log("conn \(s.number(c)): CCCD of \(s.database.name(of: valueHandle) ?? ATTHex.short(valueHandle)) = \(ATTHex.short(v))")
            return .store
        case .value where w.attribute.name == AttributeDatabase.clientSupportedFeaturesName:
            return writeClientFeatures(&s, c, w.value)
        case .value where w.attribute.name != nil:
            if w.opcode == .prepareWriteRequest { return .store }
            return writeMirror(&s, w.attribute.name!, w.value)
        default:
            return .rejected(.writeNotPermitted)
        }
    }

    /// Client Supported Features (Vol 3 Part G §7.2), per connection: a bit once set stays set (clearing one is
    /// Value Not Allowed, 0x13); the value is kept as written, with the bits this server does not know.
    private func writeClientFeatures(_ s: inout DeviceState, _ c: ATTServerConnection, _ value: [UInt8]) -> WriteOutcome {
        let owner = s.owner(of: c), id = s.connections[owner]?.number ?? 0
        guard !value.isEmpty, let old = s.connections[owner]?.clientFeatures else { return .rejected(.invalidAttributeValueLength) }
        for (i, byte) in old.enumerated() where (i < value.count ? value[i] : 0) & byte != byte {
            s.log("conn \(id): Client Supported Features \(ATTHex.string(value)) clears a bit set before: Value Not Allowed")
            return .rejected(.valueNotAllowed)
        }
        s.connections[owner]?.clientFeatures = value
        s.log("conn \(id): Client Supported Features = \(ATTHex.string(value))" + (value[0] & 0x01 != 0 ? " (robust caching)" : "")
                       + (value[0] & 0x02 != 0 ? " (Enhanced ATT bearers)" : ""))
        return .accepted(responseAfterMilliseconds: nil)
    }

    private func writeMirror(_ s: inout DeviceState, _ name: String, _ value: [UInt8]) -> WriteOutcome {
        let t = options.timings
        let profile = options.profile
        let online = s.wifiStatus == (profile.wifiStatusByte("connected") ?? 2)
        switch name {
        case "cloudToken":
            // The mirror's own limit, whatever the MTU allows (a real mirror answers 0x0D both for it and for a too-long value).
            guard value.count <= options.effectiveTokenLimit else {
                s.log("cloudToken: \(value.count) bytes > limit \(options.effectiveTokenLimit): Invalid Attribute Value Length")
                return .rejected(.invalidAttributeValueLength)
            }
            // Logged when it changes: a bench's flood of the same value would otherwise cost a log line per write, and a
            // simulator that falls behind on an LE link loses PDUs (a fixed channel has no flow control).
            if value != s.cloudToken { s.log("cloudToken = \(TerminalText.escaped(String(decoding: value, as: UTF8.self)))") }
            s.cloudToken = value
            guard online else {
                // A cloudToken written while Wi-Fi is not connected cannot be used: ERROR / PROCESSOR_BUSY, latched.
                let error = byte(state: "error"), busy = byte(error: "processorBusy")
                after(t.latchNotifyMilliseconds) { [self] s, ctx in
                    setScanState(&s, error)
                    setScanError(&s, busy)
                }
                return .accepted(responseAfterMilliseconds: t.latchResponseMilliseconds)
            }
            return .accepted(responseAfterMilliseconds: nil)

        case "scannerAction":
            guard value.count == 1 else { return .rejected(.invalidAttributeValueLength) }
            let command = value[0]
            switch command {
            case profile.wifiScanCommand:
                s.wifiScanned = true
                s.enumCursor = 0
                s.log("wifiScan: \(options.networks.count) networks")
                return .accepted(responseAfterMilliseconds: t.wifiScanMilliseconds)
            case profile.initDeviceForScanCommand:
                return initDeviceForScan(&s, online: online)
            case profile.rebootCommand:
                s.log("reboot: dropping every connection in \(t.rebootMilliseconds) ms")
                after(t.rebootMilliseconds) { [self] s, ctx in reboot(&s, &ctx) }
                return .accepted(responseAfterMilliseconds: nil)
            case profile.cancelScanCommand:
                guard options.cancelResets else {
                    s.log("cancelScan ignored (--cancel-resets no)")
                    return .accepted(responseAfterMilliseconds: nil)
                }
                s.scanGeneration += 1
                setScanState(&s, byte(state: "invalid"))
                setScanError(&s, byte(error: "invalid"))
                return .accepted(responseAfterMilliseconds: nil)
            default:
                s.log("scannerAction: unknown command \(ATTHex.short(command))")
                return .rejected(.valueNotAllowed)
            }

        case "wifiSetSSID":
            guard !value.isEmpty, value.count <= 32 else { return .rejected(.invalidAttributeValueLength) }
            s.ssid = value
            s.wifiGeneration += 1
            let generation = s.wifiGeneration
            let ssid = String(decoding: value, as: UTF8.self)
            let known = options.networks.contains(ssid)
            setWiFiStatus(&s, profile.wifiStatusByte("connecting") ?? 1)
            after(t.wifiJoinMilliseconds) { [self] s, ctx in
                guard s.wifiGeneration == generation else { return }
                setWiFiStatus(&s, known ? (profile.wifiStatusByte("connected") ?? 2) : (profile.wifiStatusByte("failed") ?? 3))
            }
            return .accepted(responseAfterMilliseconds: nil)

        case "wifiNumNetworks", "wifiNetworkSSIDEnum", "scanState", "scanError", "wifiConnectionStatus":
            return .rejected(.writeNotPermitted)

        default:
            s.extras[name] = value
            return .accepted(responseAfterMilliseconds: nil)
        }
    }

    private func initDeviceForScan(_ s: inout DeviceState, online: Bool) -> WriteOutcome {
        let t = options.timings
        let errorState = byte(state: "error")
        if !options.scaleAligned {
            // A misaligned scale: SCALE_ALIGNMENT 60-90 ms after the write, before its Write Response (a real mirror's timing).
            let delay = Int.random(in: t.alignmentNotifyWindow)
            let alignment = byte(error: "scaleAlignment")
            after(delay) { [self] s, ctx in
                setScanError(&s, alignment)
                setScanState(&s, errorState)
            }
            return .accepted(responseAfterMilliseconds: delay + t.alignmentResponseAfterNotifyMilliseconds)
        }
        let busy = byte(error: "processorBusy")
        let idle = [byte(state: "invalid"), byte(state: "complete")]
        guard idle.contains(s.scanState) else {
            // A latched ERROR (or a scan in progress) must be cancelled first: the mirror stays busy.
            s.log("initDeviceForScan refused: scanState is \(options.profile.scanStateName(s.scanState))")
            setScanError(&s, busy)
            return .accepted(responseAfterMilliseconds: nil)
        }
        guard online, !s.cloudToken.isEmpty else {
            s.log("initDeviceForScan refused: \(online ? "no cloudToken" : "Wi-Fi not connected")")
            after(t.latchNotifyMilliseconds) { [self] s, ctx in
                setScanState(&s, errorState)
                setScanError(&s, busy)
            }
            return .accepted(responseAfterMilliseconds: t.latchResponseMilliseconds)
        }
        s.scanGeneration += 1
        let generation = s.scanGeneration
        setScanError(&s, byte(error: "noError"))
        let steps = ["alignScale", "warmingUp", "waitingForWeight", "countDown", "preCheck", "scanning", "postCheck", "complete"]
        for (i, step) in steps.enumerated() {
            let value = byte(state: step)
            after(t.scanStepMilliseconds * (i + 1)) { [self] s, ctx in
                guard s.scanGeneration == generation else { return }
                setScanState(&s, value)
                if step == "complete" { upload(&s, generation) }
            }
        }
        return .accepted(responseAfterMilliseconds: nil)
    }

    private func reboot(_ s: inout DeviceState, _ ctx: inout GATTServerHost.Context) {
        for c in ctx.allConnections { ctx.close(c, reason: "mirror rebooting") }
        s.scanGeneration += 1
        s.reboots += 1
        s.scanState = byte(state: "invalid")
        s.scanError = byte(error: "invalid")
        s.cloudToken = []
        s.wifiScanned = false
        s.enumCursor = 0
        s.extras = [:]
        s.log("rebooted: scanState and scanError INVALID, cloudToken cleared")
    }

    // MARK: - the upload

    private func upload(_ s: inout DeviceState, _ generation: Int) {
        let token = String(decoding: s.cloudToken, as: UTF8.self)
        guard let url = URL(string: token), url.scheme == "http" || url.scheme == "https" else {
            s.uploads.append("not posted: cloudToken \(token) is not an http URL")
            setScanError(&s, byte(error: "internalError"))
            return
        }
        // The URL's last component: the receiver's secret path (what a real mirror's result names is its own).
        let scanID = url.lastPathComponent
        let body = ResultArchive.body(options.result, scanID: scanID)
        s.log("posting \(body.count) bytes to \(token)")
        let internalError = byte(error: "internalError")
        Task { [self] in
            let outcome = await HTTPPoster.post(body, to: url)
            now { s, _ in
                switch outcome {
                case .success(let status) where (200..<300).contains(status):
                    s.uploads.append("posted \(body.count) bytes to \(token): HTTP \(status)")
                case .success(let status):
                    s.uploads.append("posted \(body.count) bytes to \(token): HTTP \(status)")
                    if s.scanGeneration == generation { setScanError(&s, internalError) }
                case .failure(let e):
                    s.uploads.append("post to \(token) failed: \(e)")
                    if s.scanGeneration == generation { setScanError(&s, internalError) }
                }
                s.log(s.uploads.last!)
            }
        }
    }
}
