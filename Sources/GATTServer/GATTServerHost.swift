// The ATT server over ATT transports: one database for any number of connections, each with its own session
// (Core Spec 5.4 Vol 3 Part F §3.2.8, Part G §3.3.3.3), its outbox, and its one indication in flight (Part F §3.4.7.2).
import ATTStack
import GATTVocabulary
import LinuxBluetooth
import LinkCore
import Dispatch

/// What the fault layer does with one PDU from the client before the server sees it.
public enum ATTInterception: Sendable, Equatable {
    /// The server answers it.
    case serve
    /// The server answers these bytes instead (an altered request).
    case serveAs([UInt8])
    /// The server answers it this many milliseconds later.
    case delay(milliseconds: Int)
    /// Nobody answers (a silent peer).
    case drop
    /// These bytes go out instead of the answer (a malformed one, on purpose).
    case reply([UInt8])
    /// The connection closes instead.
    case close(reason: String)
}

/// A GATT server on transports. `read`, `write`, `serve` and `outbound` run under the host's lock (they must not call
/// back into the host or a connection; `serve` acts through its `Context`); the others run outside it and may send.
public final class GATTServerHost: Sendable {
    public struct Hooks: Sendable {
        public var read: @Sendable (AttributeRead, ATTServerConnection) -> ReadOutcome = { _, _ in .stored }
        public var write: @Sendable (AttributeWrite, ATTServerConnection) -> WriteOutcome = { _, _ in .store }
        /// The fault layer: sees every PDU from a client first.
        public var inbound: @Sendable ([UInt8], ATTServerConnection) -> ATTInterception = { _, _ in .serve }
        /// Runs after the server answered (or chose not to answer) `pdu` from the client.
        public var answered: @Sendable (ATTPDU, ATTServerConnection) -> Void = { _, _ in }
        /// The fault layer for Enhanced ATT bearers: a result other than nil refuses the request with it.
        public var enhancedRequest: @Sendable (EnhancedBearerRequest) -> L2CAPConnectionResult? = { _ in nil }
        /// Answers one decoded PDU under the lock: the default is the server's answer (`Context.answer`); an app may
        /// refuse it, send before it (notifications ahead of the response), delay or drop the reply, or close.
        public var serve: @Sendable (ATTPDU, ATTServerConnection, inout Context) -> ATTServerReply = { pdu, c, ctx in ctx.answer(pdu, from: c) }
        /// Sees every PDU just before it is queued on `connection` (a trace), under the lock.
        public var outbound: @Sendable ([UInt8], ATTServerConnection) -> Void = { _, _ in }
        /// A connection registered (an Enhanced ATT bearer with its client's unenhanced connection), before its reader starts.
        public var attached: @Sendable (ATTServerConnection, _ client: ATTServerConnection?) -> Void = { _, _ in }
        /// A connection ended, outside the lock (before the host closes an unenhanced one's Enhanced ATT bearers).
        public var closed: @Sendable (ATTServerConnection, TransportError) -> Void = { _, _ in }
        public init() {}
    }

    /// What became of one Enhanced ATT bearer request.
    public enum EnhancedBearerOutcome: Sendable {
        /// Opened: the bearer's connection (its `transport` an ATTBearer with `channelIDs`) and its number (1...).
        case opened(ATTServerConnection, bearer: Int)
        /// Refused with this L2CAP result (the request's connection is closed).
        case refused(L2CAPConnectionResult)
    }

