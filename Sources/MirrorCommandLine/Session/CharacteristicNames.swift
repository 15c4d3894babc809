// Names wherever a handle goes: the one resolver from HANDLE|UUID|NAME to a characteristic, over the GATT client's
// discovery (Core Spec Vol 3 Part G §4.4-4.7) and its Characteristic User Descriptions (0x2901, §3.3.3.2).
// One per connection (Session), so that `mirror shell` and every one-shot command resolve alike.
import ATTStack
import GATTClient
import GATTVocabulary

/// The characteristics of a server's database with the names a user may call them by.
struct CharacteristicCatalog: Sendable {
    struct Entry: Sendable {
        var characteristic: GATTCharacteristic
        /// The profile's name for its UUID ("cloudToken").
        var profileName: String?
        /// Its Characteristic User Description, when the server has one and it was read.
        var userDescription: String?
        /// What output calls it (`Session.label`): the profile's name, the user description, the UUID's name.
        var label: String?

        /// "0x0012 6d697272-...-000000000003 cloudToken"
        var candidate: String {
            "\(ATTHex.handle(characteristic.valueHandle)) \(characteristic.uuid)" + (label.map { " \($0)" } ?? "")
        }
    }

    var entries: [Entry]

    /// The entry whose value (or declaration) is at `handle`.
    func entry(at handle: UInt16) -> Entry? {
        entries.first { $0.characteristic.valueHandle == handle || $0.characteristic.declarationHandle == handle }
    }

    /// Every name a user may give here, the profile's and the user descriptions, in handle order, once each.
    var names: [String] {
        var seen = Set<String>()
        return entries.flatMap { [$0.profileName, $0.userDescription].compactMap { $0 } }.filter { seen.insert($0).inserted }
    }

