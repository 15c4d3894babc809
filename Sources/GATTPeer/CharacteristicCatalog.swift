// Names wherever a handle goes: the one resolver from HANDLE|UUID|NAME to a characteristic, over the GATT client's
// discovery (Core Spec Vol 3 Part G §4.4-4.7) and its Characteristic User Descriptions (0x2901, §3.3.3.2).
// One per connection (Peer, and the CLI's session), so that every caller resolves alike.
import ATTStack
import GATTClient
import GATTVocabulary

/// How a characteristic is named: by its value (or declaration) handle, its UUID, or a name.
public enum CharacteristicReference: Sendable, Equatable, CustomStringConvertible {
    case handle(UInt16)
    case uuid(BluetoothUUID)
    case name(String)

    /// The handle as 0x0012, the UUID as printed, the name as given.
    public var description: String {
        switch self {
        case .handle(let h): return ATTHex.handle(h)
        case .uuid(let u): return u.description
        case .name(let n): return n
        }
    }
}

/// The names a profile gives characteristic UUIDs ("cloudToken"), beside the server's User Descriptions and the
/// Bluetooth SIG's names for well-known UUIDs.
public struct CharacteristicNames: Sendable, Equatable {
    public var byName: [String: BluetoothUUID]
    public init(_ byName: [String: BluetoothUUID] = [:]) { self.byName = byName }

    /// The profile's name for `uuid`.
    public func name(of uuid: BluetoothUUID) -> String? { byName.first { $0.value == uuid }?.key }
    /// The UUID the profile names `name`.
    public func uuid(named name: String) -> BluetoothUUID? { byName[name] }

    /// What output calls a characteristic, in one place: the profile's name for its UUID, else its user
    /// description, else the UUID's well-known name.
    public func label(_ uuid: BluetoothUUID, userDescription: String?) -> String? {
        name(of: uuid) ?? userDescription ?? uuid.name
    }
}

/// The characteristics of a server's database with the names a user may call them by.
public struct CharacteristicCatalog: Sendable {
    public struct Entry: Sendable {
        public var characteristic: GATTCharacteristic
        /// The profile's name for its UUID ("cloudToken").
        public var profileName: String?
        /// Its Characteristic User Description, when the server has one and it was read.
        public var userDescription: String?
        /// What output calls it (`CharacteristicNames.label`): the profile's name, the user description, the UUID's name.
        public var label: String?

        /// "0x0012 6d697272-...-000000000003 cloudToken"
        public var candidate: String {
            "\(ATTHex.handle(characteristic.valueHandle)) \(characteristic.uuid)" + (label.map { " \($0)" } ?? "")
        }
    }

    public var entries: [Entry]

    public init(entries: [Entry]) { self.entries = entries }

    /// The catalog of `database` with `names`.
    public init(_ database: GATTKnownDatabase, names: CharacteristicNames) {
        entries = database.services.flatMap(\.characteristics).map { c in
            let description = database.descriptions[c.valueHandle]
            return Entry(characteristic: c, profileName: names.name(of: c.uuid), userDescription: description,
                         label: names.label(c.uuid, userDescription: description))
        }
    }

    /// The entry whose value (or declaration) is at `handle`.
    public func entry(at handle: UInt16) -> Entry? {
        entries.first { $0.characteristic.valueHandle == handle || $0.characteristic.declarationHandle == handle }
    }

    /// Every name a user may give here, the profile's and the user descriptions, in handle order, once each.
    public var names: [String] {
        var seen = Set<String>()
        return entries.flatMap { [$0.profileName, $0.userDescription].compactMap { $0 } }.filter { seen.insert($0).inserted }
    }

    /// The entries a UUID or a name picks: a name matches exactly, else ignoring case.
    public func matching(_ reference: CharacteristicReference) -> [Entry] {
        switch reference {
        case .handle(let h): return entry(at: h).map { [$0] } ?? []
        case .uuid(let u): return entries.filter { $0.characteristic.uuid == u }
        case .name(let n):
            let exact = entries.filter { $0.profileName == n || $0.userDescription == n }
            if !exact.isEmpty { return exact }
            let lower = n.lowercased()
            let named = entries.filter { $0.profileName?.lowercased() == lower || $0.userDescription?.lowercased() == lower }
            if !named.isEmpty { return named }
            // The name output prints for a well-known UUID ("Device Name", `gatt`'s lines), quoted when it has spaces.
            return entries.filter { $0.label?.lowercased() == lower }
        }
    }
}

/// Why a reference names no characteristic, or several: the words say what was looked for on which server, and
/// list the candidates or the names known.
public struct CharacteristicLookupError: Error, Sendable, CustomStringConvertible {
    public enum Reason: Sendable {
        /// Several match: give one by its value handle.
        case several([CharacteristicCatalog.Entry])
        /// None matches; `known` are the names the server's database has.
        case none(known: [String])
    }
    public var reference: CharacteristicReference
    public var reason: Reason
    /// The server's label (unix:PATH, or its address).
    public var server: String
    /// The UUID the profile gives a name that no characteristic has.
    public var profileUUID: BluetoothUUID?

