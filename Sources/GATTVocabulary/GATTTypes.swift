// What GATT discovery finds: services, included services, characteristics and descriptors
// (Core Spec 5.4 Vol 3 Part G §3.1-§3.3, discovered by the procedures of §4.4-§4.7).
import ATTStack
import LinkCore

/// Characteristic Properties, the first byte of a characteristic declaration (Core Spec 5.4 Vol 3 Part G §3.3.1.1).
public struct GATTCharacteristicProperties: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let broadcast = GATTCharacteristicProperties(rawValue: 0x01)
    public static let read = GATTCharacteristicProperties(rawValue: 0x02)
    public static let writeWithoutResponse = GATTCharacteristicProperties(rawValue: 0x04)
    public static let write = GATTCharacteristicProperties(rawValue: 0x08)
    public static let notify = GATTCharacteristicProperties(rawValue: 0x10)
    public static let indicate = GATTCharacteristicProperties(rawValue: 0x20)
    public static let authenticatedSignedWrites = GATTCharacteristicProperties(rawValue: 0x40)
    public static let extendedProperties = GATTCharacteristicProperties(rawValue: 0x80)

    /// Each property with its name, in bit order.
    public static let named: [(GATTCharacteristicProperties, String)] = [
        (.broadcast, "broadcast"), (.read, "read"), (.writeWithoutResponse, "writeWithoutResponse"),
        (.write, "write"), (.notify, "notify"), (.indicate, "indicate"),
        (.authenticatedSignedWrites, "authenticatedSignedWrites"), (.extendedProperties, "extendedProperties"),
    ]

    /// The names of the set properties, in bit order: ["read", "write", "notify"].
    public var names: [String] { Self.named.compactMap { contains($0.0) ? $0.1 : nil } }

    /// "read|write|notify"
    public var description: String { names.isEmpty ? "none" : names.joined(separator: "|") }
}

/// A descriptor of a characteristic (Core Spec 5.4 Vol 3 Part G §3.3.3), found by Discover All Characteristic
/// Descriptors (§4.7.1).
public struct GATTDescriptor: Sendable, Hashable, CustomStringConvertible {
    public var handle: UInt16
    public var uuid: BluetoothUUID
    /// Its value, when read: the Characteristic Extended Properties (0x2900) that the Database Hash covers
    /// (Part G §7.3.1; `GATTClient.readHashedValues`); nil otherwise.
    public var value: [UInt8]?

    public init(handle: UInt16, uuid: BluetoothUUID, value: [UInt8]? = nil) {
        self.handle = handle
        self.uuid = uuid
        self.value = value
    }

    /// True for the Client Characteristic Configuration descriptor (0x2902).
    public var isCCCD: Bool { uuid == .clientCharacteristicConfiguration }

    public var description: String { "\(ATTHex.handle(handle)) \(uuid)" }
}

/// A characteristic (Core Spec 5.4 Vol 3 Part G §3.3): its declaration, value handle, properties, the last handle
/// that belongs to it, and its descriptors once discovered (§4.6, §4.7).
public struct GATTCharacteristic: Sendable, Hashable, CustomStringConvertible {
    public var uuid: BluetoothUUID
    /// The handle of the characteristic declaration (0x2803).
    public var declarationHandle: UInt16
    /// The handle of the characteristic value: what reads, writes and notifications use.
    public var valueHandle: UInt16
    public var properties: GATTCharacteristicProperties
    /// The last handle of this characteristic (its last descriptor), from the next declaration or the service's end.
    public var endHandle: UInt16
    /// The descriptors, when discovered (empty otherwise).
    public var descriptors: [GATTDescriptor]

    public init(uuid: BluetoothUUID, declarationHandle: UInt16, valueHandle: UInt16,
                properties: GATTCharacteristicProperties, endHandle: UInt16, descriptors: [GATTDescriptor] = []) {
        self.uuid = uuid
        self.declarationHandle = declarationHandle
        self.valueHandle = valueHandle
        self.properties = properties
        self.endHandle = endHandle
        self.descriptors = descriptors
    }

    /// The Client Characteristic Configuration descriptor, when discovered.
    public var cccd: GATTDescriptor? { descriptors.first { $0.isCCCD } }

    public var description: String { "\(ATTHex.handle(valueHandle)) \(uuid) [\(properties)]" }
}

/// An included service reference (Core Spec 5.4 Vol 3 Part G §3.2), found by Find Included Services (§4.5.1).
public struct GATTIncludedService: Sendable, Hashable {
    /// The handle of the include declaration (0x2802).
    public var declarationHandle: UInt16
    public var startHandle: UInt16
    public var endHandle: UInt16
    public var uuid: BluetoothUUID