    struct Connection {
        let link: ATTServerConnection
        /// An Enhanced ATT bearer's unenhanced connection (its client's CID 4): its CCCDs are the client's.
        var primary: ObjectIdentifier? = nil
        /// On an unenhanced connection: how many Enhanced ATT bearers its client has opened so far.
        var enhancedOpened = 0
        var session = ATTSession()
        var outbox = ATTOutbox()
        /// Indications not yet sent: one is in flight until its Handle Value Confirmation (Vol 3 Part F §3.4.7.2).
        var indications: [(UInt16, [UInt8])] = []
        var indicating = false
        /// This client's own copy of the database (`databasePerConnection`); nil: the host's one database.
        var database: AttributeDatabase? = nil
        /// A send failed: the connection is closing (a stream stops here).
        var failed = false
        /// A stream paused until the outbox drains (`stream`).
        var resume: (@Sendable () -> Void)? = nil
        /// The link security a test set for this client (`setLinkSecurity`); nil: the transport's, else the host's
        /// `securityWithoutLink`.
        var linkSecurity: BTSecurity? = nil
    }

    /// The host's state under its lock, as `Hooks.serve` and `withContext` see it: sends are queued in order with
    /// everything else the host sends; writable waits and closes run once the lock is released.
    public struct Context {
        var server: ATTServer
        var connections: [ObjectIdentifier: Connection] = [:]
        /// The unenhanced connection attached last: the client whose Enhanced ATT bearers come next.
        var latest: ObjectIdentifier?
        let hooks: Hooks
        let timers: DispatchQueue
        /// The security of a connection whose transport has no link (`GATTServerHost.securityWithoutLink`).
        let securityWithoutLink: BTSecurity
        var waits: [ATTServerConnection] = []
        var closes: [(any ATTTransport, String)] = []
    }

    let hooks: Hooks
    let state: Lock<Context>
    /// The one serial queue of the host's timed work: delayed answers (`ATTServerReply.later`, `ATTInterception.delay`).
    /// An app schedules its own timed events here (a notification due before a delayed Write Response), so what is due
    /// first goes out first: two queues' timers fired in one wake run on two threads in either order.
    public let timers = DispatchQueue(label: "gatt-server.timers")
    /// The most Enhanced ATT bearers one client may open beside its unenhanced one; more get "no resources available".
    public let enhancedBearerLimit: Int
    /// Each client gets its own copy of `database` as it was at the start, so no client sees another's writes (a test
    /// peer); its Enhanced ATT bearers share it. False: one database for every client (Vol 3 Part G §3).
    public let databasePerConnection: Bool
    /// The link security of a connection whose transport has none to report (unix:, a socketpair, a test double),
    /// unless set per connection (`ATTServerConnection.setLinkSecurity`): what a test plays. An LE bearer's is its
    /// socket's BT_SECURITY, read when a request meets an attribute with a security requirement (Vol 3 Part C §10.2).
    public let securityWithoutLink: BTSecurity

    public init(database: AttributeDatabase, serverRxMTU: UInt16 = 517, hooks: Hooks = Hooks(), enhancedBearerLimit: Int = 4,
                databasePerConnection: Bool = false, securityWithoutLink: BTSecurity = .unencrypted) {
        self.hooks = hooks
        self.enhancedBearerLimit = enhancedBearerLimit
        self.databasePerConnection = databasePerConnection
        self.securityWithoutLink = securityWithoutLink
        state = Lock(Context(server: ATTServer(database: database, serverRxMTU: serverRxMTU), hooks: hooks, timers: timers,
                             securityWithoutLink: securityWithoutLink))
    }

    /// A copy of the database (stored values as the clients wrote them).
    public var database: AttributeDatabase { state.withLock { $0.server.database } }

    /// How many clients are connected (unenhanced connections; their Enhanced ATT bearers are not counted).
    public var clientCount: Int { state.withLock { s in s.connections.values.filter { $0.primary == nil }.count } }

    /// Runs `body` under the host's lock (an app's timer: change a value and notify in one step), then its sends' waits
    /// and closes. `body` must not call back into the host.
    public func withContext<R>(_ body: (inout Context) -> R) -> R {
        let (result, waits, closes) = state.withLock { s in
            let r = body(&s)
            defer { s.waits = []; s.closes = [] }
            return (r, s.waits, s.closes)
        }
        for c in waits { waitWritable(c) }
        for (t, reason) in closes { Self.close(t, reason: reason) }
        return result
    }

