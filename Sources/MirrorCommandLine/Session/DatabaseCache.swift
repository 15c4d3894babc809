// The GATT cache on disk: one readable JSON file per adapter and peer ($XDG_CACHE_HOME/mirror, else ~/.cache/mirror),
// holding the database discovered there and its Database Hash (Core Spec 5.4 Vol 3 Part G §2.5.2, §7.3). A file
// is trusted only when it parses whole, has this format version, and its services hash to the hash it stores; and
// a cached characteristic is used by name or UUID only after the peer's declaration of it is read back and agrees.
import ATTStack
import FoundationEssentials
import GATTClient
import JSON
import HostEnvironment
import LinuxBluetooth
import LinkCore
import GATTVocabulary

/// One peer's cached database.
struct CachedDatabase: Sendable, Equatable {
    /// The file format; a file with another one is ignored (with a warning), never read.
    static let formatVersion = 1

    /// The TARGET as given ("unix:/tmp/mirror-sim.sock", "C0:11:22:33:44:55").
    var target: String
    /// The adapter it was reached through; nil: the kernel's choice.
    var adapter: String?
    /// The peer's Database Hash when the database was discovered (16 bytes, as read).
    var databaseHash: [UInt8]
    var services: [GATTService]

    var json: JSONValue {
        .object([
            ("format", .int(Self.formatVersion)),
            ("target", .string(target)),
            ("adapter", adapter.map { .string($0) } ?? .null),
            ("databaseHash", .string(ATTHex.string(databaseHash))),
            ("services", .array(services.map(Self.json(service:)))),
        ])
    }

    static func json(service s: GATTService) -> JSONValue {
        .object([
            ("uuid", .string(s.uuid.description)), ("start", .int(Int(s.startHandle))), ("end", .int(Int(s.endHandle))),
            ("primary", .bool(s.isPrimary)),
            ("includes", .array(s.includedServices.map { i in
                .object([("handle", .int(Int(i.declarationHandle))), ("start", .int(Int(i.startHandle))),
                         ("end", .int(Int(i.endHandle))), ("uuid", .string(i.uuid.description))])
            })),
            ("characteristics", .array(s.characteristics.map { c in
                .object([
                    ("uuid", .string(c.uuid.description)), ("handle", .int(Int(c.declarationHandle))),
                    ("valueHandle", .int(Int(c.valueHandle))), ("end", .int(Int(c.endHandle))),
                    ("properties", .int(Int(c.properties.rawValue))),
                    ("descriptors", .array(c.descriptors.map { d in
                        .object([("uuid", .string(d.uuid.description)), ("handle", .int(Int(d.handle)))]
                                + (d.value.map { [("value", JSONValue.string(ATTHex.string($0)))] } ?? []))
                    })),
                ])
            })),
        ])
    }

    init(target: String, adapter: String?, databaseHash: [UInt8], services: [GATTService]) {
        self.target = target
        self.adapter = adapter
        self.databaseHash = databaseHash
        self.services = services
    }

