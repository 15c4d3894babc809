// The simulated mirror: GATTServer's ATT server (Core Spec 5.4 Vol 3 Part F §3.4) over the mirror's database, and
// the mirror's state machine as a real mirror behaves: notifications only on change, the latched ERROR, the
// early SCALE_ALIGNMENT, the cloudToken limit, cancelScan, reboot, the Wi-Fi list flow, the upload.
import ATTStack
import LinuxBluetooth
import Dispatch
import Foundation
import Mirror
import GATTClient
import GATTServer

/// A simulated body-scanning mirror: GATTServer's ATT server on ATT transports, with the mirror's behaviour behind
/// its read and write handlers (Core Spec 5.4 Vol 3 Part F §3.4 for the answers, Part G §3.3.3.3 for the CCCD).
/// One lock (`state`) guards everything: the mirror's values, every connection's session (MTU, CCCDs, prepare
/// queue) and outbox. Timers run on one serial queue and check a generation before acting.
public final class SimulatedMirror: Sendable {
    public let options: SimOptions
    /// The attribute database as it is now (the fault change-database changes it during a connection).
    public var database: AttributeDatabase { state.withLock { $0.server.database } }
    private let timers = DispatchQueue(label: "mirror-sim.timers")
    private let state: Lock<DeviceState>
    private let logSink: @Sendable (String) -> Void
    private let clock = ContinuousClock()
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

    struct Conn {
        let transport: any ATTTransport
        /// An Enhanced ATT bearer's client: the id of its unenhanced connection (CID 4), whose CCCDs, Client Supported
        /// Features and change-awareness are the client's (Vol 3 Part G §3.3.3.3, §2.5.2.1); nil on CID 4.
        var client: Int? = nil
        /// On CID 4: the Enhanced ATT bearers its client has opened so far.
        var enhancedOpened = 0
        /// The MTU, CCCDs and prepare queue of this connection.
        var session = ATTSession()
        var outbox = ATTOutbox()
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
    }

    struct DeviceState {
        /// The ATT server over the database as it is now; the mirror's read and write handlers are its state machine.
        var server: ATTServer
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
        var connections: [Int: Conn] = [:]
        var nextConnectionID = 1
        var reboots = 0
        var uploads: [String] = []
        var writeRequests = 0
        var writeCommands = 0

        /// The connection that holds `id`'s client state: its CID 4 connection for an Enhanced ATT bearer.
        func owner(of id: Int) -> Int { connections[id]?.client ?? id }
    }

    /// Work to do after the lock is released (closing a transport can call back into us).
    struct Effects {
        var closes: [(any ATTTransport, String)] = []
        var writableWaits: [(Int, any ATTTransport)] = []
        var logs: [String] = []
    }

    private let connectionClosed: @Sendable (_ remaining: Int) -> Void

    /// `log` gets one line per event; `connectionClosed` runs after a connection ends (an LE listener
    /// re-enables advertising there, as a peripheral does after a disconnect).
    public init(options: SimOptions, log: @escaping @Sendable (String) -> Void = { _ in },
                connectionClosed: @escaping @Sendable (_ remaining: Int) -> Void = { _ in }) {
        self.options = options
        self.connectionClosed = connectionClosed
        let database = AttributeDatabase.mirror(profile: options.profile, deviceName: options.deviceName, caching: options.caching,
                                                eatt: options.eatt, hashOrder: options.hashOrder)
        self.logSink = log
        self.started = ContinuousClock.now
        let connected = options.profile.wifiStatusByte("connected") ?? 2
        let notConnected = options.profile.wifiStatusByte("notConnected") ?? 0
        state = Lock(DeviceState(server: ATTServer(database: database, serverRxMTU: options.serverMTU), scanState: options.initialScanState, scanError: options.initialScanError,
                                  wifiStatus: options.wifiConnected ? connected : notConnected,
                                  ssid: options.wifiConnected ? Array(options.connectedSSID.utf8) : [],
                                  faults: options.faults))
    }

