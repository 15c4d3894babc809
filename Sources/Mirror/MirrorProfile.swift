// The mirror's UUIDs, enums and limits, read from a JSON profile (never hard-coded): the names are
// the mirror's own words (scanState, scanError, cloudToken, scannerAction, initDeviceForScan, cancelScan).
import ATTStack
import FoundationEssentials
import GATTVocabulary
import JSON

/// A mirror profile: the GATT service and characteristic UUIDs, the scanState / scanError enums,
/// the scannerAction command bytes and the cloudToken length limit (schema in README, issue 5).
public struct MirrorProfile: Sendable, Equatable {
    /// Characteristics every profile must name.
    public static let requiredCharacteristics = ["scanState", "scanError", "cloudToken", "scannerAction",
                                                 "wifiNumNetworks", "wifiNetworkSSIDEnum", "wifiSetSSID", "wifiConnectionStatus"]
    /// Commands every profile must name.
    public static let requiredCommands = ["wifiScan", "initDeviceForScan", "reboot", "cancelScan"]
    /// scanState names the scan procedure relies on.
    public static let requiredScanStates = ["invalid", "complete", "error"]

    public var name: String
    public var service: BluetoothUUID
    /// Every characteristic the profile names (the required ones and any extra).
    public var characteristics: [String: BluetoothUUID]
    public var cloudTokenMaxLength: Int
    public var scanStates: [UInt8: String]
    public var scanErrors: [UInt8: String]
    public var commands: [String: UInt8]
    /// wifiConnectionStatus values (optional in the file; the simulator's when absent).
    public var wifiConnectionStatuses: [UInt8: String]
    /// The names the result ZIP must hold (optional `resultEntries`; none: any readable ZIP). An upload without
    /// them fails the scan (outcome badUpload).
    public var resultEntries: [String] = []
    /// What a characteristic's value asks of the link, by name (its optional `security` and `minKeySize`; Vol 3
    /// Part F §3.2.5): the simulator serves it for reads, writes and subscriptions. Absent: any link.
    public var security: [String: GATTSecurityRequirement] = [:]

    /// The UUID of a named characteristic (every required one is present after parsing).
    public func uuid(_ characteristic: String) -> BluetoothUUID? { characteristics[characteristic] }
    public var scanState: BluetoothUUID { characteristics["scanState"]! }
    public var scanError: BluetoothUUID { characteristics["scanError"]! }
    public var cloudToken: BluetoothUUID { characteristics["cloudToken"]! }
    public var scannerAction: BluetoothUUID { characteristics["scannerAction"]! }
    public var wifiNumNetworks: BluetoothUUID { characteristics["wifiNumNetworks"]! }
    public var wifiNetworkSSIDEnum: BluetoothUUID { characteristics["wifiNetworkSSIDEnum"]! }
    public var wifiSetSSID: BluetoothUUID { characteristics["wifiSetSSID"]! }
    public var wifiConnectionStatus: BluetoothUUID { characteristics["wifiConnectionStatus"]! }

    /// The profile's name for a characteristic UUID, or nil.
    public func characteristicName(_ uuid: BluetoothUUID) -> String? {
        characteristics.first { $0.value == uuid }?.key
    }

    /// The names the profile gives the UUIDs of `services`, by UUID text: each of its characteristics found there,
    /// and its service as "mirror service" (what `mirror gatt` calls the UUIDs that are not well known).
    public func names(in services: [GATTService]) -> [String: String] {
        var names: [String: String] = [:]
        for c in services.flatMap(\.characteristics) {
            if let name = characteristicName(c.uuid) { names[c.uuid.description] = name }
        }
        if services.contains(where: { $0.uuid == service }) { names[service.description] = "mirror service" }
        return names
    }

