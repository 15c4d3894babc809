// The front door: one call connects to a GATT server (unix:PATH, or an LE address over L2CAP CID 4) on a link loop
// of its own, exchanges the MTU (517 by default), and returns the peer; on it, discovery with the GATT cache,
// names (handle, UUID, profile name, User Description), reads, writes and subscriptions, each error the exact ATT
// one. Every async method runs on the link's loop (`withLinkLoop`): a request is written, answered and resumed on
// the loop's thread.
@_exported import ATTStack
@_exported import GATTClient
@_exported import GATTVocabulary
@_exported import LinkCore
@_exported import LinuxBluetooth

/// A GATT server this process is connected to.
public final class Peer: Sendable {
    /// How to connect.
    public struct Options: Sendable {
        /// The adapter for an LE target ("hci0", or its address; nil lets the kernel route).
        public var adapter: String?
        /// The LE address type of an LE target.
        public var addressType: LEAddressType = .public
        /// The link security asked for at the connect (BT_SECURITY; an LE target only).
        public var security: BTSecurityLevel?
        /// The client Rx MTU for Exchange MTU (Vol 3 Part F §3.4.2.1) right after the connect; nil sends none (MTU 23).
        public var mtu: Int? = ATTMTU.maximum
        /// The ATT transaction timeout (Part F §3.3.3: 30 s).
        public var transactionTimeout: Duration = .seconds(30)
        /// How long the LE connect may take, in seconds.
        public var connectTimeout: Double = ATTBearer.defaultConnectTimeout
        /// Where discovered databases are kept between connections, keyed by the peer's Database Hash (nil: none);
        /// `FileDatabaseStore.standard()` keeps them in the files the CLI uses.
        public var cache: (any DatabaseStore)?
        /// A profile's names for characteristic UUIDs, resolved beside User Descriptions.
        public var names = CharacteristicNames()
        /// Progress and notes (the GATT cache's findings), in words; never printed by the library.
        public var notes: (@Sendable (String) -> Void)?
        /// Every progress event as a value (taken instead of `notes` when set).
        public var progress: (@Sendable (PeerProgress) -> Void)?
        /// The event loop to connect on (the caller's task may already prefer it); nil makes one.
        public var loop: EventLoop?
        /// False: `mtu` is the client's Rx MTU, but no Exchange MTU is sent (the caller sends its own) and no Enhanced
        /// ATT bearer opens.
        public var exchangesMTU = true
        /// This process answers the kernel's pairing requests for the connection's life (an LE target only), and the
        /// link asks for at least medium security (Vol 3 Part H §2.3); nil: no agent here.
        public var pairing: Pairing.AgentSetup?
        /// Whether a peer's Insufficient Encryption / Authentication (Vol 3 Part F §3.4.1.1) may raise the link's
        /// security when only bluetoothd would answer the pairing that starts (its agent's prompt, or SMP's 30 s
        /// timeout, Part H §3.4); false takes the refusal as the answer (`mirror clone` without --pair).
        public var raisesSecurityThroughDaemon = true
        /// After a lost bond (the peer's Encryption Change failed with 0x06, PIN or Key Missing), this host's bond is
        /// removed, the peer paired again with these prompts, and the connect made afresh once; nil: the error.
        public var repair: PairingPrompts?
        /// What the LE link is asked for right after the connect (Vol 4 Part E §7.8.18, §7.8.49, §7.8.33).
        public var linkRequests = LinkRequestOptions()
        /// Where the link monitor's HCI records go (nil: nowhere but the capture).
        public var records: LinkRecordSink?
        /// Where each ATT PDU's trace line goes (`ObservedTransport`), while `tracing`.
        public var trace: (@Sendable (String) -> Void)?
        /// Whether the trace starts on.
        public var tracing = false
        /// The btsnoop capture of the connection's ATT PDUs and its link's HCI records.
        public var capture: PeerCapture?
        /// How many ATT bearers: CID 4 and `enhancedBearers - 1` Enhanced ATT bearers after Exchange MTU.
        public var enhancedBearers = 1
        /// Called where the connect's privileged work ends, with when (the caller drops its capabilities then:
        /// LinuxBluetooth's `Privilege.dropAll`); nil keeps them.
        public var dropPrivileges: (@Sendable (String) -> Void)?
        /// Options with their defaults.
        public init() {}
    }

