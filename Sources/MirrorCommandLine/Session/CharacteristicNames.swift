// Names wherever a handle goes: the one resolver from HANDLE|UUID|NAME to a characteristic, over the GATT client's
// discovery (Core Spec Vol 3 Part G §4.4-4.7) and its Characteristic User Descriptions (0x2901, §3.3.3.2).
// One per connection (Session), so that `mirror shell` and every one-shot command resolve alike.
import ATTStack
import GATTClient
import GATTPeer
import GATTVocabulary
import Mirror

extension Session {
    /// The value handle `reference` names: a handle as given, with no traffic; a UUID or a name by discovery,
    /// exactly one characteristic, else a usage error (exit status 2) listing the candidates or the names known.
    func resolve(_ reference: CharacteristicReference, command: String?) async throws -> UInt16 {
        try await usage(reference, command: command) { try await peer.lookup.valueHandle(reference) }
    }

    /// The one characteristic a UUID or name names (a handle: the characteristic whose value or declaration it
    /// is), with its names (GATTPeer's CharacteristicLookup). Throws a usage error (exit status 2) for none or several.
    func characteristic(_ reference: CharacteristicReference, command: String?) async throws -> CharacteristicCatalog.Entry {
        try await usage(reference, command: command) { try await peer.lookup.characteristic(reference) }
    }

    /// `body`, a reference that names no characteristic or several a usage error (exit status 2) of `command`.
    private func usage<T>(_ reference: CharacteristicReference, command: String?, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let e as CharacteristicLookupError {
            throw UsageError(e.description, token: reference.description, command: command)
        }
    }

    /// What a value at `handle` is, when this connection knows the database (discovered or cached; a raw HANDLE
    /// alone discovers nothing): the label of its characteristic (or descriptor) and its decoded form (ValueFormatter).
    func meaning(of bytes: [UInt8], at handle: UInt16) -> (name: String?, decoded: String?) {
        let known = peer.lookup.databaseWithoutTraffic()
        guard case .success(let identity) = CharacteristicLookup.identify(handle, readAs: .handle(handle), in: known, names: peer.lookup.names) else {
            return (nil, nil)
        }
        return meaning(of: bytes, identity)
    }

    /// A value's label and decoded form (ValueFormatter, with the profile's enums) from what it is (GATTPeer's
    /// `AttributeIdentity`): alike whether it was read by name, by UUID or by handle.
    func meaning(of bytes: [UInt8], _ identity: AttributeIdentity) -> (name: String?, decoded: String?) {
        (identity.label, ValueFormatter.decode(bytes, uuid: identity.uuid, name: identity.isDescriptor ? nil : identity.label, profile: profile))
    }

    /// The byte a profile name stands for when written to the characteristic at `handle`: a scannerAction command
    /// (initDeviceForScan), a scanState, a scanError or a wifiConnectionStatus name; case does not matter. The
    /// database is discovered if this connection has not yet (the characteristic decides which table).
    func enumByte(_ name: String, at handle: UInt16) async throws -> UInt8 {
        let characteristics = try await peer.database.discovered().services.flatMap(\.characteristics)
        let which = characteristics.first { $0.valueHandle == handle }.flatMap { profile.characteristicName($0.uuid) }
        guard let table = profile.namedValues(of: which) else {
            throw UsageError("invalid value \"\(name)\": \(ATTHex.handle(handle))\(which.map { " (\($0))" } ?? "") has no named values in the profile; give hex, text:STRING or u8:N", token: name, command: "write")
        }
        guard let byte = table.first(where: { $0.key.lowercased() == name.lowercased() })?.value else {
            throw UsageError("invalid value \"\(name)\": not a name of \(which ?? "this characteristic")'s values; the profile names \(table.sorted { $0.value < $1.value }.map { "\($0.key) (\(ATTHex.byte($0.value)))" }.joined(separator: ", "))", token: name, command: "write")
        }
        return byte
    }
}