    /// The bytes a characteristic's values are named by, by name: scannerAction's commands, scanState's,
    /// scanError's and wifiConnectionStatus's names; nil for any other characteristic (a name of the profile's).
    public func namedValues(of characteristic: String?) -> [String: UInt8]? {
        func byName(_ t: [UInt8: String]) -> [String: UInt8] { Dictionary(t.map { ($1, $0) }, uniquingKeysWith: { a, _ in a }) }
        switch characteristic {
        case "scannerAction": return commands
        case "scanState": return byName(scanStates)
        case "scanError": return byName(scanErrors)
        case "wifiConnectionStatus": return byName(wifiConnectionStatuses)
        default: return nil
        }
    }

    /// A command byte by name (every required one is present after parsing).
    public func command(_ name: String) -> UInt8? { commands[name] }
    /// The command's name for a scannerAction byte ("initDeviceForScan"), or "unknown(0x37)".
    public func commandName(_ byte: UInt8) -> String {
        commands.filter { $0.value == byte }.map(\.key).sorted().first ?? "unknown(\(ATTHex.byte(byte)))"
    }
    public var wifiScanCommand: UInt8 { commands["wifiScan"]! }
    public var initDeviceForScanCommand: UInt8 { commands["initDeviceForScan"]! }
    public var rebootCommand: UInt8 { commands["reboot"]! }
    public var cancelScanCommand: UInt8 { commands["cancelScan"]! }

    /// "error", or "unknown(0x07)" for a byte the profile does not name.
    public func scanStateName(_ byte: UInt8) -> String { Self.name(byte, in: scanStates) }
    public func scanErrorName(_ byte: UInt8) -> String { Self.name(byte, in: scanErrors) }
    public func wifiStatusName(_ byte: UInt8) -> String { Self.name(byte, in: wifiConnectionStatuses) }
    public func scanStateByte(_ name: String) -> UInt8? { scanStates.first { $0.value == name }?.key }
    public func scanErrorByte(_ name: String) -> UInt8? { scanErrors.first { $0.value == name }?.key }
    public func wifiStatusByte(_ name: String) -> UInt8? { wifiConnectionStatuses.first { $0.value == name }?.key }

    static func name(_ byte: UInt8, in table: [UInt8: String]) -> String {
        table[byte] ?? "unknown(\(ATTHex.byte(byte)))"
    }

    /// The default wifiConnectionStatus table (the simulator's; a real mirror is known to report only notConnected).
    public static let defaultWiFiStatuses: [UInt8: String] = [0: "notConnected", 1: "connecting", 2: "connected", 3: "failed"]