    /// Closes every connection (the server is shutting down), a lent socket too (`ATTServerConnection.lend`).
    public func disconnectAll(reason: String) {
        let transports = state.withLock { s in s.connections.values.map(\.link.transport) }
        for t in transports { Self.close(t, reason: reason) }
    }

    /// Closes `transport`; a socket bearer's running loan is interrupted (its socket shut down), so it cannot hold the close.
    static func close(_ transport: any ATTTransport, reason: String) {
        if let bearer = transport as? ATTBearer { bearer.close(reason: reason, interruptingLoan: true) } else { transport.close(reason: reason) }
    }

    /// Attaches every connection `listener` accepts, on a thread of its own, until accepting fails (`listener.close()`
    /// makes it fail with `.closedLocally`); then `ended` gets that error.
    public func acceptConnections(on listener: ATTBearerListener, ended: @escaping @Sendable (TransportError) -> Void = { _ in }) {
        startDetachedThread { [self] in
            while true {
                do throws(TransportError) { attach(try listener.accept()) } catch {
                    ended(error)
                    return
                }
            }
        }
    }

    /// Serves `transport`: registers the connection, then starts its reader.
    @discardableResult
    public func attach(_ transport: any ATTTransport) -> ATTServerConnection {
        let connection = ATTServerConnection(host: self, transport: transport)
        state.withLock { s in
            var conn = Connection(link: connection)
            if databasePerConnection { conn.database = s.server.database }
            s.connections[ObjectIdentifier(connection)] = conn
            s.latest = ObjectIdentifier(connection)
        }
        hooks.attached(connection, nil)
        transport.start(connection)
        return connection
    }

    /// Accepts the next Enhanced ATT bearer request on `listener` (PATH.eatt, within `timeout`) for the client
    /// attached last (the one connected at PATH), and answers it (Core Spec 5.4 Vol 3 Part F §3.2.11): refused with
    /// the fault layer's result, "SPSM not supported" for an SPSM other than 0x0027, "unacceptable parameters" for
    /// an MTU below 64 (Part A §4.25), "no resources available" without a client or past `enhancedBearerLimit`;
    /// otherwise a bearer with its own session (the smaller MTU, its prepare queue, its indication slot) over
    /// the one database, its CCCDs the client's.
    /// On an ECRED listener (`ATTBearerListener.leEnhanced`, PSM 0x0027) the kernel has answered already: the channel
    /// is served as `attachEnhanced` does.
    public func acceptEnhancedBearer(on listener: ATTBearerListener, timeout: Double? = nil) throws(TransportError) -> EnhancedBearerOutcome {
        if case .leEnhanced = listener.kind { return attachEnhanced(try listener.accept(timeout: timeout)) }
        return try answerEnhancedRequest(try listener.acceptEnhancedRequest(timeout: timeout))
    }

    /// Answers one Enhanced ATT bearer request already read from a PATH.eatt listener, as `acceptEnhancedBearer` does.
    public func answerEnhancedRequest(_ request: EnhancedBearerRequest) throws(TransportError) -> EnhancedBearerOutcome {
        let fault = hooks.enhancedRequest(request)
        enum Decision { case open(ObjectIdentifier, Int), refuse(L2CAPConnectionResult) }
        let decision: Decision = state.withLock { s in
            if let fault { return .refuse(fault) }
            let client = s.latest.flatMap { s.connections[$0] }
            if let result = request.refusal(hasClient: client != nil, opened: client?.enhancedOpened ?? 0, limit: enhancedBearerLimit) {
                return .refuse(result)
            }
            guard let id = s.latest, var client else { return .refuse(.noResourcesAvailable) }
            client.enhancedOpened += 1
            s.connections[id] = client
            return .open(id, client.enhancedOpened)
        }
        let primary: ObjectIdentifier, number: Int
        switch decision {
        case .refuse(let result):
            request.refuse(result)
            return .refused(result)
        case .open(let id, let n): (primary, number) = (id, n)
        }
        let serverMTU = Int(state.withLock { $0.server.serverRxMTU })
        return register(try request.accept(mtu: serverMTU, bearer: number), primary: primary, number: number)
    }

