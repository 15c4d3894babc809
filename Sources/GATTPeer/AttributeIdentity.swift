// What a value read is, whatever way it was asked for: by name, by UUID or by a raw handle. Found from what is known
// without sending anything (the database this connection discovered, else the GATT cache's stored copy) and from the
// UUID a read by type asked for (Read By Type returns only attributes of that type, Core Spec Vol 3 Part F
// §3.4.4.1); a raw handle read stays raw where neither knows the handle. So a read by handle never costs a
// discovery, and a value is named and decoded alike however it was read.
import ATTStack
import GATTClient
import GATTVocabulary

/// What a value read from the peer is: the attribute's type and what output calls it.
public struct AttributeIdentity: Sendable, Equatable {
    /// Where the identity comes from.
    public enum Source: String, Sendable, Equatable {
        /// The database discovered (or taken from the cache and kept) on this connection.
        case connection
        /// The GATT cache's stored copy for this peer, as stored: nothing was sent to confirm it.
        case cache
        /// The UUID of a read by type: every value it returns is of that type.
        case uuid
    }

    /// The attribute's handle.
    public var handle: UInt16
    /// The attribute's type: a characteristic's UUID for its value, a descriptor's own UUID for a descriptor.
    public var uuid: BluetoothUUID
    /// What output calls it: a value's label (`CharacteristicNames.label`: the profile's name, the User Description,
    /// the UUID's well-known name); a descriptor's name with its characteristic's ("Client Characteristic
    /// Configuration of scanState"). Nil when nothing names it.
    public var label: String?
    /// A descriptor (Part G §3.3.3), not a characteristic value.
    public var isDescriptor: Bool
    /// A descriptor's characteristic (its value handle), when the database is known.
    public var characteristicHandle: UInt16?
    public var source: Source

    public init(handle: UInt16, uuid: BluetoothUUID, label: String?, isDescriptor: Bool = false,
                characteristicHandle: UInt16? = nil, source: Source) {
        self.handle = handle
        self.uuid = uuid
        self.label = label
        self.isDescriptor = isDescriptor
        self.characteristicHandle = characteristicHandle
        self.source = source
    }
}

/// Why a value read is not identified (and so printed raw).
public enum AttributeNotIdentified: Error, Sendable, Equatable {
    /// A handle read as given: no database of the peer is known on this connection, and the GATT cache keeps none.
    case noDatabase(handle: UInt16)
    /// The database known (`source`) has no characteristic value or descriptor at the handle (a declaration, or a
    /// database that changed since it was cached).
    case notInDatabase(handle: UInt16, source: AttributeIdentity.Source)

    public var handle: UInt16 {
        switch self {
        case .noDatabase(let h), .notInDatabase(let h, _): return h
        }
    }
}

/// A database known without sending anything: its services, the User Descriptions read, and where it comes from.
public struct DatabaseWithoutTraffic: Sendable {
    public var services: [GATTService]
    public var descriptions: [UInt16: String]
    public var source: AttributeIdentity.Source

    public init(services: [GATTService], descriptions: [UInt16: String] = [:], source: AttributeIdentity.Source) {
        self.services = services
        self.descriptions = descriptions
        self.source = source
    }
}

extension BluetoothUUID {
    /// A descriptor's type (the Assigned Numbers' GATT descriptors, 0x2900-0x29FF): a read by this type reads
    /// descriptors, each of some characteristic.
    public var isDescriptorType: Bool {
        if case .bit16(let v) = BluetoothUUID(string: description) ?? self { return (0x2900...0x29FF).contains(v) }
        return false
    }
}

extension CharacteristicLookup {
    /// The database known without sending anything: this connection's, else the GATT cache's stored copy for the
    /// peer (unconfirmed: a name from it may be stale after the peer changed its database); nil when neither.
    public func databaseWithoutTraffic() -> DatabaseWithoutTraffic? {
        if let known = database.known {
            return DatabaseWithoutTraffic(services: known.services, descriptions: known.descriptions, source: .connection)
        }
        guard let store = database.store, let stored = try? store.load(target: database.target, adapter: database.adapter) else { return nil }
        return DatabaseWithoutTraffic(services: stored.services, source: .cache)
    }

    /// What each value of a read is (`handles`: those the read returned, in order), as `identify(_:readAs:in:names:)`
    /// says over `databaseWithoutTraffic()`. The one case that sends anything: a read by a descriptor's UUID with no
    /// database known, whose descriptors' characteristics are found by discovery after the read (a failed
    /// discovery leaves them unnamed, the values still decoded by their UUID).
    public func identify(_ handles: [UInt16], readAs reference: CharacteristicReference) async -> [Result<AttributeIdentity, AttributeNotIdentified>] {
        var known = databaseWithoutTraffic()
        if known == nil, case .uuid(let u) = reference, u.isDescriptorType, let found = try? await database.discovered() {
            known = DatabaseWithoutTraffic(services: found.services, descriptions: found.descriptions, source: .connection)
        }
        return handles.map { Self.identify($0, readAs: reference, in: known, names: names) }
    }

    /// What the value at `handle` is, read as `reference` asked, from `known` and `names` alone (nothing is sent):
    /// a characteristic value or a descriptor of `known` (a read by UUID takes it only where its type is that UUID);
    /// else, for a read by UUID, the UUID itself; else not identified, saying why.
    public static func identify(_ handle: UInt16, readAs reference: CharacteristicReference, in known: DatabaseWithoutTraffic?,
                                names: CharacteristicNames) -> Result<AttributeIdentity, AttributeNotIdentified> {
        var asked: BluetoothUUID?
        if case .uuid(let u) = reference { asked = u }
        if let known {
            for c in known.services.flatMap(\.characteristics) {
                if c.valueHandle == handle, asked == nil || asked == c.uuid {
                    return .success(AttributeIdentity(handle: handle, uuid: c.uuid, label: names.label(c.uuid, userDescription: known.descriptions[handle]),
                                                      source: known.source))
                }
                if let d = c.descriptors.first(where: { $0.handle == handle }), asked == nil || asked == d.uuid {
                    let owner = names.label(c.uuid, userDescription: known.descriptions[c.valueHandle]) ?? c.uuid.description
                    return .success(AttributeIdentity(handle: handle, uuid: d.uuid, label: "\(d.uuid.name ?? d.uuid.description) of \(owner)",
                                                      isDescriptor: true, characteristicHandle: c.valueHandle, source: known.source))
                }
            }
        }
        if let asked {
            return .success(AttributeIdentity(handle: handle, uuid: asked, label: asked.isDescriptorType ? asked.name : names.label(asked, userDescription: nil),
                                              isDescriptor: asked.isDescriptorType, source: .uuid))
        }
        return .failure(known.map { .notInDatabase(handle: handle, source: $0.source) } ?? .noDatabase(handle: handle))
    }
}