    public var description: String {
        let token = reference.description
        switch reason {
        case .several(let matches):
            let what = if case .uuid = reference { "UUID \(token)" } else { "\"\(token)\"" }
            return "\(what) names \(matches.count) characteristics of \(server): "
                + matches.map(\.candidate).joined(separator: ", ") + "; give one by its value handle"
        case .none(let known):
            let names = "names known: " + (known.isEmpty ? "none (no profile name matches a characteristic there, and it has no user descriptions)" : known.joined(separator: ", "))
            switch reference {
            case .handle(let h): return "handle \(ATTHex.handle(h)) is not a characteristic of \(server)"
            case .uuid(let u): return "no characteristic of \(server) has UUID \(u)"
            case .name(let n):
                if let uuid = profileUUID {
                    return "\"\(n)\" is the profile's name for \(uuid), and no characteristic of \(server) has that UUID; \(names)"
                }
                return "no characteristic of \(server) is named \"\(n)\"; \(names)"
            }
        }
    }
}

/// Resolves references on one connection: the database discovered once (or from the GATT cache, each cached
/// characteristic confirmed by the peer's declaration before it is used), its User Descriptions read as needed.
public struct CharacteristicLookup: Sendable {
    public let database: GATTDatabaseCache
    public let names: CharacteristicNames

    public init(database: GATTDatabaseCache, names: CharacteristicNames) {
        self.database = database
        self.names = names
    }

    /// The database with names; the user descriptions of `describing` (value handles; nil: every characteristic)
    /// read if not read before (`GATTDatabaseCache.describing`).
    public func catalog(describing handles: Set<UInt16>?) async throws(GATTError) -> CharacteristicCatalog {
        CharacteristicCatalog(try await database.describing(handles), names: names)
    }

    /// The one characteristic a reference names (a handle: the characteristic whose value or declaration it is),
    /// with its names. Throws `CharacteristicLookupError` for none or several, a `GATTError` for the peer's.
    public func characteristic(_ reference: CharacteristicReference) async throws -> CharacteristicCatalog.Entry {
        // A handle needs no user description; a name may be any of them.
        let catalog: CharacteristicCatalog
        if case .name = reference {
            catalog = try await self.catalog(describing: nil)
        } else {
            let services = try await database.discovered().services
            let found = services.flatMap(\.characteristics).filter { c in
                switch reference {
                case .handle(let h): return c.valueHandle == h || c.declarationHandle == h
                case .uuid(let u): return c.uuid == u
                case .name: return false
                }
            }
            catalog = try await self.catalog(describing: Set(found.map(\.valueHandle)))
        }
        let matches = catalog.matching(reference)
        if matches.count == 1 {
            // A name or UUID resolved in a cached database: the peer's declaration confirms it first (a raw handle
            // is sent as given). A mismatch rediscovered the database: resolve again there.
            if case .handle = reference { return matches[0] }
            guard try await database.verify(matches[0].characteristic) else { return try await characteristic(reference) }
            return matches[0]
        }
        var profileUUID: BluetoothUUID?
        if case .name(let n) = reference { profileUUID = names.uuid(named: n) }
        throw CharacteristicLookupError(reference: reference, reason: matches.isEmpty ? .none(known: catalog.names) : .several(matches),
                                        server: database.client.label, profileUUID: profileUUID)
    }

    /// The name of the characteristic whose value is at `handle`, if the server says: from what this connection has
    /// discovered, else from a discovery of the few handles around it (Part G §4.6.1) and their User Description
    /// (§4.8.2). For an error's words after the fact, so that a success costs nothing; nil when nothing says.
    public func label(ofValueHandle handle: UInt16) async -> String? {
        let client = database.client
        guard !client.isClosed else { return nil }
        if let known = database.known,
           let c = known.services.flatMap(\.characteristics).first(where: { $0.valueHandle == handle }),
           known.described.contains(handle) {
            return names.label(c.uuid, userDescription: known.descriptions[handle])
        }
        guard handle > 1, handle < 0xFFF0 else { return nil }
        let window = ATTHandleRange(start: handle - 1, end: handle + 6)
        guard let chars = try? await client.discoverCharacteristics(in: window),
              let c = chars.first(where: { $0.valueHandle == handle }) else { return nil }
        if let name = names.name(of: c.uuid) { return name }
        let end = chars.first { $0.declarationHandle > handle }.map { $0.declarationHandle - 1 } ?? window.end
        var description: String?
        if end > handle, let descriptions = try? await client.read(uuid: .characteristicUserDescription,
                                                                 in: ATTHandleRange(start: handle + 1, end: end)),
           let text = descriptions.first.flatMap({ String(validating: $0.value, as: UTF8.self) }), !text.isEmpty {
            description = text
        }
        return names.label(c.uuid, userDescription: description)
    }
}