    /// Serves an accepted ECRED channel (an Enhanced ATT bearer over a real adapter, its MTUs agreed by the kernels)
    /// as a bearer of the client on the same LE link, or of the client attached last when it is not an LE bearer;
    /// without one, or past `enhancedBearerLimit`, it is closed ("no resources available").
    @discardableResult
    public func attachEnhanced(_ bearer: ATTBearer) -> EnhancedBearerOutcome {
        let reserved: (ObjectIdentifier, Int)? = state.withLock { s in
            let sameLink = s.connections.first { $0.value.primary == nil && bearer.sharesLink(with: $0.value.link.transport) }?.key
            let lePeer: Bool = { if case .le = bearer.endpoint { return true } else { return false } }()
            guard let id = sameLink ?? (lePeer ? nil : s.latest), var client = s.connections[id],
                  client.enhancedOpened < enhancedBearerLimit else { return nil }
            client.enhancedOpened += 1
            s.connections[id] = client
            return (id, client.enhancedOpened)
        }
        guard let (primary, number) = reserved else {
            bearer.close(reason: "no client to join (or past the limit of \(enhancedBearerLimit) Enhanced ATT bearers)")
            return .refused(.noResourcesAvailable)
        }
        return register(bearer, primary: primary, number: number)
    }

    /// Registers bearer `number` of the client at `primary` with a session of its channel's MTU, then starts it.
    private func register(_ bearer: ATTBearer, primary: ObjectIdentifier, number: Int) -> EnhancedBearerOutcome {
        let mtu = (try? bearer.enhancedMTU()) ?? ATTBearer.minimumEnhancedMTU
        let connection = ATTServerConnection(host: self, transport: bearer)
        let client: ATTServerConnection? = state.withLock { s in
            guard let client = s.connections[primary] else { return nil }
            var conn = Connection(link: connection, primary: primary)
            conn.session = ATTSession(enhancedMTU: mtu)
            s.connections[ObjectIdentifier(connection)] = conn
            return client.link
        }
        guard let client else {
            bearer.close(reason: "its client's unenhanced connection closed while the Enhanced ATT bearer opened")
            return .refused(.noResourcesAvailable)
        }
        hooks.attached(connection, client)
        bearer.start(connection)
        return .opened(connection, bearer: number)
    }

    /// Sends a Handle Value Notification of `value` to every client that enabled notifications (on its unenhanced
    /// connection, which holds the client's CCCDs).
    public func notifySubscribers(handle: UInt16, value: [UInt8]) {
        let links = state.withLock { s in
            s.connections.values.filter { $0.primary == nil && $0.session.subscribed(handle) }.map(\.link)
        }
        for c in links { c.notify(handle: handle, value: value) }
    }

    // MARK: - one connection's events

    func received(_ c: ATTServerConnection, _ bytes: [UInt8]) {
        switch hooks.inbound(bytes, c) {
        case .serve: serve(c, bytes)
        case .serveAs(let other): serve(c, other)
        case .delay(let ms): timers.asyncAfter(deadline: .now() + .milliseconds(ms)) { [self] in serve(c, bytes) }
        case .drop: return
        case .reply(let raw): send(c) { _ in raw }
        case .close(let reason): c.transport.close(reason: reason)
        }
    }

    func serve(_ c: ATTServerConnection, _ bytes: [UInt8]) {
        let pdu: ATTPDU
        switch ATTServer.decode(bytes) {
        case .pdu(let p): pdu = p
        case .malformed(_, let reply):
            if case .now(let error) = reply { send(c) { _ in error.bytes } }
            return
        }
        if pdu == .handleValueConfirmation { confirmed(c) }
        let id = ObjectIdentifier(c)
        let reply: ATTServerReply = withContext { s in
            guard s.connections[id] != nil else { return .none }
            let reply = hooks.serve(pdu, c, &s)
            if case .now(let answer) = reply { s.send(answer, to: c) }
            return reply
        }
        if case .later(let ms, let answer) = reply {
            timers.asyncAfter(deadline: .now() + .milliseconds(ms)) { [self] in send(c) { _ in answer.bytes } }
        }
        hooks.answered(pdu, c)
    }