    public var snapshot: Snapshot {
        state.withLock { s in
            Snapshot(scanState: s.scanState, scanError: s.scanError, wifiStatus: s.wifiStatus,
                     cloudToken: String(decoding: s.cloudToken, as: UTF8.self), connections: s.connections.values.filter { $0.client == nil }.count,
                     reboots: s.reboots, uploads: s.uploads, writeRequests: s.writeRequests, writeCommands: s.writeCommands)
        }
    }

    /// The value handle of a profile characteristic ("scanState" -> 0x000f).
    public func valueHandle(_ name: String) -> UInt16? { database.handle(name) }

    /// Serves a new connection: registers it, then starts the transport's reader.
    public func attach(_ transport: any ATTTransport) {
        let id = state.withLock { s in
            let id = s.nextConnectionID
            s.nextConnectionID += 1
            var conn = Conn(transport: transport)
            conn.clientFeatures = [options.clientFeaturesAtConnect]
            s.connections[id] = conn
            return id
        }
        if id == 1, let ms = options.changeDatabaseAfterMilliseconds {
            after(ms) { [self] s, fx in changeDatabase(&s, &fx) }
        }
        log("connection \(id) opened: \(transport.label)")
        transport.start(SimConnectionSink(mirror: self, id: id))
    }

    /// The most Enhanced ATT bearers one client may open beside CID 4.
    public static let enhancedBearerLimit = 4

    /// Answers an Enhanced ATT bearer request at PATH.eatt (the unix: ECRED equivalent) for the client connected
    /// last: refused with `options.eattRefusal` when set, else as `EnhancedBearerRequest.refusal` says; accepted, it
    /// is served as `attachEnhanced` does. Returns the result answered.
    @discardableResult
    public func acceptEnhanced(_ request: EnhancedBearerRequest) -> L2CAPConnectionResult {
        let decision: (client: Int, number: Int)? ; let result: L2CAPConnectionResult
        (decision, result) = state.withLock { s in
            let latest = s.connections.filter { $0.value.client == nil }.keys.max()
            let opened = latest.flatMap { s.connections[$0]?.enhancedOpened } ?? 0
            if let refused = options.eattRefusal ?? request.refusal(hasClient: latest != nil, opened: opened,
                                                                      limit: Self.enhancedBearerLimit) {
                return (nil, refused)
            }
            s.connections[latest!]?.enhancedOpened += 1
            return ((latest!, opened + 1), .success)
        }
        guard let decision else {
            log("Enhanced ATT bearer request (SPSM \(ATTHex.handle(request.spsm)), MTU \(request.clientMTU)) refused: \(result)")
            request.refuse(result)
            return result
        }
        do {
            let bearer = try request.accept(mtu: Int(options.serverMTU), bearer: decision.number)
            attach(bearer, client: decision.client, mtu: (try? bearer.enhancedMTU()) ?? ATTBearer.minimumEnhancedMTU)
            return .success
        } catch {
            log("Enhanced ATT bearer \(decision.number) of connection \(decision.client) failed: \(error)")
            return .noResourcesAvailable
        }
    }

    /// Serves an accepted ECRED channel on PSM 0x0027 (an Enhanced ATT bearer over a real adapter) as a bearer of
    /// the client on the same LE link (its peer address); without one (or past the limit) it is closed.
    public func attachEnhanced(_ bearer: ATTBearer) {
        let client: Int? = state.withLock { s in
            let match = s.connections.filter { $0.value.client == nil && bearer.sharesLink(with: $0.value.transport) }.keys.max()
            guard let match, let c = s.connections[match], c.enhancedOpened < Self.enhancedBearerLimit else { return nil }
            s.connections[match]?.enhancedOpened += 1
            return match
        }
        guard let client else {
            log("Enhanced ATT bearer \(bearer.label): no CID 4 connection of that peer to join (or past the limit of \(Self.enhancedBearerLimit)); closed")
            bearer.close(reason: "no client to join")
            return
        }
        attach(bearer, client: client, mtu: (try? bearer.enhancedMTU()) ?? ATTBearer.minimumEnhancedMTU)
    }

