// The database one connection knows, from a DatabaseStore or discovery, kept in step with the peer (Core Spec
// 5.4 Vol 3 Part G §2.5.2): the Database Hash check (§7.3), robust caching (§2.5.2.1, §7.2), the retry after
// Database Out Of Sync (0x12, Part F §3.4.1.1) and Service Changed (§7.1) on the client's own indication path.
import ATTStack
import GATTVocabulary
import LinkCore

/// What one connection knows of the peer's database: its services, and the user descriptions read.
public struct GATTKnownDatabase: Sendable {
    public var services: [GATTService]
    /// Characteristic User Descriptions (0x2901, §3.3.3.2) read, by value handle.
    public var descriptions: [UInt16: String] = [:]
    /// Value handles whose user description has been looked for (read, or found to have none).
    public var described: Set<UInt16> = []
    /// The peer's Database Hash when `services` came from the store (not discovered on this connection).
    public var unverifiedHash: [UInt8]? = nil
    /// Declaration handles of stored characteristics the peer's declarations confirmed (`verify`).
    public var verified: Set<UInt16> = []

    public init(services: [GATTService], unverifiedHash: [UInt8]? = nil) {
        self.services = services
        self.unverifiedHash = unverifiedHash
    }
}

/// What the cache did that its user may want to say (the CLI's notes, warnings and findings).
public enum GATTDatabaseCacheEvent: Sendable {
    /// The store's entry could not be used: it is ignored.
    case unusable(DatabaseStoreError)
    /// The store could not keep the database: it is used for this connection only.
    case notStored(DatabaseStoreError)
    /// The database cannot be hashed here (libcrypto missing): it is not stored.
    case notHashable(GATTCryptoError)
    /// The peer serves `served`, but the database discovered there hashes to `computed` (§7.3): not stored.
    case hashMismatch(served: [UInt8], computed: [UInt8])
    /// The peer serves §7.3's hash (`computed`) in bluetoothd's octet order: stored under what it serves.
    case hashInBlueZOrder(served: [UInt8], computed: [UInt8])
    /// The peer serves the hash as bluetoothd `versions` compute it, not §7.3's `computed`: stored under it.
    case hashByBlueZRule(served: [UInt8], computed: [UInt8], versions: String)
    /// The peer's declaration of a stored characteristic disagrees (§3.3.1) though it serves the stored hash:
    /// the store's copy was cleared (`removed`) and the database discovered again.
    case declarationMismatch(GATTCharacteristic, found: GATTDeclarationFinding, peerHash: [UInt8], removed: [String])
    /// Service Changed for `range` (§7.1): the database known is forgotten (and the store's copy, `removed`).
    case serviceChanged(ATTHandleRange, removed: [String])
}

/// What the peer has at a stored characteristic's declaration handle.
public enum GATTDeclarationFinding: Sendable, Equatable {
    case declaration(GATTCharacteristicDeclaration)
    /// A value that is no characteristic declaration.
    case notADeclaration([UInt8])
    case attributeError(ATTErrorCode)
}

/// The database of one connection's peer, from `store` when the peer's Database Hash matches the stored copy's,
/// else discovered (and stored). Service Changed indications are watched from `init` on (`GATTClient.onValue`).
public final class GATTDatabaseCache: Sendable {
    public let client: GATTClient
    /// Nil: nothing is loaded or stored (the database is discovered on every connection).
    public let store: (any DatabaseStore)?
    public let target: String
    public let adapter: String?
    let report: @Sendable (GATTDatabaseCacheEvent) -> Void
    /// Guards the database known on this connection (nil: not yet, or forgotten).
    let state = Lock<GATTKnownDatabase?>(nil)
    /// Guards what a Service Changed indication left to rediscover: the database known then and the range it named.
    let serviceChanged = Lock<(stale: [GATTService], range: ATTHandleRange)?>(nil)
    /// Guards whether the peer answered, on this connection, that it serves no Database Hash.
    let servesNoHash = Lock(false)

