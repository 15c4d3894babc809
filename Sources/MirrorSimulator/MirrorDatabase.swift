// The simulator's attribute table (Core Spec 5.4 Vol 3 Part G §3): GAP and GATT services, then the
// profile's mirror service with one characteristic per profile entry, each named after its profile entry.
import ATTStack
import GATTClient
import GATTServer
import Mirror
import GATTVocabulary

extension AttributeDatabase {
    /// The mirror's properties for each profile characteristic (unknown extras: read and write).
    public static func mirrorProperties(of name: String) -> GATTCharacteristicProperties {
        switch name {
        case "scanState", "scanError", "wifiConnectionStatus": return [.read, .notify]
        case "scannerAction": return [.write, .writeWithoutResponse]
        case "cloudToken", "wifiSetSSID": return [.read, .write]
        case "wifiNumNetworks", "wifiNetworkSSIDEnum": return [.read]
        default: return [.read, .write]
        }
    }

    /// GAP (Device Name, Appearance), GATT (Service Changed) and the profile's mirror service; the mirror's
    /// values are named after the profile ("scanState"), the fixed ones are unnamed. With `caching` the GATT
    /// service also has Client Supported Features and the Database Hash (Vol 3 Part G §7.2, §7.3; named
    /// "clientSupportedFeatures" and "databaseHash", the hash stored by `AttributeDatabase.databaseHash()`),
    /// and the mirror service's handles are 4 higher. With `eatt` the GATT service ends with Server Supported Features
    /// (§7.4, bit 0 EATT Supported; "serverSupportedFeatures"), after Client Supported Features (added if `caching`
    /// did not): 4 more handles without caching, 2 more with it.
    /// `addedCharacteristic`: the database after the fault change-database, with "simAdded" (read) first in the
    /// mirror service. `security` (default: the profile's) is what each named value asks of the link for reads,
    /// writes and subscriptions (Vol 3 Part F §3.2.5); Device Name is "deviceName" there.
    /// `faults`: the structural conformance faults (`SimConformanceFault`) shape the database: cccd-present declares
    /// scanState without its CCCD, gap-device-name leaves Device Name out, service-changed declares Service Changed
    /// without Indicate, supported-features leaves Client Supported Features out; extended-properties-present and
    /// characteristic-value-handle change cloudToken's declaration.
    public static func mirror(profile: MirrorProfile, deviceName: String, caching: Bool = false, eatt: Bool = false,
                              addedCharacteristic: Bool = false, hashOrder: GATTHashOrder = .pts,
                              security: [String: GATTSecurityRequirement]? = nil,
                              faults: Set<SimConformanceFault> = []) -> AttributeDatabase {
        let security = security ?? profile.security
        var withoutCCCD: [String] = []
        var database = AttributeDatabase { db in
            func characteristic(_ uuid: BluetoothUUID, _ properties: GATTCharacteristicProperties, value: [UInt8] = [], name: String) {
                let required = security[name] ?? .noSecurity
                if name == "scanState", faults.contains(.cccdPresent) {
                    // The builder adds a CCCD to every notifying characteristic: built without Notify, declared with it below.
                    withoutCCCD.append(name)
                    db.characteristic(uuid, properties.subtracting([.notify, .indicate]), value: value, name: name,
                                      readSecurity: required, writeSecurity: required)
                    return
                }
                db.characteristic(uuid, properties, value: value, name: name, readSecurity: required, writeSecurity: required)
            }
            db.service(.genericAccess)
            if !faults.contains(.gapDeviceName) {
                characteristic(.deviceName, [.read], value: Array(deviceName.utf8), name: deviceNameName)
            }
            db.characteristic(.appearance, [.read], value: [0x00, 0x00])
            db.service(.genericAttribute)
            db.characteristic(.serviceChanged, faults.contains(.serviceChanged) ? [] : [.indicate], value: [0x01, 0x00, 0xFF, 0xFF])
            if caching || eatt, !faults.contains(.supportedFeatures) {
                db.characteristic(.clientSupportedFeatures, [.read, .write], value: [0x00], name: clientSupportedFeaturesName)
            }
            if caching { db.characteristic(.databaseHash, [.read], name: databaseHashName) }
            if eatt { db.characteristic(.serverSupportedFeatures, [.read], value: [0x01], name: serverSupportedFeaturesName) }
            db.service(profile.service)
            if addedCharacteristic {
                db.characteristic(simAddedUUID, [.read], value: Array("added".utf8), name: "simAdded")
            }
            // Required characteristics in the profile's documented order, then any extras by name.
            let extras = profile.characteristics.keys.filter { !MirrorProfile.requiredCharacteristics.contains($0) }.sorted()
            for name in MirrorProfile.requiredCharacteristics + extras {
                guard let uuid = profile.characteristics[name] else { continue }
                characteristic(uuid, mirrorProperties(of: name), name: name)
            }
        }
        for name in withoutCCCD {
            database.setDeclaredProperties(of: name) { $0.union(mirrorProperties(of: name)) }
        }
        if faults.contains(.extendedPropertiesPresent) {
            database.setDeclaredProperties(of: "cloudToken") { $0.union(.extendedProperties) }
        }
        if faults.contains(.characteristicValueHandle), let value = database.handle("cloudToken"), let declaration = database.attribute(value - 1) {
            // The Characteristic Value Handle field (octets 1-2, Part G §3.3.1) one past the value's own handle.
            database.setValue([declaration.value[0]] + le16(value + 1) + declaration.value.dropFirst(3), at: declaration.handle)
        }
        if caching { database.storeDatabaseHash(order: hashOrder) }
        return database
    }

    /// Changes the Characteristic Properties octet (Vol 3 Part G §3.3.1.1) of `name`'s declaration, the handle before
    /// its value, without adding or removing a descriptor (a conformance fault's inconsistent declaration).
    mutating func setDeclaredProperties(of name: String, _ change: (GATTCharacteristicProperties) -> GATTCharacteristicProperties) {
        guard let valueHandle = handle(name), let declaration = attribute(valueHandle - 1), !declaration.value.isEmpty else { return }
        var value = declaration.value
        value[0] = change(GATTCharacteristicProperties(rawValue: value[0])).rawValue
        setValue(value, at: declaration.handle)
    }

    /// The characteristic the fault change-database adds.
    public static let simAddedUUID = BluetoothUUID(string: "6d697272-6f72-7369-6d00-0000000000ad")!

    /// The name of GAP's Device Name in the simulator's database (`--secure deviceName`).
    public static let deviceNameName = "deviceName"

    /// The names of the GATT service's caching characteristics in the simulator's database.
    public static let clientSupportedFeaturesName = "clientSupportedFeatures"
    public static let databaseHashName = "databaseHash"
    /// Server Supported Features (Vol 3 Part G §7.4) in the simulator's database, when it serves EATT.
    public static let serverSupportedFeaturesName = "serverSupportedFeatures"

    /// Stores the Database Hash of the database as it is now in its "databaseHash" value (after a change too), in
    /// `order`: PTS's (least significant octet first, as Zephyr serves it) by default, or bluetoothd's.
    public mutating func storeDatabaseHash(order: GATTHashOrder = .pts) {
        guard let h = handle(Self.databaseHashName) else { return }
        // libcrypto is missing only on a broken install: the value stays empty and a client finds no hash.
        setValue((try? databaseHash()).map(order.served) ?? [], at: h)
    }
}
