// A device rebuilt from what a client saw of it (`mirror clone`): its whole database (services, includes,
// characteristics, descriptors: Core Spec 5.4 Vol 3 Part G §3), every value it let be read, the errors it answered
// instead (what they reveal of its permissions, Part F §3.2.5), and the Database Hash it serves beside the one
// computed over what was found (Part G §7.3.1): equal, the clone is complete. As a device file (JSON), a superset of
// the mirror profile's schema (`name`, `characteristics`) that mirror-sim serves with `--from FILE`.
import ATTStack
import FoundationEssentials
import GATTClient
import GATTVocabulary
import JSON
import LinuxBluetooth

/// A device as a client saw it.
public struct DeviceClone: Sendable, Equatable {
    /// What became of one attribute's read.
    public enum Reading: Sendable, Equatable {
        /// Read whole.
        case value([UInt8])
        /// The peer answered this ATT error (Part F §3.4.1.1) instead.
        case refused(ATTErrorCode)
        /// Read, then blanked at the user's asking (`--redact`): its bytes never reach the file.
        case redacted(length: Int)
    }

    /// The file format this code writes and reads.
    public static let format = "mirror-device/1"

    /// The device's name (its GAP Device Name when readable, else the target).
    public var name: String
    /// Where it came from ("live unix:/tmp/mirror-sim.sock", "capture FILE connection N").
    public var source: String
    /// The ATT_MTU the clone was made at.
    public var mtu: Int
    /// Every service, with its includes, characteristics and descriptors (discovered, Part G §4.4-§4.7).
    public var services: [GATTService]
    /// The reads, by handle: characteristic values and descriptors. An attribute absent here was not read.
    public var readings: [UInt16: Reading]
    /// Names a user may give each characteristic value handle (the profile's, a User Description, the SIG's).
    public var names: [UInt16: String]
    /// The Database Hash the peer serves (0x2B2A), nil when it serves none.
    public var servedHash: [UInt8]?
    /// What the peer did in answer to each write a capture shows, in the capture's order (none for a live clone).
    public var behaviours: [WriteBehaviour] = []
    /// The advertising reports seen from the target before the connect (Vol 6 Part B §2.3; the AD structures: Core
    /// Spec Supplement Part A), one per PDU type (ADV_IND, SCAN_RSP...); empty when it was not discovered over the air.
    /// The device file keeps each one's type, address and data, not its RSSI (read back as 127, not available).
    public var advertising: [LEAdvertisingReport] = []

    /// One write a capture shows and what the peer did in answer (Part F §3.4.5): its Write Response or Error
    /// Response, and the notifications and indications (§3.4.7) that came after it, before the next write.
    public struct WriteBehaviour: Sendable, Equatable {
        /// A notification or indication that followed, `after` microseconds after the write went out.
        public struct Followed: Sendable, Equatable {
            public var after: Int64
            public var handle: UInt16
            public var value: [UInt8]
            public var indication: Bool
            public init(after: Int64, handle: UInt16, value: [UInt8], indication: Bool) {
                self.after = after
                self.handle = handle
                self.value = value
                self.indication = indication
            }
        }

        public var handle: UInt16
        public var value: [UInt8]
        /// A Write Request (true) or a Write Command.
        public var withResponse: Bool
        /// The peer's Error Response instead of a Write Response; nil when it accepted (or for a command).
        public var refusal: ATTErrorCode?
        public var then: [Followed]

        public init(handle: UInt16, value: [UInt8], withResponse: Bool, refusal: ATTErrorCode? = nil, then: [Followed] = []) {
            self.handle = handle
            self.value = value
            self.withResponse = withResponse
            self.refusal = refusal
            self.then = then
        }
    }

    public init(name: String, source: String, mtu: Int, services: [GATTService], readings: [UInt16: Reading],
                names: [UInt16: String], servedHash: [UInt8]?) {
        self.name = name
        self.source = source
        self.mtu = mtu
        self.services = services
        self.readings = readings
        self.names = names
        self.servedHash = servedHash
    }

    /// The Database Hash over what was found (Part G §7.3.1), nil when a hashed value (Extended Properties) is unknown.
    public var computedHash: [UInt8]? {
        guard let attributes = GATTDatabaseHash.attributes(of: services) else { return nil }
        return try? GATTDatabaseHash.compute(attributes)
    }

    /// Whether the database found is the whole one the peer serves: its served hash equals the computed one (in
    /// either octet order, as `GATTDatabaseHash.order` accepts, or as a BlueZ version computes it:
    /// `GATTDatabaseHash.blueZHashes`); nil when the peer serves no hash to prove it.
    public var isComplete: Bool? {
        guard let servedHash else { return nil }
        guard let computedHash else { return false }
        if GATTDatabaseHash.order(computed: computedHash, served: servedHash) != nil { return true }
        let blueZ = (try? GATTDatabaseHash.blueZHashes(services: services)) ?? nil
        return blueZ?.contains { GATTDatabaseHash.order(computed: $0.hash, served: servedHash) != nil } ?? false
    }

