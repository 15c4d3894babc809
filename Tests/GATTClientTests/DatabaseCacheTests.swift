// GATTDatabaseCache against GATTServer's host over a socket pair, with an in-memory DatabaseStore: the Database
// Hash check (Core Spec 5.4 Vol 3 Part G §7.3), Database Out Of Sync (0x12, Part F §3.4.1.1; Part G §2.5.2.1)
// retried once, and Service Changed (§7.1) taken from the client's own indication path.
import ATTStack
import GATTServer
import GATTVocabulary
import LinkCore
import LinuxBluetooth
import XCTest
@testable import GATTClient

/// A DatabaseStore in memory that counts what it is asked.
final class MemoryStore: DatabaseStore {
    struct Key: Hashable { var target: String; var adapter: String? }
    /// Guards the stored databases by key.
    let entries = Lock<[Key: GATTCachedDatabase]>([:])
    /// Guards how many loads, stores and clears were asked.
    let counts = Lock<(loads: Int, stores: Int, clears: Int)>((0, 0, 0))

    func load(target: String, adapter: String?) throws(DatabaseStoreError) -> GATTCachedDatabase? {
        counts.withLock { $0.loads += 1 }
        return entries.withLock { $0[Key(target: target, adapter: adapter)] }
    }

    func store(_ database: GATTCachedDatabase) throws(DatabaseStoreError) {
        counts.withLock { $0.stores += 1 }
        entries.withLock { $0[Key(target: database.target, adapter: database.adapter)] = database }
    }

    func clear(target: String, adapter: String?) throws(DatabaseStoreError) -> [String] {
        counts.withLock { $0.clears += 1 }
        return entries.withLock { $0.removeValue(forKey: Key(target: target, adapter: adapter)) } == nil ? [] : ["memory:\(target)"]
    }

    func stored(_ target: String) -> GATTCachedDatabase? { entries.withLock { $0[Key(target: target, adapter: nil)] } }
}

/// What a cache reported, and what the peer was asked (by opcode).
final class CacheLog: Sendable {
    /// Guards the events reported.
    let events = Lock<[GATTDatabaseCacheEvent]>([])
    /// Guards the requests the peer received, in order.
    let received = Lock<[[UInt8]]>([])
    var report: @Sendable (GATTDatabaseCacheEvent) -> Void { { [self] e in events.withLock { $0.append(e) } } }
    var requests: [UInt8] { received.withLock { $0.compactMap(\.first) } }
    func count(_ op: ATTOpcode) -> Int { requests.filter { $0 == op.rawValue }.count }
    /// Read By Type Requests of the Database Hash (0x2B2A).
    var hashReads: Int { received.withLock { $0.filter { $0.first == 0x08 && $0.suffix(2) == [0x2A, 0x2B] }.count } }
}

final class DatabaseCacheTests: XCTestCase {
    static let target = "unix:/tmp/cache-test.sock"

    /// Generic Access, the GATT service with Service Changed, Client Supported Features and the Database Hash
    /// (stored in PTS order, §7.3), Battery; with `heartRate` a Heart Rate service after them.
    static func database(heartRate: Bool = false) -> AttributeDatabase {
        var db = AttributeDatabase { db in
            db.service(.genericAccess)
            db.characteristic(.deviceName, [.read], value: Array("cache peer".utf8), name: "deviceName")
            db.service(.genericAttribute)
            db.characteristic(.serviceChanged, [.indicate], value: [0x01, 0x00, 0xFF, 0xFF], name: "serviceChanged")
            db.characteristic(.clientSupportedFeatures, [.read, .write], value: [0x00], name: "clientSupportedFeatures")
            db.characteristic(.databaseHash, [.read], name: "databaseHash")
            db.service(.batteryService)
            db.characteristic(.batteryLevel, [.read], value: [87], name: "battery")
            if heartRate {
                db.service(.heartRate)
                db.characteristic(.heartRateMeasurement, [.read], value: [0, 60], name: "heartRateMeasurement")
            }
        }
        db.setValue(GATTHashOrder.pts.served(try! db.databaseHash()), at: db.handle("databaseHash")!)
        return db
    }

