// The Database Hash (Core Spec 5.4 Vol 3 Part G §7.3): AES-CMAC with a zero key over the GATT declarations and
// some descriptors, in handle order. One computation for the client (over what it discovered) and the server
// (GATTServer's AttributeDatabase), over libcrypto's CMAC behind the CCrypto shim.
import ATTStack
import CCrypto

/// One attribute as the Database Hash reads it: its handle, its type and its value (Vol 3 Part F §3.2).
public struct GATTHashAttribute: Sendable, Hashable {
    public var handle: UInt16
    public var type: BluetoothUUID
    public var value: [UInt8]

    public init(handle: UInt16, type: BluetoothUUID, value: [UInt8]) {
        self.handle = handle
        self.type = type
        self.value = value
    }
}

/// The octet order a server puts the Database Hash in. §7.3 defines the value as AES-CMAC's output; ATT carries a
/// multi-octet field least significant octet first (Vol 3 Part F §3.3), so PTS-qualified stacks (Zephyr's
/// `db_hash_gen`: "PTS expects hash to be in little endianness as well") serve the output reversed, while
/// bluetoothd (src/shared/gatt-db.c) serves it as it comes.
public enum GATTHashOrder: String, Sendable, CaseIterable {
    case pts, bluez

    /// The served value, from AES-CMAC's output as it comes.
    public func served(_ mac: [UInt8]) -> [UInt8] { self == .pts ? Array(mac.reversed()) : mac }
}

/// Why a CMAC could not be computed: libcrypto is missing (dlerror's text) or refused.
public struct GATTCryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: String
    public init(_ problem: String) { self.problem = problem }
    public var description: String { "AES-CMAC: \(problem)" }
}

/// AES-128-CMAC (RFC 4493; Core Spec 5.4 Vol 3 Part H §2.2.5), libcrypto's behind the shim.
public enum AESCMAC {
    /// The 16-byte MAC of `message` under the 16-byte `key`, in the order CMAC produces it.
    public static func mac(key: [UInt8], message: [UInt8]) throws(GATTCryptoError) -> [UInt8] {
        precondition(key.count == 16, "AES-128 takes a 16-byte key")
        var out = [UInt8](repeating: 0, count: 16)
        let ok = key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o in ccr_aes_cmac(k.baseAddress, m.baseAddress, m.count, o.baseAddress) }
            }
        }
        guard ok == 1 else {
            if let why = ccr_unavailable() { throw GATTCryptoError(String(cString: why)) }
            throw GATTCryptoError("libcrypto's EVP_MAC refused the computation")
        }
        return out
    }
}

/// The Database Hash of Vol 3 Part G §7.3.
public enum GATTDatabaseHash {
    /// Hashed with their value (§7.3.1): primary and secondary service, include and characteristic declarations,
    /// Characteristic Extended Properties.
    public static let typesWithValue: Set<BluetoothUUID> = [
        .primaryService, .secondaryService, .include, .characteristic, .characteristicExtendedProperties,
    ]
    /// Hashed by handle and type only (§7.3.1): User Description, Client and Server Characteristic Configuration,
    /// Presentation Format, Aggregate Format.
    public static let typesWithoutValue: Set<BluetoothUUID> = [
        .characteristicUserDescription, .clientCharacteristicConfiguration, .serverCharacteristicConfiguration,
        .characteristicPresentationFormat, .characteristicAggregateFormat,
    ]

    /// The message m of §7.3.1: for each hashed attribute in handle order, its handle and 16-bit type (little
    /// endian, as on the wire), then its value where the spec says so. Other attributes are left out.
    public static func message(_ attributes: some Sequence<GATTHashAttribute>) -> [UInt8] {
        var m: [UInt8] = []
        for a in attributes.sorted(by: { $0.handle < $1.handle }) {
            let withValue = typesWithValue.contains(a.type)
            guard withValue || typesWithoutValue.contains(a.type), let type = a.type.uuid16 else { continue }
            m += [UInt8(a.handle & 0xFF), UInt8(a.handle >> 8), UInt8(type & 0xFF), UInt8(type >> 8)]
            if withValue { m += a.value }
        }
        return m
    }