    /// Every readable characteristic or descriptor never read (no read property, or not reached), by handle.
    public var unread: [UInt16] {
        services.flatMap(\.characteristics).flatMap { c in
            (c.properties.contains(.read) ? [c.valueHandle] : []) + c.descriptors.map(\.handle)
        }.filter { readings[$0] == nil }
    }

    /// How a list names `handle`: a characteristic value by its name, a descriptor by its type's name and its
    /// characteristic's ("Client Characteristic Configuration of Battery Level"); nil for an unnamed value.
    public func label(of handle: UInt16) -> String? {
        if let n = names[handle] { return n }
        for c in services.flatMap(\.characteristics) {
            guard let d = c.descriptors.first(where: { $0.handle == handle }) else { continue }
            return (d.uuid.name ?? d.uuid.description) + " of " + (names[c.valueHandle] ?? c.uuid.name ?? c.uuid.description)
        }
        return nil
    }

    // MARK: - The device file

    /// Reads and parses the device file at `path` (what `mirror clone -o` wrote): `mirror clone --diff`'s and
    /// `mirror-sim --from`'s one loader. Throws what is wrong, naming the file.
    public init(contentsOf path: String) throws(DeviceFileError) {
        guard let data = FileManager.default.contents(atPath: path) else { throw DeviceFileError("cannot read the device file \(path)") }
        do {
            self = try DeviceClone(json: try parseJSON(bytes: Array(data)))
        } catch {
            throw DeviceFileError("device file \(path): \(error)")
        }
    }

    /// The device file: the profile schema's `name` and `characteristics` (name to UUID, for each named value), then
    /// the database in the GATT cache's form and the readings.
    public var json: JSONValue {
        let characteristics = services.flatMap(\.characteristics)
        var named: [(String, JSONValue)] = []
        for c in characteristics {
            if let n = names[c.valueHandle], !named.contains(where: { $0.0 == n }) { named.append((n, .string(c.uuid.description))) }
        }
        let readingsJSON: [JSONValue] = readings.keys.sorted().map { h in
            var fields: [(String, JSONValue)] = [("handle", .int(Int(h)))]
            switch readings[h]! {
            case .value(let v): fields.append(("value", .string(ATTHex.string(v))))
            case .refused(let code): fields += [("error", .int(Int(code.rawValue))), ("errorName", .string(code.name))]
            case .redacted(let length): fields += [("redacted", .bool(true)), ("length", .int(length))]
            }
            return .object(fields)
        }
        let hash: JSONValue = .object([
            ("served", servedHash.map { .string(ATTHex.string($0)) } ?? .null),
            ("computed", computedHash.map { .string(ATTHex.string($0)) } ?? .null),
            ("complete", isComplete.map(JSONValue.bool) ?? .null),
        ])
        return .object([
            ("format", .string(Self.format)),
            ("name", .string(name)),
            ("source", .string(source)),
            ("characteristics", .object(named)),
            ("mtu", .int(mtu)),
            ("databaseHash", hash),
            ("names", .object(names.keys.sorted().map { (String($0), .string(names[$0]!)) })),
            ("services", .array(services.map(GATTCachedDatabase.json(service:)))),
            ("readings", .array(readingsJSON)),
            ("unread", .array(unread.map { .int(Int($0)) })),
            ("advertising", .array(advertising.map { a in
                .object([("kind", .string(a.kind)), ("eventType", .int(Int(a.eventType))), ("address", .string(a.address.description)),
                         ("addressType", .string(a.addressType == .random ? "random" : "public")), ("data", .string(ATTHex.string(a.data)))])
            })),
            ("behaviours", .array(behaviours.map { b in
                .object([("handle", .int(Int(b.handle))), ("value", .string(ATTHex.string(b.value))),
                         ("response", .string(!b.withResponse ? "command" : b.refusal == nil ? "accepted" : "refused"))]
                        + (b.refusal.map { [("error", JSONValue.int(Int($0.rawValue)))] } ?? [])
                        + [("then", .array(b.then.map { f in
                            .object([("afterMicroseconds", .int(Int(f.after))), ("handle", .int(Int(f.handle))),
                                     ("value", .string(ATTHex.string(f.value))), ("kind", .string(f.indication ? "indication" : "notification"))])
                        }))])
            })),
        ])
    }