    public init(client: GATTClient, store: (any DatabaseStore)?, target: String, adapter: String?,
                report: @escaping @Sendable (GATTDatabaseCacheEvent) -> Void = { _ in }) {
        self.client = client
        self.store = store
        self.target = target
        self.adapter = adapter
        self.report = report
        client.onValue { [weak self] n in self?.valueArrived(n) }
    }

    /// The database known on this connection, if any (nothing is sent).
    public var known: GATTKnownDatabase? { state.withLock { $0 } }

    /// Replaces what is known (nil forgets it: the next use finds the database again).
    public func setKnown(_ database: GATTKnownDatabase?) { state.withLock { $0 = database } }

    /// True once the peer answered, on this connection, that it serves no Database Hash.
    public var servesNoDatabaseHash: Bool { servesNoHash.withLock { $0 } }

    /// The database as known on this connection, or found once: after Service Changed the range rediscovered,
    /// else from the store when its copy has the peer's hash, else discovered (and stored under the hash).
    public func discovered() async throws(GATTError) -> GATTKnownDatabase {
        try await client.onLinkLoop { () async throws(GATTError) -> GATTKnownDatabase in
            if let known { return known }
            let (services, fromStore) = try await storedOrDiscovered()
            let found = GATTKnownDatabase(services: services, unverifiedHash: fromStore)
            state.withLock { if $0 == nil { $0 = found } }
            return known ?? found
        }
    }

    /// For a caller that otherwise discovers only what it needs: the database known, or the store's (or
    /// discovered and stored) when the store is on and the peer has a hash; nil otherwise (nothing discovered).
    public func knownOrStored() async throws(GATTError) -> GATTKnownDatabase? {
        try await client.onLinkLoop { () async throws(GATTError) -> GATTKnownDatabase? in
            if let known { return known }
            guard let (services, fromStore) = try await fromStore() else { return nil }
            let found = GATTKnownDatabase(services: services, unverifiedHash: fromStore)
            state.withLock { if $0 == nil { $0 = found } }
            return known ?? found
        }
    }

    /// The database from the store or discovery (§2.5.2, §7.3): with a store, one Read By Type of the Database
    /// Hash; a stored copy with that hash is used as it is, else the database is discovered and stored. `fromStore`
    /// is the peer's hash when the database is the store's, which a hash alone cannot vouch for (`verify`).
    func storedOrDiscovered() async throws(GATTError) -> (services: [GATTService], fromStore: [UInt8]?) {
        if let (stale, range) = serviceChanged.withLock({ c in defer { c = nil }; return c }) {
            return (try await rediscover(range, stale: stale), nil)
        }
        if let found = try await fromStore() { return found }
        return (try await client.discoverDatabase(), nil)
    }

    /// After Service Changed for `range` (§7.1): the services `stale` has outside it kept, those it covers or cuts
    /// discovered again. With the peer's Database Hash the result is checked (and stored) by it, and a database
    /// that does not hash to it is discovered again whole.
    func rediscover(_ range: ATTHandleRange, stale: [GATTService]) async throws(GATTError) -> [GATTService] {
        let cut = stale.filter { $0.startHandle <= range.end && $0.endHandle >= range.start }
        let affected = ATTHandleRange(start: min(range.start, cut.map(\.startHandle).min() ?? range.start),
                                      end: max(range.end, cut.map(\.endHandle).max() ?? range.end))
        let kept = stale.filter { $0.endHandle < affected.start || $0.startHandle > affected.end }
        var services = kept
        for s in try await client.discoverDatabase(in: affected) where !kept.contains(where: { $0.startHandle == s.startHandle }) {
            services.append(s)
        }
        services.sort { $0.startHandle < $1.startHandle }
        guard let peerHash = try await readDatabaseHash() else { return services }
        try await client.readHashedValues(&services)
        guard let computed = computedHash(services), hashIsThePeers(computed, services, peerHash: peerHash) else {
            return try await discoverAndStore(peerHash: peerHash)
        }
        keep(services, peerHash: peerHash)
        return services
    }