    public init(declarationHandle: UInt16, startHandle: UInt16, endHandle: UInt16, uuid: BluetoothUUID) {
        self.declarationHandle = declarationHandle
        self.startHandle = startHandle
        self.endHandle = endHandle
        self.uuid = uuid
    }
}

/// A service (Core Spec 5.4 Vol 3 Part G §3.1): its UUID and handle range, with what discovery found inside it.
public struct GATTService: Sendable, Hashable, CustomStringConvertible {
    public var uuid: BluetoothUUID
    public var startHandle: UInt16
    public var endHandle: UInt16
    public var isPrimary: Bool
    /// Included services, when discovered.
    public var includedServices: [GATTIncludedService]
    /// Characteristics, when discovered.
    public var characteristics: [GATTCharacteristic]

    public init(uuid: BluetoothUUID, startHandle: UInt16, endHandle: UInt16, isPrimary: Bool = true,
                includedServices: [GATTIncludedService] = [], characteristics: [GATTCharacteristic] = []) {
        self.uuid = uuid
        self.startHandle = startHandle
        self.endHandle = endHandle
        self.isPrimary = isPrimary
        self.includedServices = includedServices
        self.characteristics = characteristics
    }

    public var range: ATTHandleRange { ATTHandleRange(start: startHandle, end: endHandle) }

    public var description: String { "\(ATTHex.handle(startHandle))-\(ATTHex.handle(endHandle)) \(uuid)" }
}

/// What an attribute asks of the link for one kind of access, read or write (Core Spec 5.4 Vol 3 Part F §3.2.5;
/// Part C §10.3): a level (`.low`: nothing) and optionally the shortest encryption key it takes.
public struct GATTSecurityRequirement: Sendable, Hashable, CustomStringConvertible {
    public var level: BTSecurityLevel
    /// The shortest encryption key accepted, in octets (7...16, Vol 3 Part H §2.3.4); nil: any. A key size
    /// needs an encrypted link, whatever `level` says.
    public var minimumKeySize: Int?

    public init(level: BTSecurityLevel = .low, minimumKeySize: Int? = nil) {
        self.level = level
        self.minimumKeySize = minimumKeySize
    }

    /// Nothing asked: any link.
    public static let noSecurity = GATTSecurityRequirement()
    /// An encrypted link (security mode 1 level 2: unauthenticated pairing is enough).
    public static let encrypted = GATTSecurityRequirement(level: .medium)
    /// An encrypted link with an authenticated, MITM-protected key (mode 1 level 3).
    public static let authenticated = GATTSecurityRequirement(level: .high)

    /// The encryption key sizes a requirement may name (Vol 3 Part H §2.3.4).
    public static let keySizes = 7...16

    /// True when any link will do.
    public var isNoSecurity: Bool { level == .low && minimumKeySize == nil }

    /// The words a profile uses for a level: "encrypted" (.medium), "authenticated" (.high).
    public static let levelNames: [(String, BTSecurityLevel)] = [("encrypted", .medium), ("authenticated", .high)]

    /// "encrypted", "authenticated", "encrypted (a key of 16 octets)", "none".
    public var description: String {
        var text: String
        switch level {
        case .sdp, .low: text = minimumKeySize == nil ? "none" : "encrypted"
        case .medium: text = "encrypted"
        case .high: text = "authenticated"
        case .fips: text = "authenticated (Secure Connections)"
        }
        if let minimumKeySize { text += " (a key of \(minimumKeySize) octets or more)" }
        return text
    }
}

/// How a subscription asks the server to push values (the CCCD bits, Core Spec 5.4 Vol 3 Part G §3.3.3.3).
public enum GATTSubscriptionMode: UInt16, Sendable {
    case notify = 0x0001
    case indicate = 0x0002
}

/// A characteristic declaration's value (Core Spec 5.4 Vol 3 Part G §3.3.1): properties, value handle, UUID.
public struct GATTCharacteristicDeclaration: Sendable, Equatable {
    public var properties: UInt8
    public var valueHandle: UInt16
    public var uuid: BluetoothUUID

    /// Nil unless 5 or 19 bytes (a 16- or 128-bit UUID, little-endian).
    public init?(_ value: [UInt8]) {
        guard value.count == 5 || value.count == 19, let uuid = BluetoothUUID(littleEndian: Array(value[3...])) else { return nil }
        properties = value[0]
        valueHandle = value.littleEndianUInt16(at: 1)
        self.uuid = uuid
    }
}