    /// A connection ended; an unenhanced one takes its client's Enhanced ATT bearers with it (the link is gone).
    func closed(_ c: ATTServerConnection, _ reason: TransportError) {
        let id = ObjectIdentifier(c)
        let bearers = state.withLock { s -> [ATTServerConnection] in
            guard let gone = s.connections.removeValue(forKey: id), gone.primary == nil else { return [] }
            if s.latest == id { s.latest = nil }
            return s.connections.values.filter { $0.primary == id }.map(\.link)
        }
        hooks.closed(c, reason)
        for b in bearers { b.close(reason: "its client's unenhanced connection closed") }
    }

    // MARK: - sending

    /// Sends in order the bytes `make` gives for the connection's MTU (encoded by the codec, or a fault's raw bytes).
    func send(_ c: ATTServerConnection, _ make: (Int) -> [UInt8]) {
        withContext { s in s.sendRaw(to: c, make) }
    }

    /// Sends `next(i, mtu)` for i = `index`, `index` + 1, ... until it gives nil, each once the socket took everything
    /// queued before it: a full socket pauses the stream until POLLOUT, so it holds one PDU, not all of them, and other
    /// sends go between (a flood: Vol 3 Part F §3.4.7.1 sets no limit). `next` runs under the lock; `ended` gets how
    /// many were queued and whether `next` ran out (false: the connection ended first).
    func stream(_ c: ATTServerConnection, from index: Int, _ next: @escaping @Sendable (_ index: Int, _ mtu: Int) -> [UInt8]?,
                ended: @escaping @Sendable (_ sent: Int, _ finished: Bool) -> Void) {
        let id = ObjectIdentifier(c)
        var i = index
        enum Step { case backlogged, burst, finished, gone }
        let step: Step = withContext { s in
            while true {
                guard var conn = s.connections[id], !conn.failed else { return .gone }
                if conn.outbox.isBacklogged {
                    // The outbox's flush resumes it once what waits has gone (or failed): see `waitWritable`.
                    conn.resume = { [weak self, i] in self?.stream(c, from: i, next, ended: ended) }
                    s.connections[id] = conn
                    return .backlogged
                }
                // After `streamBurst` PDUs the stream waits for POLLOUT, so that the connection's reads get a turn.
                if i - index == Self.streamBurst { return .burst }
                guard let bytes = next(i, conn.session.mtu) else { return .finished }
                s.sendRaw(to: c) { _ in bytes }
                i += 1
            }
        }
        switch step {
        case .backlogged: break
        case .burst: c.transport.whenWritable { [weak self, i] in self?.stream(c, from: i, next, ended: ended) }
        case .finished: ended(i, true)
        case .gone: ended(i, false)
        }
    }

    /// The most PDUs a stream sends in one go before it waits for POLLOUT again.
    static let streamBurst = 256

    /// Queues one indication; it goes out when no other is waiting for its confirmation.
    func indicate(_ c: ATTServerConnection, handle: UInt16, value: [UInt8]) {
        withContext { s in s.indicate(handle: handle, value: value, to: c) }
    }

    /// A Handle Value Confirmation: the next queued indication goes.
    func confirmed(_ c: ATTServerConnection) {
        let id = ObjectIdentifier(c)
        let next: (UInt16, [UInt8])? = state.withLock { s in
            guard var conn = s.connections[id] else { return nil }
            defer { s.connections[id] = conn }
            guard !conn.indications.isEmpty else { conn.indicating = false; return nil }
            return conn.indications.removeFirst()
        }
        if let (handle, value) = next { send(c) { mtu in Self.indication(handle, value, mtu) } }
    }