    /// The GATT client over CID 4 (and the Enhanced ATT bearers).
    public let client: GATTClient
    /// What was connected to.
    public let target: BearerTarget
    /// The database known on this connection, and the GATT cache under it.
    public let database: GATTDatabaseCache
    /// The resolver from handle, UUID or name to a characteristic.
    public let lookup: CharacteristicLookup
    /// The watch on CID 4's bearer: its trace to `Options.trace`, its backpressure, its close, its PDUs divertible.
    public let transport: ObservedTransport
    /// The LE link under CID 4 (nil over unix:, which has none).
    public let link: PeerLink?
    /// What `Options.linkRequests` came to, in the order asked.
    public let linkRequests: [LinkRequestReport]
    /// This process's pairing agent for the connection (`Options.pairing`), stopped with it.
    public let pairing: PairingService?
    /// Where the link monitor's HCI records go.
    public let records: LinkRecordSink
    /// The btsnoop capture: its writer, and whether the connection opened it (closed with it).
    let capture: Lock<(writer: BTSnoopWriter, owned: Bool)?>
    /// What the Enhanced ATT bearers came to, and those open (PeerBearers.swift).
    let enhanced = Lock<(outcome: EnhancedBearerOutcome?, links: [PeerEnhancedBearer])>((nil, []))

    /// The link's event loop: the executor of every method here.
    public var loop: EventLoop { client.eventLoop }
    /// The ATT_MTU in effect.
    public var mtu: Int { client.mtu }

    private init(client: GATTClient, target: BearerTarget, database: GATTDatabaseCache, names: CharacteristicNames,
                 transport: ObservedTransport, records: LinkRecordSink, connection: LinkConnection) {
        self.client = client
        self.target = target
        self.database = database
        lookup = CharacteristicLookup(database: database, names: names)
        self.transport = transport
        self.records = records
        link = connection.link
        linkRequests = connection.requests
        pairing = connection.pairing
        capture = Lock(connection.capture)
    }

    /// Connects to `target` on `options.loop` (else a new event loop), which is then the executor of the connect
    /// and of everything on the peer: the pairing agent and a bond's keys before the connect, the HCI link monitor,
    /// the capture, the link options, then the GATT client, Exchange MTU (`options.mtu`) and the Enhanced ATT
    /// bearers. Throws `TransportError` (the syscall and errno), `EncryptionFailedError`, `PairingUnavailableError`,
    /// `PairingError`, or `GATTError` (the peer's ATT error, or a named timeout).
    public static func connect(to target: BearerTarget, options: Options = Options()) async throws -> Peer {
        let loop = try options.loop ?? EventLoop()
        return try await withLinkLoop(loop) { () async throws -> Peer in
            let isUnix = if case .unix = target { true } else { false }
            let records = options.records ?? LinkRecordSink(tracing: false)
            let connection = try await LinkSetup(target: target, options: options, records: records).connect(on: loop)
            let transport = ObservedTransport(connection.bearer, tracing: options.tracing, lines: options.trace ?? { _ in })
            var configuration = GATTClient.Configuration()
            configuration.clientRxMTU = options.mtu ?? ATTMTU.minimumLE
            configuration.transactionTimeout = options.transactionTimeout
            if !isUnix {
                let bearer = connection.bearer
                configuration.setSecurityLevel = { level in try bearer.setSecurityLevel(level) }
                configuration.retryAfterRaisingSecurity = connection.mayRaiseSecurity
                // A bond's Just Works key with no agent here: a raise to high would start a MITM pairing nobody
                // answers and the kernel never reports to the socket, so 0x05 is the peer's answer to show.
                configuration.raiseLimit = connection.raiseLimit
                if let security = connection.security { configuration.initialSecurityLevel = max(security, .low) }
            }
            let client: GATTClient
            do { client = try await GATTClient.connect(transport: connection.bearer, configuration: configuration) } catch {
                connection.close(reason: "the GATT client did not start")
                throw error
            }
            // Service Changed (Part G §7.1) invalidates what is known of the database, here and in the cache.
            let database = GATTDatabaseCache(client: client, store: options.cache, target: target.description,
                                             adapter: isUnix ? nil : options.adapter,
                                             report: { event in options.report(.cache(event)) })
            let peer = Peer(client: client, target: target, database: database, names: options.names,
                            transport: transport, records: records, connection: connection)
            guard options.mtu != nil, options.exchangesMTU else { return peer }
            do { _ = try await client.exchangeMTU() } catch {
                peer.close(reason: "Exchange MTU failed")
                throw error
            }
            if options.enhancedBearers > 1 {
                let outcome = await PeerBearerSetup(target: target, options: options, security: connection.security).open(on: peer)
                options.report(.bearers(outcome))
            }
            return peer
        }
    }

