// The one attribute database of every ATT server here: services, includes, characteristics and their
// descriptors in handle order (Core Spec 5.4 Vol 3 Part F §3.2 attributes, Part G §3 the GATT declarations).
import ATTStack
import GATTVocabulary

/// What ATT lets a client do with an attribute (Core Spec 5.4 Vol 3 Part F §3.2.5).
public struct AttributePermissions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let read = AttributePermissions(rawValue: 0x01)
    public static let write = AttributePermissions(rawValue: 0x02)
}

/// One attribute (Core Spec 5.4 Vol 3 Part F §3.2): handle, type, value, permissions, and its GATT role.
public struct Attribute: Sendable {
    /// Where the attribute sits in the GATT structure (Vol 3 Part G §3).
    public enum Role: Sendable, Equatable {
        /// A primary or secondary service declaration (§3.1); its group ends at `end`.
        case service(end: UInt16)
        /// An include declaration (§3.2).
        case include
        /// A characteristic declaration (§3.3.1): properties, value handle, UUID.
        case declaration(valueHandle: UInt16)
        /// A characteristic value (§3.3.2).
        case value
        /// The Client Characteristic Configuration descriptor (§3.3.3.3) of the value at `valueHandle`:
        /// its value is kept per connection by the server.
        case cccd(valueHandle: UInt16)
        /// Any other descriptor (§3.3.3).
        case descriptor
    }

    public let handle: UInt16
    public let type: BluetoothUUID
    public internal(set) var role: Role
    /// The stored value (the server's answer unless a read handler says otherwise).
    public var value: [UInt8]
    public let permissions: AttributePermissions
    /// What the link must offer before a read, and before a write, is served (Vol 3 Part F §3.2.5; checked by
    /// `ATTServer` against `BTSecurity`, refused as `GATTSecurityRequirement.refusal(on:)` says).
    public let readSecurity: GATTSecurityRequirement
    public let writeSecurity: GATTSecurityRequirement
    /// The name the database's author gave it ("scanState"), for handlers and tests.
    public let name: String?

    public var readable: Bool { permissions.contains(.read) }
    public var writable: Bool { permissions.contains(.write) }
}

/// The attributes of one server, ordered by handle from 0x0001; built here without gaps, a clone keeps the gaps its
/// device had (Vol 3 Part F §3.2.2 asks only for increasing handles).
public struct AttributeDatabase: Sendable {
    public internal(set) var attributes: [Attribute] = []
    /// Names to handles ("scanState" -> 0x000F).
    public internal(set) var handles: [String: UInt16] = [:]

    /// The attribute with `handle`, if any.
    public func attribute(_ handle: UInt16) -> Attribute? {
        index(of: handle).map { attributes[$0] }
    }

    /// Where `handle` is in `attributes`: at handle - 1 when there are no gaps below it, else found by bisection.
    func index(of handle: UInt16) -> Int? {
        guard handle >= 1 else { return nil }
        if Int(handle) <= attributes.count, attributes[Int(handle) - 1].handle == handle { return Int(handle) - 1 }
        var (low, high) = (0, attributes.count)
        while low < high {
            let mid = (low + high) / 2
            if attributes[mid].handle < handle { low = mid + 1 } else { high = mid }
        }
        return low < attributes.count && attributes[low].handle == handle ? low : nil
    }

    /// The handle named `name`.
    public func handle(_ name: String) -> UInt16? { handles[name] }

    /// The name of the attribute at `handle`.
    public func name(of handle: UInt16) -> String? { attribute(handle)?.name }

    /// Replaces the stored value at `handle` (no permission check: the server's own update).
    public mutating func setValue(_ value: [UInt8], at handle: UInt16) {
        guard let i = index(of: handle) else { return }
        attributes[i].value = value
    }

    /// The Database Hash of this database (Core Spec 5.4 Vol 3 Part G §7.3), by the client's computation.
    public func databaseHash() throws(GATTCryptoError) -> [UInt8] {
        try GATTDatabaseHash.compute(attributes.map { GATTHashAttribute(handle: $0.handle, type: $0.type, value: $0.value) })
    }

    /// Builds a database in handle order: `service`, then its includes and characteristics, and so on.
    public init(_ build: (inout Builder) -> Void) {
        var builder = Builder()
        build(&builder)
        self = builder.finish()
    }

    init() {}

    /// Appends attributes in handle order; a service's group ends where the next service (or the database) begins.
    public struct Builder {
        var database = AttributeDatabase()
        var openService: Int?

