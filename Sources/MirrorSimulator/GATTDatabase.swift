// The simulator's attribute table (Core Spec 5.4 Vol 3 Part G §3): GAP and GATT services, then the
// profile's mirror service with one characteristic per profile entry, each with its declaration,
// its value and, when it notifies, a Client Characteristic Configuration descriptor.
import ATTStack
import Mirror

/// One attribute of the simulator's database (Core Spec 5.4 Vol 3 Part F §3.2).
public struct SimAttribute: Sendable {
    /// What an attribute is, so the server knows where its value lives.
    public enum Role: Sendable, Equatable {
        /// A service declaration; its group ends at `end`.
        case service(end: UInt16)
        /// A characteristic declaration (value: properties, value handle, UUID).
        case declaration
        /// A characteristic value kept by the mirror model under this profile name.
        case value(name: String)
        /// A Client Characteristic Configuration descriptor of the value at `valueHandle`.
        case cccd(valueHandle: UInt16)
        /// A value fixed at build time (Device Name, Appearance, Service Changed).
        case fixed
    }
    public let handle: UInt16
    public let type: BluetoothUUID
    public var role: Role
    /// The stored value of declarations and fixed attributes.
    public var value: [UInt8]
    public let readable: Bool
    public let writable: Bool
}

/// GATT characteristic properties (Core Spec 5.4 Vol 3 Part G §3.3.1.1).
public struct GATTProperties: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let read = GATTProperties(rawValue: 0x02)
    public static let writeWithoutResponse = GATTProperties(rawValue: 0x04)
    public static let write = GATTProperties(rawValue: 0x08)
    public static let notify = GATTProperties(rawValue: 0x10)
    public static let indicate = GATTProperties(rawValue: 0x20)
}

/// The simulator's whole database, ordered by handle, with a map from profile names to value handles.
public struct GATTDatabase: Sendable {
    public private(set) var attributes: [SimAttribute] = []
    /// Profile name to value handle ("scanState" -> 0x0012).
    public private(set) var valueHandles: [String: UInt16] = [:]
    /// Value handle to the profile name.
    public private(set) var names: [UInt16: String] = [:]

    /// The attribute with `handle`, if any.
    public func attribute(_ handle: UInt16) -> SimAttribute? {
        guard handle >= 1, Int(handle) <= attributes.count else { return nil }
        return attributes[Int(handle) - 1]
    }

    /// The mirror's properties for each profile characteristic (unknown extras: read and write).
    public static func properties(of name: String) -> GATTProperties {
        switch name {
        case "scanState", "scanError", "wifiConnectionStatus": return [.read, .notify]
        case "scannerAction": return [.write, .writeWithoutResponse]
        case "cloudToken", "wifiSetSSID": return [.read, .write]
        case "wifiNumNetworks", "wifiNetworkSSIDEnum": return [.read]
        default: return [.read, .write]
        }
    }

    /// GAP (Device Name, Appearance), GATT (Service Changed) and the profile's mirror service.
    public init(profile: MirrorProfile, deviceName: String) {
        beginService(.bit16(0x1800))
        addCharacteristic(.bit16(0x2A00), [.read], role: .fixed, value: Array(deviceName.utf8))
        addCharacteristic(.bit16(0x2A01), [.read], role: .fixed, value: [0x00, 0x00])
        endService()
        beginService(.bit16(0x1801))
        addCharacteristic(.bit16(0x2A05), [.indicate], role: .fixed, value: [0x01, 0x00, 0xFF, 0xFF])
        endService()
        beginService(profile.service)
        // Required characteristics in the profile's documented order, then any extras by name.
        let extras = profile.characteristics.keys.filter { !MirrorProfile.requiredCharacteristics.contains($0) }.sorted()
        for name in MirrorProfile.requiredCharacteristics + extras {
            guard let uuid = profile.characteristics[name] else { continue }
            addCharacteristic(uuid, Self.properties(of: name), role: .value(name: name), value: [])
        }
        endService()
    }

    private var openService: Int?

    private mutating func append(_ type: BluetoothUUID, _ role: SimAttribute.Role, _ value: [UInt8], read: Bool, write: Bool) -> UInt16 {
        let handle = UInt16(attributes.count + 1)
        attributes.append(SimAttribute(handle: handle, type: type, role: role, value: value, readable: read, writable: write))
        return handle
    }

    private mutating func beginService(_ uuid: BluetoothUUID) {
        let h = append(.bit16(0x2800), .service(end: 0), attWireBytes(uuid), read: true, write: false)
        openService = Int(h) - 1
    }

    private mutating func endService() {
        guard let index = openService else { return }
        attributes[index].role = .service(end: UInt16(attributes.count))
        openService = nil
    }

    private mutating func addCharacteristic(_ uuid: BluetoothUUID, _ properties: GATTProperties, role: SimAttribute.Role, value: [UInt8]) {
        let declaration = UInt16(attributes.count + 1)
        let valueHandle = declaration + 1
        let declValue = [properties.rawValue, UInt8(valueHandle & 0xFF), UInt8(valueHandle >> 8)] + attWireBytes(uuid)
        _ = append(.bit16(0x2803), .declaration, declValue, read: true, write: false)
        let readable = properties.contains(.read)
        let writable = properties.contains(.write) || properties.contains(.writeWithoutResponse)
        _ = append(uuid, role, value, read: readable, write: writable)
        if case .value(let name) = role {
            valueHandles[name] = valueHandle
            names[valueHandle] = name
        }
        if properties.contains(.notify) || properties.contains(.indicate) {
            _ = append(.bit16(0x2902), .cccd(valueHandle: valueHandle), [0, 0], read: true, write: true)
        }
    }
}

/// A UUID as ATT carries it: 2 bytes when it has a 16-bit alias, else 16 (never 4; Vol 3 Part F §3.2.1).
func attWireBytes(_ uuid: BluetoothUUID) -> [UInt8] {
    if let short = uuid.uuid16 { return BluetoothUUID.bit16(short).littleEndianBytes }
    return BluetoothUUID.bit128(uuid.uuid128).littleEndianBytes
}
