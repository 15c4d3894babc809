// Where a client keeps a peer's database between connections, under the peer's Database Hash (Core Spec 5.4
// Vol 3 Part G §2.5.2, §7.3): the protocol a store implements (GATTPeer's files, a test's memory).
import ATTStack
import GATTVocabulary

/// One peer's database as stored: where it was reached, its Database Hash when it was discovered, its services.
public struct GATTCachedDatabase: Sendable, Equatable {
    /// The target as the caller names it ("unix:/tmp/mirror-sim.sock", "C0:11:22:33:44:55").
    public var target: String
    /// The adapter it was reached through; nil: the kernel's choice.
    public var adapter: String?
    /// The peer's Database Hash when the database was discovered (16 bytes, as read).
    public var databaseHash: [UInt8]
    public var services: [GATTService]

    public init(target: String, adapter: String?, databaseHash: [UInt8], services: [GATTService]) {
        self.target = target
        self.adapter = adapter
        self.databaseHash = databaseHash
        self.services = services
    }

    /// Whether `services` hash to `databaseHash`: by §7.3 (in either octet order) or by bluetoothd's rule
    /// (`GATTDatabaseHash.blueZHashes`). A store trusts an entry only then.
    public var hashesToItsHash: Bool {
        let spec = (try? GATTDatabaseHash.compute(services: services)) ?? nil
        if let spec, GATTDatabaseHash.order(computed: spec, served: databaseHash) != nil { return true }
        let bluez = (try? GATTDatabaseHash.blueZHashes(services: services)) ?? nil
        return bluez?.contains(where: { $0.hash == databaseHash }) == true
    }
}

/// Why a store could not load, keep or clear an entry, in words (the store's own: a file's path and errno).
public struct DatabaseStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Keeps databases by target and adapter between connections (`GATTDatabaseCache` reads and writes it).
public protocol DatabaseStore: Sendable {
    /// The database kept for `target` on `adapter`; nil when there is none. Throws when there is one that cannot
    /// be used (corrupt, another target's, not hashing to its hash): it is then ignored and reported.
    func load(target: String, adapter: String?) throws(DatabaseStoreError) -> GATTCachedDatabase?
    /// Keeps `database` under its target and adapter, replacing what was kept there.
    func store(_ database: GATTCachedDatabase) throws(DatabaseStoreError)
    /// Forgets what is kept for `target` on `adapter`; returns where it was (a file's path), empty when nowhere.
    func clear(target: String, adapter: String?) throws(DatabaseStoreError) -> [String]
}