    /// Registers an Enhanced ATT bearer of `client` whose channel agreed on `mtu`, then starts its reader.
    private func attach(_ transport: any ATTTransport, client: Int, mtu: Int) {
        let id = state.withLock { s in
            let id = s.nextConnectionID
            s.nextConnectionID += 1
            var conn = Conn(transport: transport)
            conn.client = client
            conn.session = ATTSession(enhancedMTU: mtu)
            s.connections[id] = conn
            return id
        }
        log("connection \(id) opened: \(transport.label) (Enhanced ATT bearer of connection \(client), MTU \(mtu))")
        transport.start(SimConnectionSink(mirror: self, id: id))
    }

    /// Closes every connection (the listener is shutting down).
    public func disconnectAll(reason: String) {
        let transports = state.withLock { s in s.connections.values.map(\.transport) }
        for t in transports { t.close(reason: reason) }
    }

    // MARK: - events

    fileprivate func received(_ id: Int, _ bytes: [UInt8]) {
        var fx = Effects()
        state.withLock { s in handle(&s, &fx, id, bytes) }
        run(fx)
    }

    fileprivate func closed(_ id: Int, _ reason: TransportError) {
        let (remaining, conn, bearers) = state.withLock { s in
            let c = s.connections.removeValue(forKey: id)
            // A client's CID 4 connection takes its Enhanced ATT bearers with it (the link is gone).
            let bearers = c?.client == nil ? s.connections.values.filter { $0.client == id }.map(\.transport) : []
            return (s.connections.filter { $0.value.client == nil }.count, c, bearers)
        }
        for b in bearers { b.close(reason: "its client's connection \(id) closed") }
        // The counts say how many writes of a benchmark arrived (tools/vm/scenarios/bench.sh reads this line).
        let counts = conn.map { "; received \($0.writeRequests) Write Requests, \($0.writeCommands) Write Commands" } ?? ""
        log("connection \(id) closed: \(reason)\(counts)")
        connectionClosed(remaining)
    }

    private func flush(_ id: Int) {
        var fx = Effects()
        state.withLock { s in
            guard var c = s.connections[id] else { return }
            do {
                if try c.outbox.flush(on: c.transport) { fx.writableWaits.append((id, c.transport)) }
            } catch {
                fx.logs.append("conn \(id): send failed: \(error)")
                fx.closes.append((c.transport, "send failed: \(error)"))
            }
            s.connections[id] = c
        }
        run(fx)
    }

    private func run(_ fx: Effects) {
        for line in fx.logs { log(line) }
        for (id, t) in fx.writableWaits { t.whenWritable { [weak self] in self?.flush(id) } }
        for (t, reason) in fx.closes { t.close(reason: reason) }
    }

    private func log(_ line: String) {
        let ms = (ContinuousClock.now - started).components
        let t = Double(ms.seconds) + Double(ms.attoseconds) / 1e18
        logSink(String(format: "%8.3f ", t) + line)
    }

    /// Runs `body` under the lock after `milliseconds`, then its effects.
    private func after(_ milliseconds: Int, _ body: @escaping @Sendable (inout DeviceState, inout Effects) -> Void) {
        timers.asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { [weak self] in
            guard let self else { return }
            var fx = Effects()
            self.state.withLock { s in body(&s, &fx) }
            self.run(fx)
        }
    }

    // MARK: - sending

    private func send(_ s: inout DeviceState, _ fx: inout Effects, _ id: Int, _ pdu: [UInt8]) {
        guard var c = s.connections[id] else { return }
        if options.verbose { fx.logs.append("conn \(id) <- \(ATTHex.string(pdu, separator: " "))") }
        do {
            if try c.outbox.send(pdu, on: c.transport) { fx.writableWaits.append((id, c.transport)) }
            s.connections[id] = c
        } catch {
            fx.logs.append("conn \(id): send failed: \(error)")
            fx.closes.append((c.transport, "send failed: \(error)"))
        }
    }

    private func sendPDU(_ s: inout DeviceState, _ fx: inout Effects, _ id: Int, _ pdu: ATTPDU) {
        send(&s, &fx, id, pdu.bytes)
    }