    static func indication(_ handle: UInt16, _ value: [UInt8], _ mtu: Int) -> [UInt8] {
        ATTPDU.handleValueIndication(handle: handle, value: value.prefix(ATTMTU.writeValueBudget(mtu))).bytes
    }

    func session(_ c: ATTServerConnection) -> ATTSession {
        state.withLock { $0.connections[ObjectIdentifier(c)]?.session ?? ATTSession() }
    }


    func waitWritable(_ c: ATTServerConnection) {
        let id = ObjectIdentifier(c)
        c.transport.whenWritable { [weak self] in
            guard let self else { return }
            let (again, resume) = self.state.withLock { s -> (Bool, (@Sendable () -> Void)?) in
                guard var conn = s.connections[id] else { return (false, nil) }
                defer { s.connections[id] = conn }
                do {
                    if try conn.outbox.flush(on: c.transport) { return (true, nil) }
                } catch {
                    conn.failed = true
                    self.timers.async { c.transport.close(reason: "send failed: \(error)") }
                }
                // Drained (or failed): a stream paused behind the queue goes on (or ends).
                defer { conn.resume = nil }
                return (false, conn.resume)
            }
            if again { self.waitWritable(c) }
            resume?()
        }
    }
}

extension GATTServerHost.Context {
    /// The database served now; setting it (a database change, Vol 3 Part G §7.1) serves the new one from the next PDU.
    public var database: AttributeDatabase {
        get { server.database }
        set { server.database = newValue }
    }

    /// The clients: every unenhanced connection (the one holding its client's CCCDs, Part G §3.3.3.3).
    public var clients: [ATTServerConnection] { connections.values.filter { $0.primary == nil }.map(\.link) }
    /// Every connection, Enhanced ATT bearers included.
    public var allConnections: [ATTServerConnection] { connections.values.map(\.link) }
    /// The unenhanced connection attached last (the one whose Enhanced ATT bearers come next), if still open.
    public var latestClient: ATTServerConnection? { latest.flatMap { connections[$0]?.link } }
    /// How many Enhanced ATT bearers `c`'s client has opened.
    public func enhancedOpened(by c: ATTServerConnection) -> Int { connections[ObjectIdentifier(client(of: c))]?.enhancedOpened ?? 0 }

    /// The unenhanced connection of `c`'s client: `c` itself, or an Enhanced ATT bearer's CID 4 connection.
    public func client(of c: ATTServerConnection) -> ATTServerConnection {
        connections[ObjectIdentifier(c)]?.primary.flatMap { connections[$0]?.link } ?? c
    }

    /// `c`'s MTU, CCCDs and prepare queue.
    public func session(of c: ATTServerConnection) -> ATTSession { connections[ObjectIdentifier(c)]?.session ?? ATTSession() }

    /// The link security `c`'s requests are checked against (Vol 3 Part C §10.2): the one set for its client
    /// (`setLinkSecurity`), else its transport's BT_SECURITY (unencrypted when that read fails), else the host's
    /// `securityWithoutLink` (unix: has no link).
    public func linkSecurity(of c: ATTServerConnection) -> BTSecurity { linkSecurityQuery(of: c)() }

    /// Sets the link security of `c`'s client and its Enhanced ATT bearers (a unix: test playing an encrypted link,
    /// or a pairing); nil: back to its transport's, else `securityWithoutLink`.
    public mutating func setLinkSecurity(_ security: BTSecurity?, of c: ATTServerConnection) {
        connections[ObjectIdentifier(client(of: c))]?.linkSecurity = security
    }

    /// Reads `c`'s link security when called (its transport's only then: a getsockopt per check, none otherwise).
    func linkSecurityQuery(of c: ATTServerConnection) -> @Sendable () -> BTSecurity {
        let set = connections[ObjectIdentifier(client(of: c))]?.linkSecurity
        let transport = c.transport, fallback = securityWithoutLink
        return {
            if let set { return set }
            guard let socket = transport as? any SecurableTransport else { return fallback }
            do { return try socket.linkSecurity() ?? fallback } catch { return .unencrypted }
        }
    }

