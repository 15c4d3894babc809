// The GATT cache on disk, a DatabaseStore on files: one readable JSON file per adapter and peer ($XDG_CACHE_HOME/mirror,
// else ~/.cache/mirror), holding the database discovered there and its Database Hash (Core Spec 5.4 Vol 3 Part G
// §2.5.2, §7.3). A file is trusted only when it parses whole, has this format version, and its services hash to the
// hash it stores. What the cache does with it is GATTClient's GATTDatabaseCache; what the CLI says of it is the CLI's.
import ATTStack
import FoundationEssentials
import GATTClient
import JSON
import HostEnvironment
import LinuxBluetooth
import LinkCore
import GATTVocabulary

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
        let services = try Self.field(json, "services", \.items).map { (s: JSONValue) throws(DatabaseCacheProblem) in try Self.service(s) }
        self.init(target: target, adapter: adapter, databaseHash: databaseHash, services: services)
    }

    /// One service of the file's "services" (the form `json(service:)` writes), with its includes, characteristics
    /// and descriptors; the device files of `mirror clone` hold the same form.
    static func service(_ s: JSONValue) throws(DatabaseCacheProblem) -> GATTService {
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

    static func field<T>(_ json: JSONValue, _ key: String, _ get: (JSONValue) -> T?) throws(DatabaseCacheProblem) -> T {
        guard let v = json[key], let t = get(v) else { throw DatabaseCacheProblem("no valid \"\(key)\"") }
        return t
    }

    static func handle(_ json: JSONValue, _ key: String) throws(DatabaseCacheProblem) -> UInt16 {
        let n = try field(json, key, \.integer)
        guard let h = UInt16(exactly: n), h > 0 else { throw DatabaseCacheProblem("\"\(key)\" \(n) is not a handle") }
        return h
    }

    static func uuid(_ json: JSONValue) throws(DatabaseCacheProblem) -> BluetoothUUID {
        let text = try field(json, "uuid", \.string)
        guard let u = BluetoothUUID(string: text) else { throw DatabaseCacheProblem("\"\(text)\" is not a UUID") }
        return u
    }

    static func bytes(_ text: String, _ key: String) throws(DatabaseCacheProblem) -> [UInt8] {
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
public struct DatabaseCacheProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: String
    public init(_ problem: String) { self.problem = problem }
    public var description: String { problem }
}

/// The cache directory and its files: a DatabaseStore for `Peer.Options.cache` (the CLI's too).
public struct FileDatabaseStore: DatabaseStore {
    /// $XDG_CACHE_HOME/mirror or ~/.cache/mirror, or a directory of the caller's.
    public var directory: String
    /// What a failed write says after its reason, in parentheses: what happens now and what to do about it.
    public var writeAdvice: String

    public init(directory: String, writeAdvice: String = "the database is used for this connection only") {
        self.directory = directory
        self.writeAdvice = writeAdvice
    }

    /// The default directory; nil without XDG_CACHE_HOME and HOME.
    public static func standard(writeAdvice: String = "the database is used for this connection only; set XDG_CACHE_HOME to a writable directory")
        -> FileDatabaseStore? {
        XDGDirectory.cache.mirrorDirectory().map { FileDatabaseStore(directory: $0, writeAdvice: writeAdvice) }
    }

    /// "gatt-hci0-C0:11:22:33:44:55.json", "gatt-default-unix:%2Ftmp%2Fmirror-sim.sock.json": the adapter (or
    /// "default") and the TARGET, with "%" and "/" escaped so that a path stays one file name.
    static func fileName(target: String, adapter: String?) -> String {
        let key = target.replacing("%", with: "%25").replacing("/", with: "%2F")
        return "gatt-\(adapter ?? "default")-\(key).json"
    }

    func path(target: String, adapter: String?) -> String { directory + "/" + Self.fileName(target: target, adapter: adapter) }

    /// The file for `target`: its database when it is there and sound; nil when it is not there; throws why when
    /// it is there but not usable (corrupted, another format, its services not hashing to its hash).
    public func load(target: String, adapter: String?) throws(DatabaseStoreError) -> GATTCachedDatabase? {
        let file = path(target: target, adapter: adapter)
        guard let data = FileManager.default.contents(atPath: file) else { return nil }
        switch Self.read(data) {
        case .success(let db) where db.target == target && db.adapter == adapter: return db
        case .success(let db): throw DatabaseStoreError("ignoring the GATT cache \(file): it is for \(db.target) on \(db.adapter ?? "the default adapter")")
        case .failure(let p): throw DatabaseStoreError("ignoring the GATT cache \(file): \(p)")
        }
    }

    /// A file's bytes as a database, checked: JSON, format, fields, and the services hashing to the stored hash.
    static func read(_ data: Data) -> Result<GATTCachedDatabase, DatabaseCacheProblem> {
        let db: GATTCachedDatabase
        do {
            let json = try parseJSON(bytes: Array(data))
            db = try GATTCachedDatabase(json: json)
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
    public func store(_ db: GATTCachedDatabase) throws(DatabaseStoreError) {
        let file = path(target: db.target, adapter: db.adapter)
        do {
            try XDGDirectory.preparePrivateDirectory(directory)  // 0700, tightened if looser; another user's is refused
            try Data((db.json.pretty + "\n").utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        } catch {
            throw DatabaseStoreError("could not write the GATT cache \(file): \(Self.reason(error)) (\(writeAdvice))")
        }
    }

    /// Every cache file, by path, with its database or why it is not usable.
    public func entries() -> [(path: String, entry: Result<GATTCachedDatabase, DatabaseCacheProblem>)] {
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
    public func clear(target: String, adapter: String?) throws(DatabaseStoreError) -> [String] {
        do {
            return try remove(target: target, adapter: adapter)
        } catch {
            throw DatabaseStoreError("could not remove the GATT cache \(path(target: target, adapter: adapter)): \(Self.reason(error))")
        }
    }

    /// Removes the file of `target` (nil: every cache file); returns the paths removed.
    public func remove(target: String?, adapter: String?) throws -> [String] {
        let files = target.map { [path(target: $0, adapter: adapter)] } ?? entries().map(\.path)
        var removed: [String] = []
        for f in files where FileManager.default.fileExists(atPath: f) {
            try FileManager.default.removeItem(atPath: f)
            removed.append(f)
        }
        return removed
    }
}