        /// The handle the next attribute gets.
        public var nextHandle: UInt16 { (database.attributes.last?.handle ?? 0) + 1 }

        /// A primary or secondary service declaration (Vol 3 Part G §3.1); returns its handle.
        @discardableResult
        public mutating func service(_ uuid: BluetoothUUID, primary: Bool = true, name: String? = nil) -> UInt16 {
            closeService()
            let h = append(primary ? .primaryService : .secondaryService, .service(end: 0), uuid.attWireBytes, [.read], name)
            openService = Int(h) - 1
            return h
        }

        /// An include declaration (Vol 3 Part G §3.2): the UUID is in the value only when it is 16-bit.
        public mutating func include(start: UInt16, end: UInt16, uuid: BluetoothUUID) {
            var v = le16(start) + le16(end)
            if let u = uuid.uuid16 { v += le16(u) }
            append(.include, .include, v, [.read], nil)
        }

        /// A characteristic (Vol 3 Part G §3.3): its declaration, its value and, when it notifies or indicates,
        /// a CCCD (§3.3.3.3, named `name + "CCCD"`). Readable per `.read`, writable per `.write` or
        /// `.writeWithoutResponse`; the value's reads and writes need `readSecurity` and `writeSecurity`, and so does
        /// a write of its CCCD need `readSecurity` (a subscription discloses the value). Returns the value handle.
        @discardableResult
        public mutating func characteristic(_ uuid: BluetoothUUID, _ properties: GATTCharacteristicProperties,
                                            value: [UInt8] = [], name: String? = nil,
                                            readSecurity: GATTSecurityRequirement = .noSecurity,
                                            writeSecurity: GATTSecurityRequirement = .noSecurity) -> UInt16 {
            let valueHandle = nextHandle + 1
            append(.characteristic, .declaration(valueHandle: valueHandle),
                   [properties.rawValue] + le16(valueHandle) + uuid.attWireBytes, [.read], nil)
            var permissions: AttributePermissions = []
            if properties.contains(.read) { permissions.insert(.read) }
            if !properties.isDisjoint(with: [.write, .writeWithoutResponse]) { permissions.insert(.write) }
            append(uuid, .value, value, permissions, name, read: readSecurity, write: writeSecurity)
            if !properties.isDisjoint(with: [.notify, .indicate]) {
                append(.clientCharacteristicConfiguration, .cccd(valueHandle: valueHandle), [0, 0], [.read, .write],
                       name.map { $0 + "CCCD" }, write: readSecurity)
            }
            return valueHandle
        }

        /// A descriptor of the last characteristic (Vol 3 Part G §3.3.3); returns its handle.
        @discardableResult
        public mutating func descriptor(_ uuid: BluetoothUUID, value: [UInt8], permissions: AttributePermissions = [.read],
                                        name: String? = nil, readSecurity: GATTSecurityRequirement = .noSecurity,
                                        writeSecurity: GATTSecurityRequirement = .noSecurity) -> UInt16 {
            append(uuid, .descriptor, value, permissions, name, read: readSecurity, write: writeSecurity)
        }

        /// An attribute at `handle` as a device had it (a clone: handles with gaps, a service's group end as
        /// discovered); `handle` must be above every handle placed so far. A service declaration given with its end
        /// keeps that end.
        public mutating func place(_ type: BluetoothUUID, role: Attribute.Role, value: [UInt8], permissions: AttributePermissions,
                                   at handle: UInt16, name: String? = nil) {
            precondition(handle >= nextHandle, "attributes are placed in increasing handle order")
            closeService()
            database.attributes.append(Attribute(handle: handle, type: type, role: role, value: value, permissions: permissions,
                                                 readSecurity: .noSecurity, writeSecurity: .noSecurity, name: name))
            if let name { database.handles[name] = handle }
        }

        @discardableResult
        mutating func append(_ type: BluetoothUUID, _ role: Attribute.Role, _ value: [UInt8],
                             _ permissions: AttributePermissions, _ name: String?,
                             read: GATTSecurityRequirement = .noSecurity, write: GATTSecurityRequirement = .noSecurity) -> UInt16 {
            let h = nextHandle
            database.attributes.append(Attribute(handle: h, type: type, role: role, value: value, permissions: permissions,
                                                 readSecurity: read, writeSecurity: write, name: name))
            if let name { database.handles[name] = h }
            return h
        }

        mutating func closeService() {
            guard let i = openService else { return }
            database.attributes[i].role = .service(end: database.attributes.last?.handle ?? 0)
            openService = nil
        }

        mutating func finish() -> AttributeDatabase {
            closeService()
            return database
        }
    }
}