    /// The entries a UUID or a name picks: a name matches exactly, else ignoring case.
    func matching(_ reference: CharacteristicReference) -> [Entry] {
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

extension Session {
    /// The value handle `reference` names: a handle as given, with no traffic; a UUID or a name by discovery,
    /// exactly one characteristic, else a usage error (exit status 2) listing the candidates or the names known.
    func resolve(_ reference: CharacteristicReference, command: String?) async throws -> UInt16 {
        if case .handle(let h) = reference { return h }
        let entry = try await characteristic(reference, command: command)
        // The engine names the handle in what it says later, a timeout above all: after an ATT timeout the bearer
        // is closed (Part F §3.3.3), so no name can be looked up then.
        if let label = entry.label, client.name(of: entry.characteristic.valueHandle) == nil {
            client.setName(label, for: entry.characteristic.valueHandle)
        }
        return entry.characteristic.valueHandle
    }

    /// The one characteristic a UUID or name names (a handle: the characteristic whose value or declaration it
    /// is), with its names. Throws a usage error for none or several.
    func characteristic(_ reference: CharacteristicReference, command: String?) async throws -> CharacteristicCatalog.Entry {
        // A handle needs no user description; a name may be any of them.
        let catalog: CharacteristicCatalog
        if case .name = reference {
            catalog = try await self.catalog(describing: nil)
        } else {
            let services = try await discovered().services
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
            // A name or UUID resolved in a cached database: the peer's declaration confirms it first (a raw
            // handle is sent as given). A mismatch rediscovered the database: resolve again there.
            if case .handle = reference { return matches[0] }
            guard let entry = try await verifiedFromCache(matches[0]) else { return try await characteristic(reference, command: command) }
            return entry
        }
        let token = reference.description
        if matches.count > 1 {
            let what = if case .uuid = reference { "UUID \(token)" } else { "\"\(token)\"" }
            throw UsageError("\(what) names \(matches.count) characteristics of \(client.label): "
                             + matches.map(\.candidate).joined(separator: ", ") + "; give one by its value handle",
                             token: token, command: command)
        }
        let known = catalog.names
        let names = "names known: " + (known.isEmpty ? "none (no profile name matches a characteristic there, and it has no user descriptions)" : known.joined(separator: ", "))
        switch reference {
        case .handle(let h):
            throw UsageError("handle \(ATTHex.handle(h)) is not a characteristic of \(client.label)", token: token, command: command)
        case .uuid(let u):
            throw UsageError("no characteristic of \(client.label) has UUID \(u)", token: token, command: command)
        case .name(let n):
            if let uuid = profile.uuid(n) {
                throw UsageError("\"\(n)\" is the profile's name for \(uuid), and no characteristic of \(client.label) has that UUID; \(names)",
                                 token: token, command: command)
            }
            throw UsageError("no characteristic of \(client.label) is named \"\(n)\"; \(names)", token: token, command: command)
        }
    }

    /// The database with names, discovered once per connection; the user descriptions of `describing` (value
    /// handles; nil: every characteristic) read if not read before (`GATTDatabaseCache.describing`).
    func catalog(describing handles: Set<UInt16>?) async throws -> CharacteristicCatalog {
        let done = try await databaseCache.describing(handles)
        let characteristics = done.services.flatMap(\.characteristics)
        return CharacteristicCatalog(entries: characteristics.map { c in
            let description = done.descriptions[c.valueHandle]
            return CharacteristicCatalog.Entry(characteristic: c, profileName: profile.characteristicName(c.uuid),
                                               userDescription: description, label: label(c.uuid, userDescription: description))
        })
    }

    /// The database as discovered on this connection (Part G §4.4-4.7, once), or from the GATT cache when the
    /// peer's Database Hash matches the cached copy's (`GATTDatabaseCache.discovered`).
    func discovered() async throws(GATTError) -> GATTKnownDatabase { try await databaseCache.discovered() }

    /// What a value at `handle` is, when this connection knows the database (discovered or cached; a raw HANDLE
    /// alone discovers nothing): the label of its characteristic (or descriptor) and its decoded form (ValueFormatter).
    func meaning(of bytes: [UInt8], at handle: UInt16) -> (name: String?, decoded: String?) {
        guard let known = databaseCache.known else { return (nil, nil) }
        for c in known.services.flatMap(\.characteristics) {
            if c.valueHandle == handle {
                let name = label(c.uuid, userDescription: known.descriptions[c.valueHandle])
                return (name, ValueFormatter.decode(bytes, uuid: c.uuid, name: name, profile: profile))
            }
            if let d = c.descriptors.first(where: { $0.handle == handle }) {
                let name = self.name(of: d.uuid)
                return (name, ValueFormatter.decode(bytes, uuid: d.uuid, name: name, profile: profile))
            }
        }
        return (nil, nil)
    }

    /// The byte a profile name stands for when written to the characteristic at `handle`: a scannerAction command
    /// (initDeviceForScan), a scanState, a scanError or a wifiConnectionStatus name; case does not matter. The
    /// database is discovered if this connection has not yet (the characteristic decides which table).
    func enumByte(_ name: String, at handle: UInt16) async throws -> UInt8 {
        let characteristics = try await discovered().services.flatMap(\.characteristics)
        let which = characteristics.first { $0.valueHandle == handle }.flatMap { profile.characteristicName($0.uuid) }
        let table: [String: UInt8]
        switch which {
        case "scannerAction": table = profile.commands
        case "scanState": table = Dictionary(profile.scanStates.map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        case "scanError": table = Dictionary(profile.scanErrors.map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        case "wifiConnectionStatus": table = Dictionary(profile.wifiConnectionStatuses.map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        default:
            throw UsageError("invalid value \"\(name)\": \(ATTHex.handle(handle))\(which.map { " (\($0))" } ?? "") has no named values in the profile; give hex, text:STRING or u8:N", token: name, command: "write")
        }
        guard let byte = table.first(where: { $0.key.lowercased() == name.lowercased() })?.value else {
            throw UsageError("invalid value \"\(name)\": not a name of \(which ?? "this characteristic")'s values; the profile names \(table.sorted { $0.value < $1.value }.map { "\($0.key) (\(ATTHex.byte($0.value)))" }.joined(separator: ", "))", token: name, command: "write")
        }
        return byte
    }

    /// What output calls a characteristic, in one place: the profile's name for its UUID, else its user
    /// description, else the UUID's well-known name.
    func label(_ uuid: BluetoothUUID, userDescription: String?) -> String? {
        profile.characteristicName(uuid) ?? userDescription ?? name(of: uuid)
    }
}