    /// Reads a file's JSON; throws what is wrong with it, in words.
    init(json: JSONValue) throws(DatabaseCacheProblem) {
        guard json.fields != nil else { throw DatabaseCacheProblem("not a JSON object") }
        guard let format = json["format"]?.integer else { throw DatabaseCacheProblem("no \"format\"") }
        guard format == Self.formatVersion else {
            throw DatabaseCacheProblem("format \(format), this mirror reads format \(Self.formatVersion)")
        }
        target = try Self.field(json, "target", \.string)
        adapter = json["adapter"]?.string
        databaseHash = try Self.bytes(try Self.field(json, "databaseHash", \.string), "databaseHash")
        guard databaseHash.count == 16 else { throw DatabaseCacheProblem("databaseHash is not 16 bytes") }
        services = try Self.field(json, "services", \.items).map { (s: JSONValue) throws(DatabaseCacheProblem) in
            var service = GATTService(uuid: try Self.uuid(s), startHandle: try Self.handle(s, "start"),
                                      endHandle: try Self.handle(s, "end"),
                                      isPrimary: try Self.field(s, "primary") { v in if case .bool(let b) = v { b } else { nil } })
            service.includedServices = try Self.field(s, "includes", \.items).map { (i: JSONValue) throws(DatabaseCacheProblem) in
                GATTIncludedService(declarationHandle: try Self.handle(i, "handle"), startHandle: try Self.handle(i, "start"),
                                    endHandle: try Self.handle(i, "end"), uuid: try Self.uuid(i))
            }
            service.characteristics = try Self.field(s, "characteristics", \.items).map { (c: JSONValue) throws(DatabaseCacheProblem) in
                let properties = try Self.field(c, "properties", \.integer)
                guard let raw = UInt8(exactly: properties) else { throw DatabaseCacheProblem("properties \(properties) is not a byte") }
                return GATTCharacteristic(
                    uuid: try Self.uuid(c), declarationHandle: try Self.handle(c, "handle"),
                    valueHandle: try Self.handle(c, "valueHandle"), properties: GATTCharacteristicProperties(rawValue: raw),
                    endHandle: try Self.handle(c, "end"),
                    descriptors: try Self.field(c, "descriptors", \.items).map { (d: JSONValue) throws(DatabaseCacheProblem) in
                        GATTDescriptor(handle: try Self.handle(d, "handle"), uuid: try Self.uuid(d),
                                       value: try d["value"]?.string.map { (t: String) throws(DatabaseCacheProblem) in try Self.bytes(t, "value") })
                    })
            }
            return service
        }
    }

    private static func field<T>(_ json: JSONValue, _ key: String, _ get: (JSONValue) -> T?) throws(DatabaseCacheProblem) -> T {
        guard let v = json[key], let t = get(v) else { throw DatabaseCacheProblem("no valid \"\(key)\"") }
        return t
    }

    private static func handle(_ json: JSONValue, _ key: String) throws(DatabaseCacheProblem) -> UInt16 {
        let n = try field(json, key, \.integer)
        guard let h = UInt16(exactly: n), h > 0 else { throw DatabaseCacheProblem("\"\(key)\" \(n) is not a handle") }
        return h
    }

    private static func uuid(_ json: JSONValue) throws(DatabaseCacheProblem) -> BluetoothUUID {
        let text = try field(json, "uuid", \.string)
        guard let u = BluetoothUUID(string: text) else { throw DatabaseCacheProblem("\"\(text)\" is not a UUID") }
        return u
    }

    private static func bytes(_ text: String, _ key: String) throws(DatabaseCacheProblem) -> [UInt8] {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { throw DatabaseCacheProblem("\"\(key)\" is not hex") }
        var out: [UInt8] = []
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let b = UInt8(String(decoding: digits[i..<i + 2], as: UTF8.self), radix: 16) else {
                throw DatabaseCacheProblem("\"\(key)\" is not hex")
            }
            out.append(b)
        }
        return out
    }
}

/// What is wrong with a cache file (it is then ignored with a warning).
struct DatabaseCacheProblem: Error, Sendable, Equatable, CustomStringConvertible {
    var problem: String
    init(_ problem: String) { self.problem = problem }
    var description: String { problem }
}

/// The cache directory and its files.
struct DatabaseCache: Sendable {
    /// $XDG_CACHE_HOME/mirror or ~/.cache/mirror.
    var directory: String

    /// The default directory; nil without XDG_CACHE_HOME and HOME.
    static func standard() -> DatabaseCache? { XDGDirectory.cache.mirrorDirectory().map { DatabaseCache(directory: $0) } }

    /// "gatt-hci0-C0:11:22:33:44:55.json", "gatt-default-unix:%2Ftmp%2Fmirror-sim.sock.json": the adapter (or
    /// "default") and the TARGET, with "%" and "/" escaped so that a path stays one file name.
    static func fileName(target: String, adapter: String?) -> String {
        let key = target.replacing("%", with: "%25").replacing("/", with: "%2F")
        return "gatt-\(adapter ?? "default")-\(key).json"
    }