    /// With a store and the peer's hash: the stored copy with that hash (`fromStore`: the hash), else discovered
    /// and stored. Nil without a store or a hash (nothing discovered).
    func fromStore() async throws(GATTError) -> (services: [GATTService], fromStore: [UInt8]?)? {
        guard let store, let peerHash = try await readDatabaseHash() else { return nil }
        var stored: GATTCachedDatabase?
        do {
            stored = try store.load(target: target, adapter: adapter)
        } catch {
            report(.unusable(error))
        }
        if let stored, stored.databaseHash == peerHash { return (stored.services, peerHash) }
        return (try await discoverAndStore(peerHash: peerHash), nil)
    }

    /// The store's copy (whatever the peer's hash says; nil when none is usable) and the database discovered now,
    /// stored as `discovered` would and kept for the connection (what changed since it was stored).
    public func storedAndDiscovered() async throws(GATTError) -> (stored: GATTCachedDatabase?, peerHash: [UInt8]?, services: [GATTService]) {
        try await client.onLinkLoop { () async throws(GATTError) -> (stored: GATTCachedDatabase?, peerHash: [UInt8]?, services: [GATTService]) in
            var stored: GATTCachedDatabase?
            do throws(DatabaseStoreError) {
                stored = try store?.load(target: target, adapter: adapter)
            } catch {
                report(.unusable(error))
            }
            let peerHash = try await readDatabaseHash()
            let services = if let peerHash { try await discoverAndStore(peerHash: peerHash) } else { try await client.discoverDatabase() }
            setKnown(GATTKnownDatabase(services: services))
            return (stored, peerHash, services)
        }
    }

    /// Whether `c` may be used as the store gave it: true at once for a database discovered on this connection;
    /// else after one Read Request of its declaration (§3.3.1), since the hash alone does not vouch for a stored
    /// handle (AES-CMAC under a zero key: a look-alike can serve any hash). On a mismatch the store's copy is
    /// cleared, the database discovered again (and stored) and false returned: the caller looks again.
    public func verify(_ c: GATTCharacteristic) async throws(GATTError) -> Bool {
        try await client.onLinkLoop { () async throws(GATTError) -> Bool in
            guard let known, let peerHash = known.unverifiedHash else { return true }
            if known.verified.contains(c.declarationHandle) { return true }
            let found: GATTDeclarationFinding
            do throws(GATTError) {
                let value = try await client.read(handle: c.declarationHandle)
                if let d = GATTCharacteristicDeclaration(value),
                   d.valueHandle == c.valueHandle, d.uuid == c.uuid, d.properties == c.properties.rawValue {
                    _ = state.withLock { $0?.verified.insert(c.declarationHandle) }
                    return true
                }
                found = GATTCharacteristicDeclaration(value).map { .declaration($0) } ?? .notADeclaration(value)
            } catch {
                guard case .attribute(let e) = error else { throw error }
                found = .attributeError(e.code)
            }
            let removed = (try? store?.clear(target: target, adapter: adapter)) ?? []
            report(.declarationMismatch(c, found: found, peerHash: peerHash, removed: removed))
            let services = try await discoverAndStore(peerHash: peerHash)
            setKnown(GATTKnownDatabase(services: services))
            return false
        }
    }

    /// The known database with the user descriptions (0x2901) of `handles` (value handles; nil: every
    /// characteristic) read if not looked for before. An unreadable description (an ATT error) is none.
    public func describing(_ handles: Set<UInt16>?) async throws(GATTError) -> GATTKnownDatabase {
        try await client.onLinkLoop { () async throws(GATTError) -> GATTKnownDatabase in
            var known = try await discovered()
            for c in known.services.flatMap(\.characteristics)
            where !known.described.contains(c.valueHandle) && handles?.contains(c.valueHandle) ?? true {
                known.described.insert(c.valueHandle)
                guard let d = c.descriptors.first(where: { $0.uuid == .characteristicUserDescription }) else { continue }
                do throws(GATTError) {
                    let bytes = try await client.readLong(handle: d.handle)
                    if let text = String(validating: bytes, as: UTF8.self), !text.isEmpty { known.descriptions[c.valueHandle] = text }
                } catch {
                    guard case .attribute = error else { throw error }
                }
            }
            setKnown(known)
            return known
        }
    }