    /// A client over a socket pair to a host of `database`, counting its requests in `log`; the host's `read` hook.
    func connected(_ database: AttributeDatabase, log: CacheLog,
                   read: @escaping @Sendable (AttributeRead, ATTServerConnection) -> ReadOutcome = { _, _ in .stored })
        throws -> (host: GATTServerHost, transport: ATTBearer)
    {
        var hooks = GATTServerHost.Hooks()
        hooks.inbound = { pdu, _ in
            log.received.withLock { $0.append(pdu) }
            return .serve
        }
        hooks.read = read
        let host = GATTServerHost(database: database, hooks: hooks)
        let (a, b) = try ATTBearer.pair()
        _ = host.attach(b)
        return (host, a)
    }

    static func makeCache(_ transport: ATTBearer, store: MemoryStore, log: CacheLog) async throws -> GATTDatabaseCache {
        let client = try await GATTClient.connect(transport: transport)
        return GATTDatabaseCache(client: client, store: store, target: Self.target, adapter: nil, report: log.report)
    }

    /// A stored copy with the peer's hash is used after one Read By Type of 0x2B2A, with no discovery; a
    /// characteristic from it is used once the peer's declaration confirms it (one Read Request, §3.3.1).
    func testAStoredCopyWithThePeersHashIsUsedWithoutDiscovery() async throws {
        let store = MemoryStore(), database = Self.database()
        let first = CacheLog()
        let (host1, t1) = try connected(database, log: first)
        let found = try await within { try await DatabaseCacheTests.makeCache(t1, store: store, log: first).discovered() }
        withExtendedLifetime(host1) {}
        XCTAssertNil(found.unverifiedHash, "discovered on this connection")
        XCTAssertEqual(store.stored(Self.target)?.databaseHash, GATTHashOrder.pts.served(try database.databaseHash()))
        XCTAssertEqual(store.stored(Self.target)?.services.map(\.uuid), [.genericAccess, .genericAttribute, .batteryService])
        XCTAssertGreaterThan(first.count(.readByGroupTypeRequest), 0)

        let second = CacheLog()
        let (host2, t2) = try connected(database, log: second)
        defer { withExtendedLifetime(host2) {} }
        let cache = try await within { try await DatabaseCacheTests.makeCache(t2, store: store, log: second) }
        let cached = try await within { try await cache.discovered() }
        XCTAssertEqual(cached.services, store.stored(Self.target)?.services)
        XCTAssertEqual(cached.unverifiedHash, store.stored(Self.target)?.databaseHash)
        XCTAssertEqual(second.requests, [ATTOpcode.readByTypeRequest.rawValue], "the hash only")
        XCTAssertEqual(second.hashReads, 1)
        let battery = try XCTUnwrap(cached.services.flatMap(\.characteristics).first { $0.uuid == .batteryLevel })
        let verified = try await within { try await cache.verify(battery) }
        XCTAssertTrue(verified)
        XCTAssertEqual(second.count(.readRequest), 1)
        _ = try await within { try await cache.verify(battery) }
        XCTAssertEqual(second.count(.readRequest), 1, "a confirmed declaration is read once")
        XCTAssertEqual(store.counts.withLock { $0.stores }, 1)
    }

    /// A stored copy under another hash is not used: the database is discovered, and stored under the peer's hash.
    func testAStoredCopyUnderAnotherHashIsDiscoveredAgainAndReplaced() async throws {
        let store = MemoryStore(), old = Self.database(heartRate: true), now = Self.database()
        let log = CacheLog()
        let (host1, t1) = try connected(old, log: log)
        _ = try await within { try await DatabaseCacheTests.makeCache(t1, store: store, log: log).discovered() }
        withExtendedLifetime(host1) {}
        let oldHash = try XCTUnwrap(store.stored(Self.target)?.databaseHash)

        let second = CacheLog()
        let (host2, t2) = try connected(now, log: second)
        defer { withExtendedLifetime(host2) {} }
        let found = try await within { try await DatabaseCacheTests.makeCache(t2, store: store, log: second).discovered() }
        XCTAssertNil(found.unverifiedHash)
        XCTAssertEqual(found.services.map(\.uuid), [.genericAccess, .genericAttribute, .batteryService])
        XCTAssertGreaterThan(second.count(.readByGroupTypeRequest), 0, "discovered again")
        let newHash = try XCTUnwrap(store.stored(Self.target)?.databaseHash)
        XCTAssertNotEqual(newHash, oldHash)
        XCTAssertEqual(newHash, GATTHashOrder.pts.served(try now.databaseHash()))
        XCTAssertEqual(store.stored(Self.target)?.services, found.services)
    }

