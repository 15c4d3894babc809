// The GATT cache on disk, the CLI's DatabaseStore: one readable JSON file per adapter and peer ($XDG_CACHE_HOME/mirror,
// else ~/.cache/mirror), holding the database discovered there and its Database Hash (Core Spec 5.4 Vol 3 Part G
// §2.5.2, §7.3). A file is trusted only when it parses whole, has this format version, and its services hash to the
// hash it stores. What the cache does with it (GATTDatabaseCache) is the GATT client's; what it says is here.
import ATTStack
import FoundationEssentials
import GATTClient
import JSON
import HostEnvironment
import LinuxBluetooth
import LinkCore
import GATTVocabulary

/// One peer's cached database, in the file's JSON.
typealias CachedDatabase = GATTCachedDatabase

extension GATTCachedDatabase {
    /// The file format; a file with another one is ignored (with a warning), never read.
    static let formatVersion = 1

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

    /// Reads a file's JSON; throws what is wrong with it, in words.
    init(json: JSONValue) throws(DatabaseCacheProblem) {
        guard json.fields != nil else { throw DatabaseCacheProblem("not a JSON object") }
        guard let format = json["format"]?.integer else { throw DatabaseCacheProblem("no \"format\"") }
        guard format == Self.formatVersion else {
            throw DatabaseCacheProblem("format \(format), this mirror reads format \(Self.formatVersion)")
        }
        let target = try Self.field(json, "target", \.string)
        let adapter = json["adapter"]?.string
        let databaseHash = try Self.bytes(try Self.field(json, "databaseHash", \.string), "databaseHash")
        guard databaseHash.count == 16 else { throw DatabaseCacheProblem("databaseHash is not 16 bytes") }
        let services = try Self.field(json, "services", \.items).map { (s: JSONValue) throws(DatabaseCacheProblem) in
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
        self.init(target: target, adapter: adapter, databaseHash: databaseHash, services: services)
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

/// The cache directory and its files: the GATT client's DatabaseStore.
struct DatabaseCache: DatabaseStore {
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

    /// The file for `target`: its database when it is there and sound; nil when it is not there; throws why when
    /// it is there but not usable (corrupted, another format, its services not hashing to its hash).
    func load(target: String, adapter: String?) throws(DatabaseStoreError) -> CachedDatabase? {
        let file = path(target: target, adapter: adapter)
        guard let data = FileManager.default.contents(atPath: file) else { return nil }
        switch Self.read(data) {
        case .success(let db) where db.target == target && db.adapter == adapter: return db
        case .success(let db): throw DatabaseStoreError("ignoring the GATT cache \(file): it is for \(db.target) on \(db.adapter ?? "the default adapter")")
        case .failure(let p): throw DatabaseStoreError("ignoring the GATT cache \(file): \(p)")
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
        // The file's services hash to its databaseHash by §7.3 (in either octet order) or by bluetoothd's rule.
        guard db.hashesToItsHash else {
            return .failure(DatabaseCacheProblem("its services do not hash to its databaseHash \(ATTHex.string(db.databaseHash))"))
        }
        return .success(db)
    }

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

    /// Writes the file (a temporary file renamed over it, so a reader never sees half of one); throws what to say.
    func store(_ db: CachedDatabase) throws(DatabaseStoreError) {
        let file = path(target: db.target, adapter: db.adapter)
        do {
            try XDGDirectory.preparePrivateDirectory(directory)  // 0700, tightened if looser; another user's is refused
            try Data((db.json.pretty + "\n").utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        } catch {
            throw DatabaseStoreError("could not write the GATT cache \(file): \(Self.reason(error)) "
                                     + "(the database is used for this connection only; set XDG_CACHE_HOME to a writable directory, or give --no-cache)")
        }
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

    /// The file of `target` removed (after a Service Changed or a cached declaration found wrong); the paths removed.
    func clear(target: String, adapter: String?) throws(DatabaseStoreError) -> [String] {
        do {
            return try remove(target: target, adapter: adapter)
        } catch {
            throw DatabaseStoreError("could not remove the GATT cache \(path(target: target, adapter: adapter)): \(Self.reason(error))")
        }
    }

    /// Removes the file of `target` (nil: every cache file); returns the paths removed.
    func remove(target: String?, adapter: String?) throws -> [String] {
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
    /// What the GATT client's cache did, as stderr says it (`warn`): notes, warnings and findings.
    static func cacheText(_ event: GATTDatabaseCacheEvent, target: String) -> String {
        switch event {
        case .unusable(let e), .notStored(let e):
            return e.description
        case .notHashable(let e):
            return "the database of \(target) is not cached: \(e)"
        case .hashMismatch(let served, let computed):
            return "finding: \(target) serves the Database Hash \(ATTHex.string(served)), but the database discovered there "
                + "hashes to \(ATTHex.string(computed)) (Core Spec Vol 3 Part G §7.3): the peer's database or its hash is wrong; "
                + "the database is used for this connection only"
        case .hashInBlueZOrder(let served, let computed):
            return "note: \(target) serves the Database Hash \(ATTHex.string(served)) in bluetoothd's octet order (AES-CMAC's output "
                + "as it comes, src/shared/gatt-db.c); PTS-qualified servers send it least significant octet first "
                + "(\(ATTHex.string(GATTHashOrder.pts.served(computed)))); the database discovered is the peer's and is cached under its hash"
        case .hashByBlueZRule(let served, let computed, let versions):
            return "note: \(target) serves the Database Hash \(ATTHex.string(served)) as bluetoothd computes it (\(versions): "
                + "src/shared/gatt-db.c leaves out descriptors that Core Spec Vol 3 Part G §7.3 hashes, which gives \(ATTHex.string(computed))); "
                + "the database discovered is the peer's and is cached under its hash"
        case .declarationMismatch(let c, let finding, let peerHash, let removed):
            let found = switch finding {
            case .declaration(let d):
                "value handle \(ATTHex.handle(d.valueHandle)), UUID \(d.uuid), properties 0x\(ATTHex.string([d.properties]))"
            case .notADeclaration(let value): "[\(ATTHex.string(value))], not a characteristic declaration"
            case .attributeError(let code): "ATT error 0x\(ATTHex.string([code.rawValue]))"
            }
            return "finding: the GATT cache of \(target) says the characteristic declared at \(ATTHex.handle(c.declarationHandle)) has value handle "
                + "\(ATTHex.handle(c.valueHandle)), UUID \(c.uuid), properties 0x\(ATTHex.string([c.properties.rawValue])); the peer's declaration there gives "
                + TerminalText.escaped(found) + " (Core Spec Vol 3 Part G §3.3.1), though it serves the cached Database Hash \(ATTHex.string(peerHash)): "
                + "the cached copy" + (removed.isEmpty ? "" : " (\(removed.joined(separator: ", ")))") + " is discarded and the database discovered again"
        case .serviceChanged(let range, let removed):
            return "Service Changed \(ATTHex.handle(range.start))-\(ATTHex.handle(range.end)) from \(target): the database known here"
                + (removed.isEmpty ? "" : " and its cached copy") + " are forgotten; that range is discovered again and names resolved again on their next use"
        }
    }

    /// For the mirror's procedures (scan, wifi), which otherwise discover only the mirror service: the database
    /// known on this connection or by the cache, kept for the connection; nil when neither has it.
    /// The profile's characteristics in it are verified first, as a name is (`verifiedMirrorCharacteristics`).
    func cachedDatabase() async throws(GATTError) -> [GATTService]? {
        guard let known = try await databaseCache.knownOrStored() else { return nil }
        return try await verifiedMirrorCharacteristics(known.services)
    }

    /// The mirror procedures find the profile's characteristics in `services` by UUID and write to them: each one
    /// the mirror service has is checked against the peer's declaration (`GATTDatabaseCache.verify`, as a name is; nothing is sent for
    /// a database discovered on this connection). A mismatch rediscovered the database: that one is returned.
    func verifiedMirrorCharacteristics(_ services: [GATTService]) async throws(GATTError) -> [GATTService] {
        let named = services.filter { $0.isPrimary && $0.uuid == profile.service }.flatMap(\.characteristics)
            .filter { profile.characteristicName($0.uuid) != nil }
        for c in named where try await !databaseCache.verify(c) {
            return databaseCache.known?.services ?? []
        }
        return services
    }

    /// The note `gatt` prints when the cache is on and the peer serves no Database Hash; nil otherwise.
    var noHashNote: String? {
        guard databaseCache.store != nil, databaseCache.servesNoDatabaseHash else { return nil }
        return "note: \(cacheTarget) serves no Database Hash (0x2B2A, Core Spec Vol 3 Part G §7.3): its database is discovered "
            + "on every connection and not cached"
    }

    /// `body` on the value handle `reference` names, retried once after Database Out Of Sync (0x12) with a UUID
    /// or name resolved again (`GATTDatabaseCache.retryingOutOfSync`; a raw handle is not remapped).
    func retryingOutOfSync<T>(_ reference: CharacteristicReference, command: String?,
                              _ body: (UInt16) async throws -> T) async throws -> T {
        let remapping: String? = if case .handle = reference { nil } else { reference.description }
        return try await databaseCache.retryingOutOfSync(remapping: remapping, locate: { try await resolve(reference, command: command) }, body)
    }
}