    /// The 16-byte Database Hash: AES-CMAC with a zero key over `message` (§7.3.1), in CMAC's byte order, which
    /// is the value a server returns for 0x2B2A (BlueZ's src/shared/gatt-db.c serves it so).
    public static func compute(_ attributes: some Sequence<GATTHashAttribute>) throws(GATTCryptoError) -> [UInt8] {
        try AESCMAC.mac(key: [UInt8](repeating: 0, count: 16), message: message(attributes))
    }

    /// The attributes of a discovered database that the hash reads, rebuilt from discovery: the declarations'
    /// values as a server encodes them (Part G §3.1-§3.3.1) and the descriptors. Nil when a Characteristic
    /// Extended Properties descriptor has no value read (`GATTDescriptor.value`): then the hash is unknown.
    public static func attributes(of services: [GATTService]) -> [GATTHashAttribute]? {
        var out: [GATTHashAttribute] = []
        for s in services {
            out.append(GATTHashAttribute(handle: s.startHandle, type: s.isPrimary ? .primaryService : .secondaryService,
                                         value: s.uuid.attWireBytes))
            for i in s.includedServices {
                // The included service's UUID is in the declaration only when it is 16-bit (§3.2).
                out.append(GATTHashAttribute(handle: i.declarationHandle, type: .include,
                                             value: le16(i.startHandle) + le16(i.endHandle) + (i.uuid.uuid16.map(le16) ?? [])))
            }
            for c in s.characteristics {
                out.append(GATTHashAttribute(handle: c.declarationHandle, type: .characteristic,
                                             value: [c.properties.rawValue] + le16(c.valueHandle) + c.uuid.attWireBytes))
                for d in c.descriptors where typesWithValue.contains(d.uuid) || typesWithoutValue.contains(d.uuid) {
                    if d.uuid == .characteristicExtendedProperties {
                        guard let value = d.value else { return nil }
                        out.append(GATTHashAttribute(handle: d.handle, type: d.uuid, value: value))
                    } else {
                        out.append(GATTHashAttribute(handle: d.handle, type: d.uuid, value: []))
                    }
                }
            }
        }
        return out
    }

    /// The hashes bluetoothd serves instead of §7.3's (src/shared/gatt-db.c, gen_hash_m), each with its BlueZ
    /// versions. Every version leaves out Extended Properties; since 5.80 (commit 4465c5777, a NULL check) it also
    /// leaves out the attributes whose value its database does not store, and a D-Bus application's descriptors
    /// and every Client Characteristic Configuration are served through callbacks, so the declarations are left.
    /// Nil when an Extended Properties value is unknown. A peer serving one of these is a BlueZ peer whose database
    /// is the one discovered.
    public static func blueZHashes(services: [GATTService]) throws(GATTCryptoError) -> [(versions: String, hash: [UInt8])]? {
        guard let all = attributes(of: services) else { return nil }
        return try blueZHashes(all)
    }

    /// The same, over the attributes §7.3 hashes (`attributes(of:)`'s, or a checker's own walk).
    public static func blueZHashes(_ all: [GATTHashAttribute]) throws(GATTCryptoError) -> [(versions: String, hash: [UInt8])] {
        let declarations: Set<BluetoothUUID> = [.primaryService, .secondaryService, .include, .characteristic]
        return [
            ("BlueZ 5.79 and earlier", try compute(all.filter { $0.type != .characteristicExtendedProperties })),
            ("BlueZ 5.80 and later", try compute(all.filter { declarations.contains($0.type) })),
        ]
    }

    /// The order in which `served` is `computed` (AES-CMAC's output as it comes); nil when it is in neither.
    public static func order(computed: [UInt8], served: [UInt8]) -> GATTHashOrder? {
        GATTHashOrder.allCases.first { $0.served(computed) == served }
    }

    /// The hash of a discovered database; nil when an Extended Properties value is unknown (`attributes(of:)`).
    public static func compute(services: [GATTService]) throws(GATTCryptoError) -> [UInt8]? {
        guard let attributes = attributes(of: services) else { return nil }
        return try compute(attributes)
    }
}