    /// A stored copy under the peer's hash whose characteristic the peer's declaration contradicts (a look-alike's
    /// hash, §3.3.1): `verify` is false, the store's copy cleared and the database discovered and stored again.
    func testAStoredCharacteristicThePeersDeclarationContradictsIsDiscoveredAgain() async throws {
        let store = MemoryStore(), log = CacheLog(), database = Self.database()
        let peerHash = GATTHashOrder.pts.served(try database.databaseHash())
        let (host, t) = try connected(database, log: log)
        defer { withExtendedLifetime(host) {} }
        let cache = try await within { try await DatabaseCacheTests.makeCache(t, store: store, log: log) }
        var real = try await within { try await cache.client.discoverDatabase() }
        let b = try XCTUnwrap(real.firstIndex { $0.uuid == .batteryService })
        real[b].characteristics[0].uuid = .heartRateMeasurement
        try store.store(GATTCachedDatabase(target: Self.target, adapter: nil, databaseHash: peerHash, services: real))
        let forged = try await within { try await cache.discovered() }
        XCTAssertEqual(forged.unverifiedHash, peerHash)
        let wrong = try XCTUnwrap(forged.services.flatMap(\.characteristics).first { $0.uuid == .heartRateMeasurement })
        let verified = try await within { try await cache.verify(wrong) }
        XCTAssertFalse(verified)
        let findings = log.events.withLock { $0 }.compactMap { e -> (GATTDeclarationFinding, [String])? in
            if case .declarationMismatch(let c, let found, let hash, let removed) = e, c == wrong, hash == peerHash { return (found, removed) }
            return nil
        }
        XCTAssertEqual(findings.count, 1)
        guard case .declaration(let d)? = findings.first?.0 else { return XCTFail("\(findings)") }
        XCTAssertEqual(d.uuid, .batteryLevel)
        XCTAssertEqual(findings.first?.1, ["memory:\(Self.target)"])
        XCTAssertNil(cache.known?.unverifiedHash, "discovered again")
        XCTAssertEqual(cache.known?.services.flatMap(\.characteristics).map(\.uuid).contains(.batteryLevel), true)
        XCTAssertEqual(store.stored(Self.target)?.services.flatMap(\.characteristics).map(\.uuid).contains(.heartRateMeasurement), false)
    }