    /// Reads a device file; throws what is wrong with it, in words (the field, and why).
    public init(json: JSONValue) throws(DatabaseCacheProblem) {
        guard json.fields != nil else { throw DatabaseCacheProblem("not a JSON object") }
        let format = try GATTCachedDatabase.field(json, "format", \.string)
        guard format == Self.format else { throw DatabaseCacheProblem("format \"\(format)\", this mirror reads \"\(Self.format)\"") }
        name = try GATTCachedDatabase.field(json, "name", \.string)
        source = try GATTCachedDatabase.field(json, "source", \.string)
        mtu = try GATTCachedDatabase.field(json, "mtu", \.integer)
        servedHash = try json["databaseHash"]?["served"]?.string.map { (t: String) throws(DatabaseCacheProblem) in
            try GATTCachedDatabase.bytes(t, "databaseHash.served")
        }
        services = try GATTCachedDatabase.field(json, "services", \.items).map { (s: JSONValue) throws(DatabaseCacheProblem) in
            try GATTCachedDatabase.service(s)
        }
        var names: [UInt16: String] = [:]
        for (key, value) in json["names"]?.fields ?? [] {
            guard let h = UInt16(key), let n = value.string else { throw DatabaseCacheProblem("names: \"\(key)\" is not a handle with a name") }
            names[h] = n
        }
        self.names = names
        var readings: [UInt16: Reading] = [:]
        for r in try GATTCachedDatabase.field(json, "readings", \.items) {
            let h = try GATTCachedDatabase.handle(r, "handle")
            if let v = r["value"]?.string {
                readings[h] = .value(try GATTCachedDatabase.bytes(v, "value"))
            } else if let code = r["error"]?.integer {
                guard let raw = UInt8(exactly: code) else { throw DatabaseCacheProblem("readings: error \(code) is not a byte") }
                readings[h] = .refused(ATTErrorCode(rawValue: raw))
            } else if r["redacted"] == .bool(true) {
                readings[h] = .redacted(length: r["length"]?.integer ?? 0)
            } else {
                throw DatabaseCacheProblem("readings: handle \(h) has no value, error or redacted")
            }
        }
        self.readings = readings
        advertising = try (json["advertising"]?.items ?? []).map { (a: JSONValue) throws(DatabaseCacheProblem) in
            let type = try GATTCachedDatabase.field(a, "eventType", \.integer)
            guard let eventType = UInt8(exactly: type), eventType <= 4 else { throw DatabaseCacheProblem("advertising: eventType \(type) is not 0-4") }
            let data = try GATTCachedDatabase.bytes(try GATTCachedDatabase.field(a, "data", \.string), "advertising.data")
            guard data.count <= 31 else { throw DatabaseCacheProblem("advertising: \(data.count) bytes of data, more than a legacy PDU's 31") }
            let text = try GATTCachedDatabase.field(a, "address", \.string)
            guard let address = try? BluetoothAddress(parsing: text) else { throw DatabaseCacheProblem("advertising: address \"\(text)\" is not AA:BB:CC:DD:EE:FF") }
            return LEAdvertisingReport(eventType: eventType, addressType: a["addressType"] == .string("random") ? .random : .public,
                                       address: address, data: data)
        }
        behaviours = try (json["behaviours"]?.items ?? []).map { (b: JSONValue) throws(DatabaseCacheProblem) in
            let response = try GATTCachedDatabase.field(b, "response", \.string)
            guard ["command", "accepted", "refused"].contains(response) else { throw DatabaseCacheProblem("behaviours: response \"\(response)\"") }
            let refusal = try b["error"]?.integer.map { (code: Int) throws(DatabaseCacheProblem) in
                guard let raw = UInt8(exactly: code) else { throw DatabaseCacheProblem("behaviours: error \(code) is not a byte") }
                return ATTErrorCode(rawValue: raw)
            }
            return WriteBehaviour(
                handle: try GATTCachedDatabase.handle(b, "handle"),
                value: try GATTCachedDatabase.bytes(try GATTCachedDatabase.field(b, "value", \.string), "value"),
                withResponse: response != "command", refusal: refusal,
                then: try (b["then"]?.items ?? []).map { (f: JSONValue) throws(DatabaseCacheProblem) in
                    WriteBehaviour.Followed(after: Int64(try GATTCachedDatabase.field(f, "afterMicroseconds", \.integer)),
                                            handle: try GATTCachedDatabase.handle(f, "handle"),
                                            value: try GATTCachedDatabase.bytes(try GATTCachedDatabase.field(f, "value", \.string), "value"),
                                            indication: f["kind"] == .string("indication"))
                })
        }
    }
}