    func path(target: String, adapter: String?) -> String { directory + "/" + Self.fileName(target: target, adapter: adapter) }

    /// The file for `target`: its database when it is there and sound; else nil, with why when it is there but
    /// not usable (corrupted, another format, its services not hashing to its hash).
    func load(target: String, adapter: String?) -> (database: CachedDatabase?, problem: String?) {
        let file = path(target: target, adapter: adapter)
        guard let data = FileManager.default.contents(atPath: file) else { return (nil, nil) }
        switch Self.read(data) {
        case .success(let db) where db.target == target && db.adapter == adapter: return (db, nil)
        case .success(let db): return (nil, "ignoring the GATT cache \(file): it is for \(db.target) on \(db.adapter ?? "the default adapter")")
        case .failure(let p): return (nil, "ignoring the GATT cache \(file): \(p)")
        }
    }

    /// A file's bytes as a database, checked: JSON, format, fields, and the services hashing to the stored hash.
    static func read(_ data: Data) -> Result<CachedDatabase, DatabaseCacheProblem> {
        let db: CachedDatabase
        do {
            let json = try parseJSON(bytes: Array(data))
            db = try CachedDatabase(json: json)
        } catch let e as JSONParseError {
            return .failure(DatabaseCacheProblem("not valid JSON (\(e))"))
        } catch let e as DatabaseCacheProblem {
            return .failure(e)
        } catch {
            return .failure(DatabaseCacheProblem("\(error)"))
        }
        // The file's services hash to its databaseHash by §7.3 (in either octet order) or, for a BlueZ peer, by
        // bluetoothd's rule.
        let spec = (try? GATTDatabaseHash.compute(services: db.services)) ?? nil
        let bluez = (try? GATTDatabaseHash.blueZHashes(services: db.services)) ?? nil
        let specMatch = spec.map { GATTDatabaseHash.order(computed: $0, served: db.databaseHash) != nil } ?? false
        guard specMatch || bluez?.contains(where: { $0.hash == db.databaseHash }) == true else {
            return .failure(DatabaseCacheProblem("its services do not hash to its databaseHash \(ATTHex.string(db.databaseHash))"))
        }
        return .success(db)
    }

    /// Writes the file (a temporary file renamed over it, so a reader never sees half of one).
    /// Why a file operation failed, as a person reads it: "EROFS (Read-only file system)" rather than
    /// FoundationEssentials' CocoaError with its user info.
    static func reason(_ error: any Error) -> String {
        if case .system(let e)? = error as? PrivateDirectoryError { return "\(e.errno.name) (\(e.errno.meaning))" }
        if let e = error as? CocoaError, let posix = e.underlying as? POSIXError {
            let code = Errno(posix.code.rawValue)
            return "\(code.name) (\(code.meaning))"
        }
        return "\(error)"
    }

    func store(_ db: CachedDatabase) throws {
        try XDGDirectory.preparePrivateDirectory(directory)  // 0700, tightened if looser; another user's is refused
        let file = path(target: db.target, adapter: db.adapter)
        try Data((db.json.pretty + "\n").utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
    }

    /// Every cache file, by path, with its database or why it is not usable.
    func entries() -> [(path: String, entry: Result<CachedDatabase, DatabaseCacheProblem>)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("gatt-") && $0.hasSuffix(".json") }.sorted().map { name in
            let file = directory + "/" + name
            guard let data = FileManager.default.contents(atPath: file) else {
                return (file, .failure(DatabaseCacheProblem("unreadable")))
            }
            return (file, Self.read(data))
        }
    }