    /// Database Out Of Sync (0x12) on a read: the hash is read again, the characteristic located again and the
    /// read retried once; a second 0x12 fails naming what was done; a raw handle is not remapped.
    func testDatabaseOutOfSyncIsRetriedOnceAfterResynchronizing() async throws {
        let store = MemoryStore(), log = CacheLog()
        let refusals = Lock(1)
        let (host, t) = try connected(Self.database(), log: log) { r, _ in
            guard r.attribute.name == "battery", r.opcode == .readRequest else { return .stored }
            return refusals.withLock { n in
                defer { n -= 1 }
                return n > 0 ? .error(.databaseOutOfSync) : .stored
            }
        }
        defer { withExtendedLifetime(host) {} }
        let cache = try await within { try await DatabaseCacheTests.makeCache(t, store: store, log: log) }
        let locate = { @Sendable () async throws -> UInt16 in
            try await cache.discovered().services.flatMap(\.characteristics).first { $0.uuid == .batteryLevel }!.valueHandle
        }
        let value = try await within {
            try await cache.retryingOutOfSync(remapping: "battery", locate: locate) { h in try await cache.client.read(handle: h) }
        }
        XCTAssertEqual(value, [87])
        XCTAssertEqual(log.hashReads, 2, "the Database Hash read again after 0x12 (§2.5.2.1)")

        refusals.withLock { $0 = 2 }
        do {
            _ = try await within {
                try await cache.retryingOutOfSync(remapping: "battery", locate: locate) { h in try await cache.client.read(handle: h) }
            }
            XCTFail("expected Database Out Of Sync")
        } catch {
            XCTAssertTrue(GATTDatabaseCache.isOutOfSync(error), "\(error)")
            XCTAssertTrue((error as? GATTError)?.attributeError?.handleName?.contains("battery: still out of sync after re-reading the Database Hash") == true, "\(error)")
        }

        refusals.withLock { $0 = 1 }
        do {
            _ = try await within {
                try await cache.retryingOutOfSync(remapping: nil, locate: locate) { h in try await cache.client.read(handle: h) }
            }
            XCTFail("expected Database Out Of Sync")
        } catch {
            XCTAssertTrue((error as? GATTError)?.attributeError?.handleName?.contains("was given as a raw handle and is not remapped") == true, "\(error)")
        }
    }

    /// Robust caching: Client Supported Features written with bit 0 (§7.2) once the database is known.
    func testRobustCachingWritesClientSupportedFeatures() async throws {
        let store = MemoryStore(), log = CacheLog()
        let (host, t) = try connected(Self.database(), log: log)
        defer { withExtendedLifetime(host) {} }
        let cache = try await within { try await DatabaseCacheTests.makeCache(t, store: store, log: log) }
        try await within { try await cache.enableRobustCaching() }
        XCTAssertEqual(cache.client.writtenClientFeatures, .robustCaching)
        XCTAssertEqual(host.database.attribute(host.database.handle("clientSupportedFeatures")!)?.value, [0x01])
    }

    /// A Service Changed indication (on the client's own path, nobody subscribed) forgets the known database and
    /// the store's copy; the next use rediscovers the range it names and stores the result under the new hash.
    func testServiceChangedForgetsTheDatabaseAndRediscoversItsRange() async throws {
        let store = MemoryStore(), log = CacheLog()
        let (host, t) = try connected(Self.database(), log: log)
        defer { withExtendedLifetime(host) {} }
        let cache = try await within { try await DatabaseCacheTests.makeCache(t, store: store, log: log) }
        let before = try await within { try await cache.discovered() }
        XCTAssertNotNil(store.stored(Self.target))

        let changed = Self.database(heartRate: true)
        let heartRate = try XCTUnwrap(changed.attributes.first { $0.type == .primaryService && $0.value == [0x0D, 0x18] }?.handle)
        let end = UInt16(changed.attributes.count)
        let serviceChanged = try XCTUnwrap(changed.handle("serviceChanged"))
        host.withContext { $0.database = changed }
        host.withContext { ctx in ctx.clients.first }?.indicate(handle: serviceChanged,
                                                                 value: [UInt8(heartRate & 0xFF), UInt8(heartRate >> 8), UInt8(end & 0xFF), UInt8(end >> 8)])
        try await within {
            while cache.known != nil { try await Task.sleep(for: .milliseconds(5)) }
        }
        XCTAssertNil(store.stored(Self.target), "the store's copy is cleared")
        let reported = log.events.withLock { $0 }.compactMap { e -> (ATTHandleRange, [String])? in
            if case .serviceChanged(let r, let removed) = e { return (r, removed) }
            return nil
        }
        XCTAssertEqual(reported.map(\.0), [ATTHandleRange(start: heartRate, end: end)])
        XCTAssertEqual(reported.map(\.1), [["memory:\(Self.target)"]])

        let after = try await within { try await cache.discovered() }
        XCTAssertEqual(after.services.map(\.uuid), before.services.map(\.uuid) + [.heartRate])
        XCTAssertEqual(store.stored(Self.target)?.databaseHash, GATTHashOrder.pts.served(try changed.databaseHash()))
    }
}