    /// Notifies `name`'s value to every connection that enabled notifications on it.
    private func notify(_ s: inout DeviceState, _ fx: inout Effects, _ name: String, _ value: [UInt8]) {
        guard let handle = s.server.database.handle(name) else { return }
        for (id, c) in s.connections.sorted(by: { $0.key < $1.key }) where c.client == nil && c.session.subscribed(handle) {
            fx.logs.append("conn \(id): notify \(name) = \(ATTHex.string(value, separator: " "))")
            sendPDU(&s, &fx, id, .handleValueNotification(handle: handle, value: value.prefix(ATTMTU.writeValueBudget(c.session.mtu))))
        }
    }

    // Notifications only on change (as a real mirror does: a latched ERROR sends nothing new).
    private func setScanState(_ s: inout DeviceState, _ fx: inout Effects, _ value: UInt8) {
        guard s.scanState != value else { return }
        s.scanState = value
        fx.logs.append("scanState -> \(options.profile.scanStateName(value))")
        notify(&s, &fx, "scanState", [value])
    }
    private func setScanError(_ s: inout DeviceState, _ fx: inout Effects, _ value: UInt8) {
        guard s.scanError != value else { return }
        s.scanError = value
        fx.logs.append("scanError -> \(options.profile.scanErrorName(value))")
        notify(&s, &fx, "scanError", [value])
    }
    private func setWiFiStatus(_ s: inout DeviceState, _ fx: inout Effects, _ value: UInt8) {
        guard s.wifiStatus != value else { return }
        s.wifiStatus = value
        fx.logs.append("wifiConnectionStatus -> \(options.profile.wifiStatusName(value))")
        notify(&s, &fx, "wifiConnectionStatus", [value])
    }

    private func byte(state name: String) -> UInt8 { options.profile.scanStateByte(name) ?? 0 }
    private func byte(error name: String) -> UInt8 { options.profile.scanErrorByte(name) ?? 0 }

    // MARK: - the ATT server

    private func handle(_ s: inout DeviceState, _ fx: inout Effects, _ id: Int, _ bytes: [UInt8]) {
        guard s.connections[id] != nil else { return }
        if options.verbose { fx.logs.append("conn \(id) -> \(ATTHex.string(bytes, separator: " "))") }
        let pdu: ATTPDU
        switch ATTServer.decode(bytes) {
        case .pdu(let p): pdu = p
        case .malformed(let error, let reply):
            guard case .now(let answer) = reply, case .errorResponse(_, _, let code) = answer else { return }
            fx.logs.append("conn \(id): \(error) -> \(code)")
            logError(&fx, id, answer)
            sendPDU(&s, &fx, id, answer)
            return
        }
        // Faults match requests and commands on a characteristic's value handle.
        var fault: SimFault?
        let owner = s.owner(of: id)
        if case .handleValueConfirmation = pdu, s.connections[owner]?.serviceChangedPending == true {
            // The Service Changed indication confirmed: the client is change-aware again (§2.5.2.1).
            s.connections[owner]?.serviceChangedPending = false
            s.connections[owner]?.changeAware = true
        }
        if let target = targetHandle(pdu), let name = s.server.database.name(of: target),
           let index = s.faults.firstIndex(where: { $0.characteristic == name }) {
            if s.faults[index].occurrence > 1 {
                s.faults[index].occurrence -= 1
            } else {
                fault = s.faults.remove(at: index)
                fx.logs.append("conn \(id): fault \(fault!) on \(pdu.opcode.name)")
            }
        }
        if case .disconnect = fault?.kind {
            if let c = s.connections[id] { fx.closes.append((c.transport, "fault: disconnect during \(pdu.opcode.name)")) }
            return
        }
        if case .changeDatabase = fault?.kind { changeDatabase(&s, &fx) }
        if outOfSync(&s, id, pdu) {
            fx.logs.append("conn \(id): change-unaware with robust caching: Database Out Of Sync to \(pdu.opcode.name)")
            sendPDU(&s, &fx, id, .errorResponse(requestOpcode: pdu.opcode, handle: targetHandle(pdu) ?? 0x0000, error: .databaseOutOfSync))
            return
        }
        let reply = answer(&s, &fx, id, pdu)
        switch fault?.kind {
        case .drop?:
            return
        case .notifyFirst?:
            notifyUnchanged(&s, &fx, id)
        default: break
        }
        var extra = 0
        if case .delay(let ms)? = fault?.kind { extra = ms }
        switch reply {
        case .none: return
        case .now(let p) where extra == 0: sendPDU(&s, &fx, id, p)
        case .now(let p): respondLater(id, extra, p)
        case .later(let ms, let p): respondLater(id, ms + extra, p)
        }
    }