    /// Removes the file of `target` (nil: every cache file); returns the paths removed.
    func clear(target: String?, adapter: String?) throws -> [String] {
        let files = target.map { [path(target: $0, adapter: adapter)] } ?? entries().map(\.path)
        var removed: [String] = []
        for f in files where FileManager.default.fileExists(atPath: f) {
            try FileManager.default.removeItem(atPath: f)
            removed.append(f)
        }
        return removed
    }
}

extension Session {
    /// The database from the cache or discovery (Core Spec 5.4 Vol 3 Part G §2.5.2, §7.3): with the cache, one Read By
    /// Type of the Database Hash (0x2B2A); a cached copy with that hash is used as it is; otherwise the database
    /// is discovered and stored under the hash. A peer without a hash, or --no-cache: discovered, for this
    /// connection only.
    /// `fromFile` is the peer's hash when the database is the cache file's, which a hash alone cannot vouch for
    /// (`verifiedFromCache` checks each characteristic on its first use by name or UUID).
    func cachedOrDiscovered() async throws(GATTError) -> (services: [GATTService], fromFile: [UInt8]?) {
        if let (stale, range) = serviceChanged.withLock({ c in defer { c = nil }; return c }) {
            return (try await rediscover(range, stale: stale), nil)
        }
        if let found = try await fromCache() { return found }
        return (try await client.discoverDatabase(), nil)
    }