    /// Reads and checks a profile file.
    public static func load(path: String) throws(MirrorProfileError) -> MirrorProfile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw MirrorProfileError(source: path, problem: "cannot read the file")
        }
        return try parse(data, source: path)
    }

    /// Parses and checks profile JSON; `source` names it in errors.
    public static func parse(_ data: Data, source: String) throws(MirrorProfileError) -> MirrorProfile {
        func fail(_ problem: String) -> MirrorProfileError { MirrorProfileError(source: source, problem: problem) }
        let object: JSONValue
        do { object = try parseJSON(bytes: Array(data)) } catch {
            throw fail("not valid JSON (\(error))")
        }
        guard let root = object.fields.map(Dictionary.init(uniqueKeysWithValues:)) else {
            throw fail("the top level is not a JSON object")
        }
        guard let name = root["name"]?.string else { throw fail("missing \"name\" (a string)") }
        guard let serviceText = root["service"]?.string else { throw fail("missing \"service\" (a UUID string)") }
        guard let service = BluetoothUUID(string: serviceText) else { throw fail("\"service\": \(serviceText) is not a UUID") }
        guard let chars = root["characteristics"]?.fields else { throw fail("missing \"characteristics\" (an object of name: UUID)") }
        var characteristics: [String: BluetoothUUID] = [:]
        var security: [String: GATTSecurityRequirement] = [:]
        for (key, value) in chars {
            let entry = try characteristicEntry(key, value, source: source)
            characteristics[key] = entry.uuid
            if let requirement = entry.security { security[key] = requirement }
        }
        for required in requiredCharacteristics where characteristics[required] == nil {
            throw fail("missing required characteristic \"\(required)\"")
        }
        guard let maxLength = root["cloudTokenMaxLength"]?.integer else {
            throw fail("missing \"cloudTokenMaxLength\" (a number)")
        }
        guard maxLength > 0 && maxLength <= ATTMTU.maximumAttributeValue else {
            throw fail("\"cloudTokenMaxLength\" \(maxLength) is outside 1...\(ATTMTU.maximumAttributeValue)")
        }
        let scanStates = try byteTable(root, "scanStates", source: source, required: true)
        for required in requiredScanStates where !scanStates.values.contains(required) {
            throw fail("\"scanStates\" has no \"\(required)\" value")
        }
        let scanErrors = try byteTable(root, "scanErrors", source: source, required: true)
        guard let commandObject = root["commands"]?.fields else { throw fail("missing \"commands\" (an object of name: byte)") }
        var commands: [String: UInt8] = [:]
        for (key, value) in commandObject {
            guard let n = value.integer, let byte = UInt8(exactly: n) else {
                throw fail("command \"\(key)\": \(value.text) is not a byte (0-255)")
            }
            commands[key] = byte
        }
        for required in requiredCommands where commands[required] == nil {
            throw fail("missing required command \"\(required)\"")
        }
        var wifi = try byteTable(root, "wifiConnectionStatuses", source: source, required: false)
        if wifi.isEmpty { wifi = defaultWiFiStatuses }
        var resultEntries: [String] = []
        if let value = root["resultEntries"] {
            guard let items = value.items, case let names = items.compactMap(\.string), names.count == items.count else {
                throw fail("\"resultEntries\": \(value.text) is not an array of names")
            }
            resultEntries = names
        }
        return MirrorProfile(name: name, service: service, characteristics: characteristics, cloudTokenMaxLength: maxLength,
                             scanStates: scanStates, scanErrors: scanErrors, commands: commands, wifiConnectionStatuses: wifi,
                             resultEntries: resultEntries, security: security)
    }

    /// The fields a characteristic's object form may hold.
    static let characteristicFields = ["uuid", "security", "minKeySize"]

    /// One `characteristics` entry: "NAME": "UUID", or "NAME": {"uuid": "UUID", "security": "encrypted" |
    /// "authenticated", "minKeySize": 7...16} (a key size alone asks for an encrypted link; Vol 3 Part H §2.3.4).
    private static func characteristicEntry(_ key: String, _ value: JSONValue, source: String) throws(MirrorProfileError)
        -> (uuid: BluetoothUUID, security: GATTSecurityRequirement?) {
        func fail(_ problem: String) -> MirrorProfileError {
            MirrorProfileError(source: source, problem: "characteristic \"\(key)\": \(problem)")
        }
        if let text = value.string {
            guard let uuid = BluetoothUUID(string: text) else { throw fail("\(text) is not a UUID string") }
            return (uuid, nil)
        }
        guard let fields = value.fields.map(Dictionary.init(uniqueKeysWithValues:)) else {
            throw fail("\(value.text) is not a UUID string (or an object with \"uuid\")")
        }
        if let unknown = fields.keys.sorted().first(where: { !characteristicFields.contains($0) }) {
            throw fail("unknown field \"\(unknown)\" (\(characteristicFields.map { "\"\($0)\"" }.joined(separator: ", ")))")
        }
        guard let text = fields["uuid"]?.string, let uuid = BluetoothUUID(string: text) else {
            throw fail("\"uuid\": \(fields["uuid"]?.text ?? "missing"), expected a UUID string")
        }
        var requirement: GATTSecurityRequirement?
        if let level = fields["security"] {
            let names = GATTSecurityRequirement.levelNames
            guard let word = level.string, let found = names.first(where: { $0.0 == word }) else {
                throw fail("\"security\": \(level.text) is not one of \(names.map { "\"\($0.0)\"" }.joined(separator: ", "))")
            }
            requirement = GATTSecurityRequirement(level: found.1)
        }
        if let size = fields["minKeySize"] {
            let sizes = GATTSecurityRequirement.keySizes
            guard case .int(let n) = size, sizes.contains(n) else {
                throw fail("\"minKeySize\": \(size.text) is not a key size in octets (\(sizes.lowerBound)...\(sizes.upperBound))")
            }
            requirement = GATTSecurityRequirement(level: requirement?.level ?? .medium, minimumKeySize: n)
        }
        return (uuid, requirement)
    }

    private static func byteTable(_ root: [String: JSONValue], _ key: String, source: String, required: Bool) throws(MirrorProfileError) -> [UInt8: String] {
        guard let object = root[key] else {
            if required { throw MirrorProfileError(source: source, problem: "missing \"\(key)\" (an object of \"byte\": name)") }
            return [:]
        }
        guard let table = object.fields else {
            throw MirrorProfileError(source: source, problem: "\"\(key)\" is not an object of \"byte\": name")
        }
        var out: [UInt8: String] = [:]
        for (k, v) in table {
            let trimmed = k.lowercased().hasPrefix("0x") ? UInt8(k.dropFirst(2), radix: 16) : UInt8(k)
            guard let byte = trimmed else { throw MirrorProfileError(source: source, problem: "\"\(key)\": key \"\(k)\" is not a byte (0-255)") }
            guard let name = v.string else { throw MirrorProfileError(source: source, problem: "\"\(key)\".\"\(k)\" is not a string") }
            out[byte] = name
        }
        return out
    }

    /// The profile that ships with the project: the bundled simulator's UUIDs (profiles/mirror-sim.json).
    public static let bundled: MirrorProfile = {
        do { return try parse(Data(bundledJSON.utf8), source: "the bundled profile") } catch {
            fatalError("the bundled profile does not parse: \(error)")
        }
    }()

    /// The text of profiles/mirror-sim.json (a test checks the two are identical).
    public static let bundledJSON = #"""
{
  "name": "mirror-sim (the bundled simulator's own UUIDs; a real mirror's come from `mirror gatt`)",
  "service": "6d697272-6f72-7369-6d00-000000000000",
  "characteristics": {
    "scanState": "6d697272-6f72-7369-6d00-000000000001",
    "scanError": "6d697272-6f72-7369-6d00-000000000002",
    "cloudToken": "6d697272-6f72-7369-6d00-000000000003",
    "scannerAction": "6d697272-6f72-7369-6d00-000000000004",
    "wifiNumNetworks": "6d697272-6f72-7369-6d00-000000000005",
    "wifiNetworkSSIDEnum": "6d697272-6f72-7369-6d00-000000000006",
    "wifiSetSSID": "6d697272-6f72-7369-6d00-000000000007",
    "wifiConnectionStatus": "6d697272-6f72-7369-6d00-000000000008"
  },
  "cloudTokenMaxLength": 40,
  "resultEntries": ["mesh.ply", "measurements.json"],
  "scanStates": {
    "0": "invalid", "1": "alignScale", "2": "warmingUp", "3": "waitingForWeight", "4": "countDown",
    "5": "preCheck", "6": "scanning", "7": "postCheck", "8": "complete", "9": "error"
  },
  "scanErrors": {
    "0": "invalid", "1": "noError", "2": "scaleNotDetected", "3": "scaleNotLevel", "4": "mirrorNotLevel",
    "5": "processorBusy", "6": "internalError", "11": "scaleAlignment"
  },
  "commands": { "wifiScan": 49, "initDeviceForScan": 50, "reboot": 51, "cancelScan": 54 },
  "wifiConnectionStatuses": { "0": "notConnected", "1": "connecting", "2": "connected", "3": "failed" }
}
"""#
}

/// A profile that cannot be used: which file, and what is wrong or missing in it.
public struct MirrorProfileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var source: String
    public var problem: String
    public var description: String { "profile \(source): \(problem)" }
}