    /// The peer's Database Hash (Read Using Characteristic UUID 0x2B2A, §7.3); nil when it has none, refuses the
    /// read (an ATT error), or its value is not 16 bytes (`servesNoDatabaseHash` then says so).
    public func readDatabaseHash() async throws(GATTError) -> [UInt8]? {
        try await client.onLinkLoop { () async throws(GATTError) -> [UInt8]? in
            do throws(GATTError) {
                guard let value = try await client.readDatabaseHash()?.value, value.count == 16 else { return notedNoHash() }
                return value
            } catch {
                if case .attribute = error { return notedNoHash() }
                throw error
            }
        }
    }

    private func notedNoHash() -> [UInt8]? {
        servesNoHash.withLock { $0 = true }
        return nil
    }

    /// Discovers the whole database with the values the hash covers, and stores it when its hash is the peer's;
    /// another hash is reported (`hashMismatch`) and nothing is stored.
    public func discoverAndStore(peerHash: [UInt8]) async throws(GATTError) -> [GATTService] {
        try await client.onLinkLoop { () async throws(GATTError) -> [GATTService] in
            var services = try await client.discoverDatabase()
            try await client.readHashedValues(&services)
            guard let computed = computedHash(services) else { return services }
            guard hashIsThePeers(computed, services, peerHash: peerHash) else {
                report(.hashMismatch(served: peerHash, computed: computed))
                return services
            }
            keep(services, peerHash: peerHash)
            return services
        }
    }

    /// Whether `peerHash` is the hash of `services`: §7.3's (`computed`), or one bluetoothd serves instead
    /// (reported with both values).
    func hashIsThePeers(_ computed: [UInt8], _ services: [GATTService], peerHash: [UInt8]) -> Bool {
        switch GATTDatabaseHash.order(computed: computed, served: peerHash) {
        case .pts?: return true
        case .bluez?:
            report(.hashInBlueZOrder(served: peerHash, computed: computed))
            return true
        case nil: break
        }
        guard let rule = (try? GATTDatabaseHash.blueZHashes(services: services))??.first(where: { $0.hash == peerHash }) else { return false }
        report(.hashByBlueZRule(served: peerHash, computed: computed, versions: rule.versions))
        return true
    }

    /// The Database Hash of `services`; nil when it cannot be computed (an Extended Properties value unread, or
    /// libcrypto missing: reported).
    func computedHash(_ services: [GATTService]) -> [UInt8]? {
        do {
            return try GATTDatabaseHash.compute(services: services)
        } catch {
            report(.notHashable(error))
            return nil
        }
    }

    /// Stores the database (with a store); a failure is reported, not thrown.
    func keep(_ services: [GATTService], peerHash: [UInt8]) {
        guard let store else { return }
        do {
            try store.store(GATTCachedDatabase(target: target, adapter: adapter, databaseHash: peerHash, services: services))
        } catch {
            report(.notStored(error))
        }
    }
}

// MARK: - robust caching (Part G §2.5.2.1, §7.1, §7.2)

extension GATTDatabaseCache {
    /// True for the peer's Database Out Of Sync (0x12).
    public static func isOutOfSync(_ error: any Error) -> Bool {
        (error as? GATTError)?.attributeError.map { $0.code == .databaseOutOfSync && $0.rejectedBy == .peer } ?? false
    }

    /// The 0x12 error with what was done in its handle's name (an error table prints it).
    public static func outOfSync(_ error: any Error, _ what: String) -> any Error {
        guard case .attribute(var e)? = error as? GATTError else { return error }
        e.handleName = e.handleName.map { "\($0); \(what)" } ?? what
        return GATTError.attribute(e)
    }