    /// After Service Changed for `range` (Part G §7.1): the services `stale` has outside it kept, those it covers
    /// or cuts discovered again. With the peer's Database Hash the result is checked (and stored) by it, and a
    /// database that does not hash to it is discovered again whole.
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
        store(services, peerHash: peerHash)
        return services
    }

    /// The database by the cache's rule when the cache is on and the peer has a Database Hash: the cached copy
    /// with that hash (`fromFile`: that hash), else discovered and stored. Nil otherwise (nothing discovered).
    func fromCache() async throws(GATTError) -> (services: [GATTService], fromFile: [UInt8]?)? {
        guard let cache, let peerHash = try await readDatabaseHash() else { return nil }
        let (cached, problem) = cache.load(target: cacheTarget, adapter: cacheAdapter)
        if let problem { warn(problem) }
        if let cached, cached.databaseHash == peerHash { return (cached.services, peerHash) }
        return (try await discoverAndStore(peerHash: peerHash), nil)
    }

    /// `entry` when the peer's characteristic declaration at its cached declaration handle says the same value
    /// handle, UUID and properties (one Read Request, Part G §3.3.1); the Database Hash alone does not vouch for a
    /// cached handle (AES-CMAC under a zero key: a look-alike can serve any hash). On a mismatch the cache file
    /// is removed, the finding said with both, the database discovered again, and nil returned (resolve again).
    func verifiedFromCache(_ entry: CharacteristicCatalog.Entry) async throws(GATTError) -> CharacteristicCatalog.Entry? {
        guard let known = discoveredNames.withLock({ $0 }), let peerHash = known.unverifiedHash else { return entry }
        let c = entry.characteristic
        if known.verified.contains(c.declarationHandle) { return entry }
        let found: String
        do {
            let value = try await client.read(handle: c.declarationHandle)
            if let d = GATTCharacteristicDeclaration(value),
               d.valueHandle == c.valueHandle, d.uuid == c.uuid, d.properties == c.properties.rawValue {
                _ = discoveredNames.withLock { $0?.verified.insert(c.declarationHandle) }
                return entry
            }
            found = GATTCharacteristicDeclaration(value).map {
                "value handle \(ATTHex.handle($0.valueHandle)), UUID \($0.uuid), properties 0x\(ATTHex.string([$0.properties]))"
            } ?? "[\(ATTHex.string(value))], not a characteristic declaration"
        } catch {
            guard case .attribute(let e) = error else { throw error }
            found = "ATT error 0x\(ATTHex.string([e.code.rawValue]))"
        }
        let removed = (try? cache?.clear(target: cacheTarget, adapter: cacheAdapter)) ?? []
        warn("finding: the GATT cache of \(cacheTarget) says the characteristic declared at \(ATTHex.handle(c.declarationHandle)) has value handle "
             + "\(ATTHex.handle(c.valueHandle)), UUID \(c.uuid), properties 0x\(ATTHex.string([c.properties.rawValue])); the peer's declaration there gives "
             + TerminalText.escaped(found) + " (Core Spec Vol 3 Part G §3.3.1), though it serves the cached Database Hash \(ATTHex.string(peerHash)): "
             + "the cached copy" + (removed.isEmpty ? "" : " (\(removed.joined(separator: ", ")))") + " is discarded and the database discovered again")
        let services = try await discoverAndStore(peerHash: peerHash)
        discoveredNames.withLock { $0 = DiscoveredNames(services: services) }
        return nil
    }

    /// For the mirror's procedures (scan, wifi), which otherwise discover only the mirror service: the database
    /// known on this connection or by `fromCache`, kept for the connection; nil when neither has it.
    /// The profile's characteristics in it are verified first, as a name is (`verifiedMirrorCharacteristics`).
    func cachedDatabase() async throws(GATTError) -> [GATTService]? {
        if let known = discoveredNames.withLock({ $0 }) { return try await verifiedMirrorCharacteristics(known.services) }
        guard let (services, fromFile) = try await fromCache() else { return nil }
        let state = DiscoveredNames(services: services, unverifiedHash: fromFile)
        discoveredNames.withLock { if $0 == nil { $0 = state } }
        return try await verifiedMirrorCharacteristics(discoveredNames.withLock { $0 }?.services ?? services)
    }

    /// The mirror procedures find the profile's characteristics in `services` by UUID and write to them: each one
    /// the mirror service has is checked against the peer's declaration (`verifiedFromCache`; nothing is sent for
    /// a database discovered on this connection). A mismatch rediscovered the database: that one is returned.
    func verifiedMirrorCharacteristics(_ services: [GATTService]) async throws(GATTError) -> [GATTService] {
        let named = services.filter { $0.isPrimary && $0.uuid == profile.service }.flatMap(\.characteristics)
            .filter { profile.characteristicName($0.uuid) != nil }
        for c in named {
            let entry = CharacteristicCatalog.Entry(characteristic: c, profileName: profile.characteristicName(c.uuid))
            if try await verifiedFromCache(entry) == nil { return discoveredNames.withLock { $0 }?.services ?? [] }
        }
        return services
    }

    /// The peer's Database Hash (Read Using Characteristic UUID 0x2B2A, Part G §7.3); nil when it has none or
    /// refuses the read (an ATT error), or its value is not 16 bytes.
    func readDatabaseHash() async throws(GATTError) -> [UInt8]? {
        do {
            guard let value = try await client.readDatabaseHash()?.value, value.count == 16 else { return notedNoHash() }
            return value
        } catch {
            if case .attribute = error { return notedNoHash() }
            throw error
        }
    }

    /// Records that the peer serves no Database Hash (for `gatt`'s note): nil.
    private func notedNoHash() -> [UInt8]? {
        servesNoHash.withLock { $0 = true }
        return nil
    }

    /// The note `gatt` prints when the cache is on and the peer serves no Database Hash; nil otherwise.
    var noHashNote: String? {
        guard cache != nil, servesNoHash.current else { return nil }
        return "note: \(cacheTarget) serves no Database Hash (0x2B2A, Core Spec Vol 3 Part G §7.3): its database is discovered "
            + "on every connection and not cached"
    }

    /// Discovers the whole database with the values the hash covers, and stores it when the hash of what was
    /// discovered is the peer's; a different one is a finding (the peer's database or its hash is wrong), with
    /// both values, and nothing is stored.
    func discoverAndStore(peerHash: [UInt8]) async throws(GATTError) -> [GATTService] {
        var services = try await client.discoverDatabase()
        try await client.readHashedValues(&services)
        guard let computed = computedHash(services) else { return services }
        guard hashIsThePeers(computed, services, peerHash: peerHash) else {
            warn("finding: \(cacheTarget) serves the Database Hash \(ATTHex.string(peerHash)), but the database discovered there "
                 + "hashes to \(ATTHex.string(computed)) (Core Spec Vol 3 Part G §7.3): the peer's database or its hash is wrong; "
                 + "the database is used for this connection only")
            return services
        }
        store(services, peerHash: peerHash)
        return services
    }

    /// Whether `peerHash` is the hash of `services`: §7.3's (`computed`), or one bluetoothd serves instead
    /// (`GATTDatabaseHash.blueZHashes`), which is said on stderr as a note with both values.
    func hashIsThePeers(_ computed: [UInt8], _ services: [GATTService], peerHash: [UInt8]) -> Bool {
        switch GATTDatabaseHash.order(computed: computed, served: peerHash) {
        case .pts?:
            return true
        case .bluez?:
            warn("note: \(cacheTarget) serves the Database Hash \(ATTHex.string(peerHash)) in bluetoothd's octet order (AES-CMAC's output "
                 + "as it comes, src/shared/gatt-db.c); PTS-qualified servers send it least significant octet first "
                 + "(\(ATTHex.string(GATTHashOrder.pts.served(computed)))); the database discovered is the peer's and is cached under its hash")
            return true
        case nil:
            break
        }
        guard let rule = (try? GATTDatabaseHash.blueZHashes(services: services))??.first(where: { $0.hash == peerHash }) else { return false }
        warn("note: \(cacheTarget) serves the Database Hash \(ATTHex.string(peerHash)) as bluetoothd computes it (\(rule.versions): "
             + "src/shared/gatt-db.c leaves out descriptors that Core Spec Vol 3 Part G §7.3 hashes, which gives \(ATTHex.string(computed))); "
             + "the database discovered is the peer's and is cached under its hash")
        return true
    }

    /// The Database Hash of `services` as computed here; nil when it cannot be (an Extended Properties value
    /// unread, or libcrypto missing: said on stderr).
    func computedHash(_ services: [GATTService]) -> [UInt8]? {
        do {
            return try GATTDatabaseHash.compute(services: services)
        } catch {
            warn("the database of \(cacheTarget) is not cached: \(error)")
            return nil
        }
    }

    /// Writes the cache file (when the cache is on); a failure is said on stderr, not thrown.
    func store(_ services: [GATTService], peerHash: [UInt8]) {
        guard let cache else { return }
        do {
            try cache.store(CachedDatabase(target: cacheTarget, adapter: cacheAdapter, databaseHash: peerHash, services: services))
        } catch {
            warn("could not write the GATT cache \(cache.path(target: cacheTarget, adapter: cacheAdapter)): \(DatabaseCache.reason(error)) "
                 + "(the database is used for this connection only; set XDG_CACHE_HOME to a writable directory, or give --no-cache)")
        }
    }
}