    /// The server's answer to `pdu` from `c`, with the hooks' read and write handlers, `c`'s session updated (its
    /// client's CCCDs for an Enhanced ATT bearer, Part G §3.3.3.3). Nothing is sent: the caller returns or sends it.
    public mutating func answer(_ pdu: ATTPDU, from c: ATTServerConnection) -> ATTServerReply {
        let id = ObjectIdentifier(c)
        guard var conn = connections[id] else { return .none }
        if let p = conn.primary, let client = connections[p] { conn.session.cccd = client.session.cccd }
        let hooks = self.hooks
        let owner = conn.primary ?? id
        let link = linkSecurityQuery(of: c)
        let reply: ATTServerReply
        if let own = connections[owner]?.database {
            // The client's own copy (`databasePerConnection`): answered over it, its writes kept in it.
            var copy = server
            copy.database = own
            reply = copy.answer(pdu, session: &conn.session, read: { hooks.read($0, c) }, write: { hooks.write($0, c) }, link: link)
            if owner == id { conn.database = copy.database } else { connections[owner]?.database = copy.database }
        } else {
            reply = server.answer(pdu, session: &conn.session, read: { hooks.read($0, c) }, write: { hooks.write($0, c) }, link: link)
        }
        if let p = conn.primary { connections[p]?.session.cccd = conn.session.cccd }
        connections[id] = conn
        return reply
    }

    /// Sends `pdu` on `c` after whatever is queued there.
    public mutating func send(_ pdu: ATTPDU, to c: ATTServerConnection) { sendRaw(to: c) { _ in pdu.bytes } }

    /// Sends bytes as they are on `c` after whatever is queued there (a fault's malformed or unasked-for PDU).
    public mutating func sendRaw(_ bytes: [UInt8], to c: ATTServerConnection) { sendRaw(to: c) { _ in bytes } }

    /// Changes `c`'s session in place (a fault that agrees on another MTU than its Exchange MTU Response says).
    public mutating func updateSession(of c: ATTServerConnection, _ body: (inout ATTSession) -> Void) {
        guard var conn = connections[ObjectIdentifier(c)] else { return }
        body(&conn.session)
        connections[ObjectIdentifier(c)] = conn
    }

    /// A Handle Value Notification (Vol 3 Part F §3.4.7.1) on `c`, cut to its MTU-3.
    public mutating func notify(handle: UInt16, value: [UInt8], to c: ATTServerConnection) {
        sendRaw(to: c) { mtu in ATTPDU.handleValueNotification(handle: handle, value: value.prefix(ATTMTU.writeValueBudget(mtu))).bytes }
    }

    /// A Handle Value Indication (§3.4.7.2) on `c`: queued while another waits for its confirmation.
    public mutating func indicate(handle: UInt16, value: [UInt8], to c: ATTServerConnection) {
        let id = ObjectIdentifier(c)
        guard var conn = connections[id] else { return }
        if conn.indicating {
            conn.indications.append((handle, value))
            connections[id] = conn
            return
        }
        conn.indicating = true
        connections[id] = conn
        sendRaw(to: c) { mtu in GATTServerHost.indication(handle, value, mtu) }
    }

    /// Closes `c` once the lock is released (a lent socket too).
    public mutating func close(_ c: ATTServerConnection, reason: String) { closes.append((c.transport, reason)) }

    /// Sends or queues the bytes `make` gives for `c`'s MTU; a failed send closes it once the lock is released.
    mutating func sendRaw(to c: ATTServerConnection, _ make: (Int) -> [UInt8]) {
        let id = ObjectIdentifier(c)
        guard var conn = connections[id] else { return }
        let bytes = make(conn.session.mtu)
        hooks.outbound(bytes, c)
        do {
            if try conn.outbox.send(bytes, on: c.transport) { waits.append(c) }
        } catch {
            conn.failed = true
            let transport = c.transport
            timers.async { transport.close(reason: "send failed: \(error)") }
        }
        connections[id] = conn
    }
}