    /// Writes Client Supported Features with the robust caching bit (§7.2) when the peer's database has it, so that
    /// after a change the peer answers Database Out Of Sync (0x12) instead of serving moved handles. An ATT error
    /// is no failure (the peer keeps its default). Keeps the bits set before (`GATTClient.writeClientFeatures`).
    public func enableRobustCaching() async throws(GATTError) {
        try await client.onLinkLoop { () async throws(GATTError) -> Void in
            guard let c = try await discovered().services.flatMap(\.characteristics).first(where: { $0.uuid == .clientSupportedFeatures }),
                  c.properties.contains(.write) else { return }
            do throws(GATTError) {
                try await client.writeClientFeatures(.robustCaching, handle: c.valueHandle)
            } catch {
                guard case .attribute = error else { throw error }
            }
        }
    }

    /// After Database Out Of Sync or Service Changed: the peer's Database Hash read again (which makes a
    /// robust-caching server count this client change-aware, §2.5.2.1), the database known forgotten and found
    /// again (the store's under the new hash, or discovered and stored).
    public func resynchronize() async throws(GATTError) {
        try await client.onLinkLoop { () async throws(GATTError) -> Void in
            setKnown(nil)
            if store == nil { _ = try await readDatabaseHash() }
            _ = try await discovered()
        }
    }

    /// `body` on the value handle `locate` finds; after Database Out Of Sync (0x12) the database is resynchronized
    /// and, for a characteristic found by UUID or name (`what`, which names it), located again and `body` retried
    /// once. A raw handle (`what` nil) is not remapped: the error says so. A second 0x12 fails naming what was done.
    public func retryingOutOfSync<T>(remapping what: String?, locate: () async throws -> UInt16,
                                     _ body: (UInt16) async throws -> T) async throws -> T {
        let handle = try await locate()
        do {
            return try await body(handle)
        } catch where Self.isOutOfSync(error) {
            try await resynchronize()
            guard let what else {
                throw Self.outOfSync(error, "the database changed: its Database Hash was re-read and the database rediscovered; "
                                     + "\(ATTHex.handle(handle)) was given as a raw handle and is not remapped")
            }
            let again = try await locate()
            do {
                return try await body(again)
            } catch where Self.isOutOfSync(error) {
                throw Self.outOfSync(error, "\(what): still out of sync after re-reading the Database Hash, "
                                     + "rediscovering the database and retrying once at \(ATTHex.handle(again))")
            }
        }
    }

    /// `body` retried once after Database Out Of Sync (0x12) and a resynchronization (a read by UUID).
    public func retryingOutOfSync<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch where Self.isOutOfSync(error) {
            try await resynchronize()
            do {
                return try await body()
            } catch where Self.isOutOfSync(error) {
                throw Self.outOfSync(error, "still out of sync after re-reading the Database Hash, rediscovering the database and retrying once")
            }
        }
    }

    /// A value the peer pushed (the link's event loop): an indication of the known database's Service Changed
    /// characteristic (§7.1) forgets the database and clears the store's copy; the next use rediscovers the range.
    func valueArrived(_ n: GATTNotification) {
        // The Service Changed value is two handles, start and end (§7.1).
        guard n.kind == .indication, n.value.count == 4, let known else { return }
        guard known.services.flatMap(\.characteristics).contains(where: { $0.uuid == .serviceChanged && $0.valueHandle == n.handle }) else { return }
        let start = n.value.littleEndianUInt16(at: 0), end = n.value.littleEndianUInt16(at: 2)
        // What the next use rediscovers: the range (with any earlier one not yet rediscovered).
        serviceChanged.withLock { c in
            let r = c.map { ATTHandleRange(start: min($0.range.start, start), end: max($0.range.end, end)) } ?? ATTHandleRange(start: start, end: end)
            c = (c?.stale ?? known.services, r)
        }
        setKnown(nil)
        let removed = (try? store?.clear(target: target, adapter: adapter)) ?? []
        report(.serviceChanged(ATTHandleRange(start: start, end: end), removed: removed))
    }
}