    /// The fault change-database (once): the mirror service gets a characteristic at its start ("simAdded"), so
    /// every mirror handle moves up by 2; every client becomes change-unaware and those that enabled indications
    /// of Service Changed get one for the range from the mirror service to 0xFFFF (Vol 3 Part G §7.1, §2.5.2.1).
    private func changeDatabase(_ s: inout DeviceState, _ fx: inout Effects) {
        guard !s.databaseChanged else { return }
        s.databaseChanged = true
        let changed = AttributeDatabase.mirror(profile: options.profile, deviceName: options.deviceName, caching: options.caching,
                                               eatt: options.eatt, addedCharacteristic: true, hashOrder: options.hashOrder)
        s.server.database = changed
        let start = changed.attributes.first { $0.type == .primaryService && $0.value == options.profile.service.attWireBytes }?.handle ?? 0x0001
        let serviceChanged = changed.attributes.first { $0.type == .serviceChanged }?.handle
        fx.logs.append("fault: the database changed from \(ATTHex.handle(start)) (simAdded; the mirror's handles move up by 2)")
        for id in s.connections.keys.sorted() where s.connections[id]?.client == nil {
            s.connections[id]?.changeAware = false
            guard let h = serviceChanged, s.connections[id]?.session.subscribed(h, indications: true) == true else { continue }
            s.connections[id]?.serviceChangedPending = true
            sendPDU(&s, &fx, id, .handleValueIndication(handle: h, value: [UInt8(start & 0xFF), UInt8(start >> 8), 0xFF, 0xFF][...]))
        }
    }

    /// A request from a change-unaware client that enabled robust caching gets Database Out Of Sync (0x12), except a
    /// read of the Database Hash, which is answered and makes it change-aware (Vol 3 Part G §2.5.2.1).
    private func outOfSync(_ s: inout DeviceState, _ id: Int, _ pdu: ATTPDU) -> Bool {
        let owner = s.owner(of: id)
        guard pdu.opcode.kind == .request, let c = s.connections[owner], !c.changeAware,
              (c.clientFeatures.first ?? 0) & 0x01 != 0 else { return false }
        let hash = s.server.database.handle(AttributeDatabase.databaseHashName)
        var readsHash = false
        if case .readByTypeRequest(_, let type) = pdu, type == .databaseHash { readsHash = true }
        if case .readRequest(let h) = pdu, h == hash { readsHash = true }
        if readsHash { s.connections[owner]?.changeAware = true }
        return !readsHash
    }

    private func respondLater(_ id: Int, _ ms: Int, _ pdu: ATTPDU) {
        after(ms) { [self] s, fx in sendPDU(&s, &fx, id, pdu) }
    }

    /// The fault "notify-first": scanState and scanError go out before the answer even when unchanged.
    private func notifyUnchanged(_ s: inout DeviceState, _ fx: inout Effects, _ id: Int) {
        for (name, value) in [("scanState", s.scanState), ("scanError", s.scanError)] {
            guard let handle = s.server.database.handle(name), let c = s.connections[id] else { continue }
            if c.session.subscribed(handle) { sendPDU(&s, &fx, id, .handleValueNotification(handle: handle, value: [value][...])) }
        }
    }

    private func targetHandle(_ pdu: ATTPDU) -> UInt16? {
        switch pdu {
        case .readRequest(let h), .readBlobRequest(let h, _): return h
        case .writeRequest(let h, _), .writeCommand(let h, _), .prepareWriteRequest(let h, _, _): return h
        default: return nil
        }
    }