// MARK: - robust caching (Core Spec 5.4 Vol 3 Part G §2.5.2.1, §7.1, §7.2)

extension Session {
    /// True for the peer's Database Out Of Sync (0x12).
    static func isOutOfSync(_ error: any Error) -> Bool {
        (error as? GATTError)?.attributeError.map { $0.code == .databaseOutOfSync && $0.rejectedBy == .peer } ?? false
    }

    /// Writes Client Supported Features with the robust caching bit (§7.2) when the peer's database has it, so
    /// that after a change the peer answers Database Out Of Sync (0x12) instead of serving moved handles. An ATT
    /// error is no failure (the peer keeps its default). For the long-running commands (listen, scan, wifi).
    /// The GATT client's one writer of 0x2B29 keeps the bits set before (the EATT bit of `--bearers`).
    func enableRobustCaching() async throws(GATTError) {
        guard let c = try await discovered().services.flatMap(\.characteristics).first(where: { $0.uuid == .clientSupportedFeatures }),
              c.properties.contains(.write) else { return }
        do {
            try await client.writeClientFeatures(.robustCaching, handle: c.valueHandle)
        } catch {
            guard case .attribute = error else { throw error }
        }
    }

    /// After Database Out Of Sync or Service Changed: the peer's Database Hash read again (which makes a
    /// robust-caching server count this client change-aware, §2.5.2.1), the database known forgotten and
    /// found again (cached under the new hash, or discovered and stored).
    func resynchronize() async throws(GATTError) {
        discoveredNames.withLock { $0 = nil }
        if cache == nil { _ = try await readDatabaseHash() }
        _ = try await discovered()
    }