/// The object a host's hooks call, set once it exists: the hooks are made before the host, the host before the
/// object that holds it (the simulator, the hostile peer). Weak: that object holds the host, which holds the hooks.
public final class HookOwner<Owner: AnyObject & Sendable>: Sendable {
    /// Guards the weak reference.
    private let reference = Lock<Weak>(Weak())
    private struct Weak { weak var owner: Owner? }
    public init() {}
    public var owner: Owner? { reference.withLock { $0.owner } }
    public func set(_ owner: Owner) { reference.withLock { $0.owner = owner } }
}

/// One client's connection to a `GATTServerHost`: the transport's sink, and what a fault or a test may do on it.
public final class ATTServerConnection: ATTTransportSink {
    public let transport: any ATTTransport
    private weak let host: GATTServerHost?

    init(host: GATTServerHost, transport: any ATTTransport) {
        self.host = host
        self.transport = transport
    }

    public func transport(didReceive pdu: [UInt8]) { host?.received(self, pdu) }
    public func transport(didCloseWith reason: TransportError) { host?.closed(self, reason) }

    /// This connection's MTU, CCCDs and prepare queue.
    public var session: ATTSession { host?.session(self) ?? ATTSession() }
    /// The link security its requests are checked against now (`GATTServerHost.Context.linkSecurity(of:)`).
    public var linkSecurity: BTSecurity { host?.withContext { $0.linkSecurity(of: self) } ?? .unencrypted }
    /// Sets its client's link security (a unix: test playing "encrypted"); nil: its transport's, else the host's
    /// `securityWithoutLink` (`GATTServerHost.Context.setLinkSecurity(_:of:)`).
    public func setLinkSecurity(_ security: BTSecurity?) { host?.withContext { $0.setLinkSecurity(security, of: self) } }
    /// Sends `pdu` (encoded by the codec) after whatever is queued.
    public func send(_ pdu: ATTPDU) { host?.send(self) { _ in pdu.bytes } }
    /// Sends bytes as they are (a fault's malformed PDU).
    public func sendRaw(_ bytes: [UInt8]) { host?.send(self) { _ in bytes } }
    /// A Handle Value Notification (Vol 3 Part F §3.4.7.1), cut to MTU-3.
    public func notify(handle: UInt16, value: [UInt8]) {
        host?.send(self) { mtu in ATTPDU.handleValueNotification(handle: handle, value: value.prefix(ATTMTU.writeValueBudget(mtu))).bytes }
    }
    /// A Handle Value Indication (§3.4.7.2): queued while another waits for its confirmation.
    public func indicate(handle: UInt16, value: [UInt8]) { host?.indicate(self, handle: handle, value: value) }
    /// Closes the connection (a lent socket too).
    public func close(reason: String) { GATTServerHost.close(transport, reason: reason) }

    /// Sends `next(i, mtu)` for i = 0, 1, ... until nil, one PDU at a time as the socket takes them, other sends
    /// going between (`GATTServerHost.stream`); `ended` gets how many were queued and whether `next` ran out.
    public func stream(_ next: @escaping @Sendable (_ index: Int, _ mtu: Int) -> [UInt8]?,
                       ended: @escaping @Sendable (_ sent: Int, _ finished: Bool) -> Void) {
        host?.stream(self, from: 0, next, ended: ended)
    }

    /// Runs `body` with the connection's socket (`ATTBearer.lend`, on its loop): meanwhile the host reads nothing
    /// from it and its sends wait, so a body can play a peer that stops reading. Nil when the transport is not a
    /// started socket bearer or is closing. `close` and `disconnectAll` shut a lent socket down: a blocked body returns.
    public func lend(_ body: @escaping @Sendable (Int32?) -> Void) {
        guard let bearer = transport as? ATTBearer else { return body(nil) }
        bearer.lend(body)
    }
}
