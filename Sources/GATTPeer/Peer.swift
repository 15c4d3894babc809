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
        public init() {}
    }

    public let client: GATTClient
    public let target: BearerTarget
    /// The database known on this connection, and the GATT cache under it.
    public let database: GATTDatabaseCache
    /// The resolver from handle, UUID or name to a characteristic.
    public let lookup: CharacteristicLookup

    /// The link's event loop: the executor of every method here.
    public var loop: EventLoop { client.eventLoop }
    /// The ATT_MTU in effect.
    public var mtu: Int { client.mtu }

    private init(client: GATTClient, target: BearerTarget, database: GATTDatabaseCache, names: CharacteristicNames) {
        self.client = client
        self.target = target
        self.database = database
        lookup = CharacteristicLookup(database: database, names: names)
    }

    /// Connects to `target`, on a new event loop that is then the executor of the connect and of everything on
    /// the peer, and exchanges the MTU (`options.mtu`). Throws `TransportError` (the syscall and errno) or
    /// `GATTError` (the peer's ATT error, or a named timeout).
    public static func connect(to target: BearerTarget, options: Options = Options()) async throws -> Peer {
        let loop = try EventLoop()
        return try await withLinkLoop(loop) { () async throws -> Peer in
            let isUnix = if case .unix = target { true } else { false }
            let bearer = try await ATTBearer.connect(to: target, type: options.addressType, adapter: options.adapter,
                                                     timeout: options.connectTimeout, security: isUnix ? nil : options.security, on: loop)
            var configuration = GATTClient.Configuration()
            configuration.clientRxMTU = options.mtu ?? ATTMTU.minimumLE
            configuration.transactionTimeout = options.transactionTimeout
            if !isUnix {
                configuration.setSecurityLevel = { level in try bearer.setSecurityLevel(level) }
                if let security = options.security { configuration.initialSecurityLevel = security }
            }
            let client = try await GATTClient.connect(transport: bearer, configuration: configuration)
            let notes = options.notes
            let database = GATTDatabaseCache(client: client, store: options.cache, target: target.description,
                                             adapter: isUnix ? nil : options.adapter,
                                             report: { event in notes?("\(event)") })
            let peer = Peer(client: client, target: target, database: database, names: options.names)
            if options.mtu != nil {
                do { _ = try await client.exchangeMTU() } catch {
                    peer.close(reason: "Exchange MTU failed")
                    throw error
                }
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

    /// Ends the connection (idempotent).
    public func close(reason: String = "the application closed the connection") { client.close(reason: reason) }
}