    /// `body` on the value handle `reference` names; after Database Out Of Sync (0x12) the database is
    /// resynchronized and a UUID or name resolved again and `body` retried once. A raw handle is not remapped:
    /// the error says so. A second 0x12 fails naming it and what was done.
    func retryingOutOfSync<T>(_ reference: CharacteristicReference, command: String?,
                              _ body: (UInt16) async throws -> T) async throws -> T {
        let handle = try await resolve(reference, command: command)
        do {
            return try await body(handle)
        } catch where Self.isOutOfSync(error) {
            try await resynchronize()
            guard case .handle = reference else {
                let again = try await resolve(reference, command: command)
                do {
                    return try await body(again)
                } catch where Self.isOutOfSync(error) {
                    throw Self.outOfSync(error, "\(reference.description): still out of sync after re-reading the Database Hash, "
                                         + "rediscovering the database and retrying once at \(ATTHex.handle(again))")
                }
            }
            throw Self.outOfSync(error, "the database changed: its Database Hash was re-read and the database rediscovered; "
                                 + "\(ATTHex.handle(handle)) was given as a raw handle and is not remapped")
        }
    }

    /// `body` retried once after Database Out Of Sync (0x12) and a resynchronization (a read by UUID).
    func retryingOutOfSync<T>(_ body: () async throws -> T) async throws -> T {
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

    /// The 0x12 error with what was done in its handle's name (the error table prints it).
    static func outOfSync(_ error: any Error, _ what: String) -> any Error {
        guard case .attribute(var e)? = error as? GATTError else { return error }
        e.handleName = e.handleName.map { "\($0); \(what)" } ?? what
        return GATTError.attribute(e)
    }

    /// A Handle Value Indication seen on the bearer (its event loop): Service Changed (§7.1) forgets the
    /// database known on this connection and removes the peer's cache file, so the next use discovers the
    /// affected range again (`rediscover`; names are resolved again, raw handles are not remapped).
    func indicated(_ pdu: [UInt8]) {
        // The codec reads the PDU; the Service Changed value is two handles, start and end (§7.1).
        guard case .handleValueIndication(let handle, let value)? = try? ATTPDU.decode(pdu), value.count == 4,
              let known = discoveredNames.withLock({ $0 }) else { return }
        guard known.services.flatMap(\.characteristics).contains(where: { $0.uuid == .serviceChanged && $0.valueHandle == handle }) else { return }
        let v = Array(value)
        let start = v.littleEndianUInt16(at: 0), end = v.littleEndianUInt16(at: 2)
        // What the next use rediscovers: the range (with any earlier one not yet rediscovered).
        serviceChanged.withLock { c in
            let r = c.map { ATTHandleRange(start: min($0.range.start, start), end: max($0.range.end, end)) } ?? ATTHandleRange(start: start, end: end)
            c = (c?.stale ?? known.services, r)
        }
        discoveredNames.withLock { $0 = nil }
        let removed = (try? cache?.clear(target: cacheTarget, adapter: cacheAdapter)) ?? []
        warn("Service Changed \(ATTHex.handle(start))-\(ATTHex.handle(end)) from \(cacheTarget): the database known here"
             + (removed.isEmpty ? "" : " and its cached copy") + " are forgotten; that range is discovered again and names resolved again on their next use")
    }
}