    /// The server's answer, with the mirror's values behind its read and write handlers.
    private func answer(_ s: inout DeviceState, _ fx: inout Effects, _ id: Int, _ pdu: ATTPDU) -> ATTServerReply {
        guard var session = s.connections[id]?.session else { return .none }
        // CCCD values are per client (Part G §3.3.3.3): an Enhanced ATT bearer reads and writes its client's.
        let owner = s.owner(of: id)
        if owner != id, let cccd = s.connections[owner]?.session.cccd { session.cccd = cccd }
        switch pdu.opcode {
        case .writeCommand:
            s.connections[id]?.writeCommands += 1
            s.writeCommands += 1
        case .writeRequest:
            s.connections[id]?.writeRequests += 1
            s.writeRequests += 1
        default: break
        }
        var server = s.server
        let reply = server.answer(pdu, session: &session,
                                  read: { readValue(&s, id, $0) },
                                  write: { write(&s, &fx, id, $0) })
        s.connections[id]?.session = session
        if owner != id { s.connections[owner]?.session.cccd = session.cccd }
        if case .exchangeMTURequest(let clientRx) = pdu {
            fx.logs.append("conn \(id): Exchange MTU client \(clientRx), server \(options.serverMTU): \(session.mtu)")
        }
        if case .now(let p) = reply { logError(&fx, id, p) }
        return reply
    }

    private func logError(_ fx: inout Effects, _ id: Int, _ pdu: ATTPDU) {
        guard options.verbose, case .errorResponse(let opcode, let handle, let code) = pdu else { return }
        fx.logs.append("conn \(id): Error Response \(code) to \(opcode.name) handle \(ATTHex.short(handle))")
    }

    // MARK: - the mirror's values