    /// Every service, its characteristics and descriptors: discovered once per connection (Part G §4.4-4.7), or
    /// taken from the cache when the peer's Database Hash matches the cached copy's.
    public func discover() async throws(GATTError) -> [GATTService] {
        try await withLinkLoop(loop) { () async throws(GATTError) -> [GATTService] in try await database.discovered().services }
    }

    /// The database with every name a user may give: the profile's and every User Description (read once).
    public func catalog() async throws(GATTError) -> CharacteristicCatalog {
        try await withLinkLoop(loop) { () async throws(GATTError) -> CharacteristicCatalog in try await lookup.catalog(describing: nil) }
    }

    /// The one characteristic `reference` names. Throws `CharacteristicLookupError` for none or several.
    public func characteristic(_ reference: CharacteristicReference) async throws -> CharacteristicCatalog.Entry {
        try await withLinkLoop(loop) { try await lookup.characteristic(reference) }
    }

    /// The value of the characteristic `reference` names, whole (Read, then Read Blob while a part was full:
    /// Part G §4.8.1, §4.8.3); a handle is read as given, with no discovery.
    public func read(_ reference: CharacteristicReference) async throws -> [UInt8] {
        try await withLinkLoop(loop) {
            try await lookup.retryingOutOfSync(reference) { handle in try await lookup.read(handle: handle) }
        }
    }

    /// Writes `value` to the characteristic `reference` names: a Write Request (Part G §4.9.3), a long write when
    /// it exceeds the MTU's budget (§4.9.4), or a Write Command with `withResponse` false (§4.9.1, flow-controlled).
    public func write(_ reference: CharacteristicReference, _ value: [UInt8], withResponse: Bool = true) async throws {
        try await withLinkLoop(loop) {
            try await lookup.retryingOutOfSync(reference) { handle in
                let mode: GATTWriteMode = !withResponse ? .command : value.count > client.writeValueBudget ? .long : .request
                try await lookup.write(handle: handle, value: value, mode: mode)
            }
        }
    }

    /// Subscribes to the characteristic `reference` names: the stream is armed before the CCCD write (Part G
    /// §3.3.3.3), so no value is missed; the current value is read after it when the characteristic is readable.
    public func subscribe(_ reference: CharacteristicReference, preferIndications: Bool = false) async throws
        -> (value: [UInt8]?, notifications: GATTNotificationStream) {
        try await withLinkLoop(loop) {
            let entry = try await lookup.characteristic(reference)
            return try await database.retryingOutOfSync { try await client.subscribe(to: entry.characteristic, preferIndications: preferIndications) }
        }
    }

    /// Ends the connection (idempotent): the GATT client, the link's watch, the agent, the capture file it opened.
    public func close(reason: String = "the application closed the connection") {
        client.close(reason: reason)
        link?.close()
        pairing?.stop()
        if let c = capture.withLock({ $0 }), c.owned { c.writer.close() }
    }
}