extension Peer {
    /// Rebuilds the peer as a `DeviceClone`: the whole database (Part G §4.4-§4.7, with the secondary services and
    /// Extended Properties the Database Hash covers), every readable value and descriptor read whole (long values
    /// too), the errors answered instead, the served Database Hash, and the names of each value. The values at
    /// `redacting` (value or descriptor handles) are read but only their length is kept.
    public func clone(source: String, redacting: Set<UInt16> = []) async throws(GATTError) -> DeviceClone {
        try await withLinkLoop(loop) { () async throws(GATTError) -> DeviceClone in
            var services = try await database.discovered().services
            try await client.readHashedValues(&services)
            let served = try await client.readDatabaseHash()?.value
            let values = try await lookup.readEveryValue(of: services)
            var readings: [UInt16: DeviceClone.Reading] = [:]
            func note(_ handle: UInt16, _ outcome: Result<[UInt8], GATTAttributeError>) {
                switch outcome {
                case .success(let v): readings[handle] = redacting.contains(handle) ? .redacted(length: v.count) : .value(v)
                case .failure(let e): readings[handle] = .refused(e.code)
                }
            }
            for v in values.joined() {
                if let outcome = v.value { note(v.characteristic.valueHandle, outcome) }
                for (d, outcome) in zip(v.characteristic.descriptors, v.descriptors) { note(d.handle, outcome) }
            }
            let catalog = try await lookup.catalog(describing: nil)
            var names: [UInt16: String] = [:]
            for e in catalog.entries { if let label = e.label { names[e.characteristic.valueHandle] = label } }
            let deviceName = services.flatMap(\.characteristics).first { $0.uuid == .bit16(0x2A00) }
                .flatMap { c -> String? in if case .value(let v)? = readings[c.valueHandle] { String(decoding: v, as: UTF8.self) } else { nil } }
            var clone = DeviceClone(name: deviceName ?? target.description, source: source, mtu: client.mtu, services: services,
                                    readings: readings, names: names, servedHash: served)
            if case .bluetooth(let address) = target, let monitor = link?.monitor {
                clone.advertising = monitor.advertising(of: address)
            }
            return clone
        }
    }
}

/// A device file that could not be read, in words naming the file.
public struct DeviceFileError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What differs between two clones of a device (or a clone and the device now): the database's structure
/// (`GATTDatabaseChange`: added, removed, moved), characteristics whose properties changed, and values that differ.
public struct DeviceDifferences: Sendable, Equatable {
    /// A characteristic at the same value handle with other properties (Part G §3.3.1.1).
    public struct PropertyChange: Sendable, Equatable {
        public var valueHandle: UInt16
        public var name: String?
        public var before: GATTCharacteristicProperties
        public var after: GATTCharacteristicProperties
    }

    /// An attribute read in either clone whose reading differs (a value, a refusal, or read in one only).
    public struct ValueChange: Sendable, Equatable {
        public var handle: UInt16
        public var name: String?
        public var before: DeviceClone.Reading?
        public var after: DeviceClone.Reading?
    }

    public var structure: [GATTDatabaseChange]
    public var properties: [PropertyChange]
    public var values: [ValueChange]

    public var isEmpty: Bool { structure.isEmpty && properties.isEmpty && values.isEmpty }

    /// From `old` to `new`: values compared at the handles both databases hold with the same type.
    public init(from old: DeviceClone, to new: DeviceClone) {
        structure = GATTDatabaseChange.between(old.services, new.services)
        func types(_ c: DeviceClone) -> [UInt16: BluetoothUUID] {
            var out: [UInt16: BluetoothUUID] = [:]
            for ch in c.services.flatMap(\.characteristics) {
                out[ch.valueHandle] = ch.uuid
                for d in ch.descriptors { out[d.handle] = d.uuid }
            }
            return out
        }
        let before = types(old), after = types(new)
        let oldCharacteristics = Dictionary(old.services.flatMap(\.characteristics).map { ($0.valueHandle, $0) }, uniquingKeysWith: { a, _ in a })
        properties = new.services.flatMap(\.characteristics).compactMap { c in
            guard let was = oldCharacteristics[c.valueHandle], was.uuid == c.uuid, was.properties != c.properties else { return nil }
            return PropertyChange(valueHandle: c.valueHandle, name: new.names[c.valueHandle], before: was.properties, after: c.properties)
        }
        values = Set(old.readings.keys).union(new.readings.keys).sorted().compactMap { h in
            guard let type = after[h], before[h] == type, old.readings[h] != new.readings[h] else { return nil }
            return ValueChange(handle: h, name: new.names[h] ?? old.names[h], before: old.readings[h], after: new.readings[h])
        }
    }
}

extension DeviceClone.Reading: CustomStringConvertible {
    /// "[68 74 74 70]", "refused 0x0F Insufficient Encryption", "redacted (16 bytes)".
    public var description: String {
        switch self {
        case .value(let v): "[\(ATTHex.bytes(v))]"
        case .refused(let code): "refused \(ATTHex.byte(code.rawValue)) \(code.name)"
        case .redacted(let length): "redacted (\(length) bytes)"
        }
    }
}