    /// A named attribute is one of the mirror's values; the Wi-Fi list's cursor moves on a Read Request only.
    private func readValue(_ s: inout DeviceState, _ id: Int, _ read: AttributeRead) -> ReadOutcome {
        guard case .value = read.attribute.role, let name = read.attribute.name else { return .stored }
        switch name {
        case AttributeDatabase.clientSupportedFeaturesName: return .value(s.connections[s.owner(of: id)]?.clientFeatures ?? [0])
        case AttributeDatabase.databaseHashName, AttributeDatabase.serverSupportedFeaturesName: return .stored
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
    private func write(_ s: inout DeviceState, _ fx: inout Effects, _ id: Int, _ w: AttributeWrite) -> WriteOutcome {
        switch w.attribute.role {
        case .cccd(let valueHandle):
            let v = w.value.littleEndianUInt16(at: 0)
            fx.logs.append("conn \(id): CCCD of \(s.server.database.name(of: valueHandle) ?? ATTHex.short(valueHandle)) = \(ATTHex.short(v))")
            return .store
        case .value where w.attribute.name == AttributeDatabase.clientSupportedFeaturesName:
            return writeClientFeatures(&s, &fx, id, w.value)
        case .value where w.attribute.name != nil:
            if w.opcode == .prepareWriteRequest { return .store }
            return writeMirror(&s, &fx, w.attribute.name!, w.value)
        default:
            return .rejected(.writeNotPermitted)
        }
    }

    /// Client Supported Features (Vol 3 Part G §7.2), per connection: a bit once set stays set (clearing one is
    /// Value Not Allowed, 0x13); the value is kept as written, with the bits this server does not know.
    private func writeClientFeatures(_ s: inout DeviceState, _ fx: inout Effects, _ id: Int, _ value: [UInt8]) -> WriteOutcome {
        let id = s.owner(of: id)
        guard !value.isEmpty, let old = s.connections[id]?.clientFeatures else { return .rejected(.invalidAttributeValueLength) }
        for (i, byte) in old.enumerated() where (i < value.count ? value[i] : 0) & byte != byte {
            fx.logs.append("conn \(id): Client Supported Features \(ATTHex.string(value)) clears a bit set before: Value Not Allowed")
            return .rejected(.valueNotAllowed)
        }
        s.connections[id]?.clientFeatures = value
        fx.logs.append("conn \(id): Client Supported Features = \(ATTHex.string(value))" + (value[0] & 0x01 != 0 ? " (robust caching)" : "")
                       + (value[0] & 0x02 != 0 ? " (Enhanced ATT bearers)" : ""))
        return .accepted(responseAfterMilliseconds: nil)
    }

    private func writeMirror(_ s: inout DeviceState, _ fx: inout Effects, _ name: String, _ value: [UInt8]) -> WriteOutcome {
        let t = options.timings
        let profile = options.profile
        let online = s.wifiStatus == (profile.wifiStatusByte("connected") ?? 2)
        switch name {
        case "cloudToken":
            // The mirror's own limit, whatever the MTU allows (a real mirror answers 0x0D both for it and for a too-long value).
            guard value.count <= options.effectiveTokenLimit else {
                fx.logs.append("cloudToken: \(value.count) bytes > limit \(options.effectiveTokenLimit): Invalid Attribute Value Length")
                return .rejected(.invalidAttributeValueLength)
            }
            // Logged when it changes: a bench's flood of the same value would otherwise cost a log line per write, and a
            // simulator that falls behind on an LE link loses PDUs (a fixed channel has no flow control).
            if value != s.cloudToken { fx.logs.append("cloudToken = \(TerminalText.escaped(String(decoding: value, as: UTF8.self)))") }
            s.cloudToken = value
            guard online else {
                // A cloudToken written while Wi-Fi is not connected cannot be used: ERROR / PROCESSOR_BUSY, latched.
                let error = byte(state: "error"), busy = byte(error: "processorBusy")
                after(t.latchNotifyMilliseconds) { [self] s, fx in
                    setScanState(&s, &fx, error)
                    setScanError(&s, &fx, busy)
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
                fx.logs.append("wifiScan: \(options.networks.count) networks")
                return .accepted(responseAfterMilliseconds: t.wifiScanMilliseconds)
            case profile.initDeviceForScanCommand:
                return initDeviceForScan(&s, &fx, online: online)
            case profile.rebootCommand:
                fx.logs.append("reboot: dropping every connection in \(t.rebootMilliseconds) ms")
                after(t.rebootMilliseconds) { [self] s, fx in reboot(&s, &fx) }
                return .accepted(responseAfterMilliseconds: nil)
            case profile.cancelScanCommand:
                guard options.cancelResets else {
                    fx.logs.append("cancelScan ignored (--cancel-resets no)")
                    return .accepted(responseAfterMilliseconds: nil)
                }
                s.scanGeneration += 1
                setScanState(&s, &fx, byte(state: "invalid"))
                setScanError(&s, &fx, byte(error: "invalid"))
                return .accepted(responseAfterMilliseconds: nil)
            default:
                fx.logs.append("scannerAction: unknown command \(ATTHex.short(command))")
                return .rejected(.valueNotAllowed)
            }

        case "wifiSetSSID":
            guard !value.isEmpty, value.count <= 32 else { return .rejected(.invalidAttributeValueLength) }
            s.ssid = value
            s.wifiGeneration += 1
            let generation = s.wifiGeneration
            let ssid = String(decoding: value, as: UTF8.self)
            let known = options.networks.contains(ssid)
            setWiFiStatus(&s, &fx, profile.wifiStatusByte("connecting") ?? 1)
            after(t.wifiJoinMilliseconds) { [self] s, fx in
                guard s.wifiGeneration == generation else { return }
                setWiFiStatus(&s, &fx, known ? (profile.wifiStatusByte("connected") ?? 2) : (profile.wifiStatusByte("failed") ?? 3))
            }
            return .accepted(responseAfterMilliseconds: nil)

        case "wifiNumNetworks", "wifiNetworkSSIDEnum", "scanState", "scanError", "wifiConnectionStatus":
            return .rejected(.writeNotPermitted)

        default:
            s.extras[name] = value
            return .accepted(responseAfterMilliseconds: nil)
        }
    }

    private func initDeviceForScan(_ s: inout DeviceState, _ fx: inout Effects, online: Bool) -> WriteOutcome {
        let t = options.timings
        let errorState = byte(state: "error")
        if !options.scaleAligned {
            // A misaligned scale: SCALE_ALIGNMENT 60-90 ms after the write, before its Write Response (a real mirror's timing).
            let delay = Int.random(in: t.alignmentNotifyWindow)
            let alignment = byte(error: "scaleAlignment")
            after(delay) { [self] s, fx in
                setScanError(&s, &fx, alignment)
                setScanState(&s, &fx, errorState)
            }
            return .accepted(responseAfterMilliseconds: delay + t.alignmentResponseAfterNotifyMilliseconds)
        }
        let busy = byte(error: "processorBusy")
        let idle = [byte(state: "invalid"), byte(state: "complete")]
        guard idle.contains(s.scanState) else {
            // A latched ERROR (or a scan in progress) must be cancelled first: the mirror stays busy.
            fx.logs.append("initDeviceForScan refused: scanState is \(options.profile.scanStateName(s.scanState))")
            setScanError(&s, &fx, busy)
            return .accepted(responseAfterMilliseconds: nil)
        }
        guard online, !s.cloudToken.isEmpty else {
            fx.logs.append("initDeviceForScan refused: \(online ? "no cloudToken" : "Wi-Fi not connected")")
            after(t.latchNotifyMilliseconds) { [self] s, fx in
                setScanState(&s, &fx, errorState)
                setScanError(&s, &fx, busy)
            }
            return .accepted(responseAfterMilliseconds: t.latchResponseMilliseconds)
        }
        s.scanGeneration += 1
        let generation = s.scanGeneration
        setScanError(&s, &fx, byte(error: "noError"))
        let steps = ["alignScale", "warmingUp", "waitingForWeight", "countDown", "preCheck", "scanning", "postCheck", "complete"]
        for (i, step) in steps.enumerated() {
            let value = byte(state: step)
            after(t.scanStepMilliseconds * (i + 1)) { [self] s, fx in
                guard s.scanGeneration == generation else { return }
                setScanState(&s, &fx, value)
                if step == "complete" { upload(&s, &fx, generation) }
            }
        }
        return .accepted(responseAfterMilliseconds: nil)
    }

    private func reboot(_ s: inout DeviceState, _ fx: inout Effects) {
        for (_, c) in s.connections { fx.closes.append((c.transport, "mirror rebooting")) }
        s.scanGeneration += 1
        s.reboots += 1
        s.scanState = byte(state: "invalid")
        s.scanError = byte(error: "invalid")
        s.cloudToken = []
        s.wifiScanned = false
        s.enumCursor = 0
        s.extras = [:]
        fx.logs.append("rebooted: scanState and scanError INVALID, cloudToken cleared")
    }

    // MARK: - the upload

    private func upload(_ s: inout DeviceState, _ fx: inout Effects, _ generation: Int) {
        let token = String(decoding: s.cloudToken, as: UTF8.self)
        guard let url = URL(string: token), url.scheme == "http" || url.scheme == "https" else {
            s.uploads.append("not posted: cloudToken \(token) is not an http URL")
            setScanError(&s, &fx, byte(error: "internalError"))
            return
        }
        // The URL's last component: the receiver's secret path (what a real mirror's result names is its own).
        let scanID = url.lastPathComponent
        let body = ResultArchive.body(options.result, scanID: scanID)
        fx.logs.append("posting \(body.count) bytes to \(token)")
        let internalError = byte(error: "internalError")
        Task { [self] in
            let outcome = await HTTPPoster.post(body, to: url)
            var fx = Effects()
            state.withLock { s in
                switch outcome {
                case .success(let status) where (200..<300).contains(status):
                    s.uploads.append("posted \(body.count) bytes to \(token): HTTP \(status)")
                case .success(let status):
                    s.uploads.append("posted \(body.count) bytes to \(token): HTTP \(status)")
                    if s.scanGeneration == generation { setScanError(&s, &fx, internalError) }
                case .failure(let e):
                    s.uploads.append("post to \(token) failed: \(e)")
                    if s.scanGeneration == generation { setScanError(&s, &fx, internalError) }
                }
                fx.logs.append(s.uploads.last!)
            }
            run(fx)
        }
    }
}

/// The sink of one connection's transport: hands PDUs and the close to the mirror.
final class SimConnectionSink: ATTTransportSink {
    private weak let mirror: SimulatedMirror?
    private let id: Int
    init(mirror: SimulatedMirror, id: Int) { self.mirror = mirror; self.id = id }
    func transport(didReceive pdu: [UInt8]) { mirror?.received(id, pdu) }
    func transport(didCloseWith reason: TransportError) { mirror?.closed(id, reason) }
}

