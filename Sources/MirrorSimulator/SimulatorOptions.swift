// What the simulator does: its behaviours and faults, from the command line or a scenario file.
import Foundation
import GATTClient
import GATTServer
import JSON
import LinuxBluetooth
import LinkCore
import Mirror
import GATTVocabulary

/// A fault the simulator injects into one request to a named characteristic.
public struct SimFault: Sendable, Equatable, CustomStringConvertible {
    /// What happens to the request.
    public enum Kind: Sendable, Equatable {
        /// The mirror acts on the request but never answers it.
        case drop
        /// The answer goes out this many milliseconds late.
        case delay(milliseconds: Int)
        /// The connection closes when the request arrives: no answer, no action.
        case disconnect
        /// scanState and scanError are notified (unchanged values too) before the answer.
        case notifyFirst
        /// The database changes before the answer (a characteristic added, the mirror's handles moved, Service
        /// Changed indicated); a change-unaware client with robust caching gets Database Out Of Sync (0x12).
        case changeDatabase
    }
    public var kind: Kind
    /// The profile's name of the characteristic whose value handle the request targets.
    public var characteristic: String
    /// Which matching request it hits: 1 is the next one (the default), 2 the one after, ...
    public var occurrence = 1
    /// Parses "drop:cloudToken", "delay:scannerAction:1500", "disconnect:scannerAction", "notify-first:cloudToken";
    /// a suffix "@N" picks the Nth matching request ("delay:scannerAction:900@2").
    public init(parsing text: String) throws(SimOptionsError) {
        var body = text
        if let at = text.lastIndex(of: "@") {
            guard let n = Int(text[text.index(after: at)...]), n >= 1 else {
                throw SimOptionsError(problem: "fault \"\(text)\": @N needs a count from 1")
            }
            occurrence = n
            body = String(text[..<at])
        }
        let parts = body.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, !parts[1].isEmpty else {
            throw SimOptionsError(problem: "fault \"\(text)\": expected KIND:CHARACTERISTIC[:MS] (drop, delay, disconnect, notify-first, change-database) or a rule id (mirror-sim --list-faults)")
        }
        characteristic = parts[1]
        switch parts[0] {
        case "drop": kind = .drop
        case "disconnect": kind = .disconnect
        case "notify-first": kind = .notifyFirst
        case "change-database": kind = .changeDatabase
        case "delay":
            guard parts.count == 3, let ms = Int(parts[2]), ms >= 0 else {
                throw SimOptionsError(problem: "fault \"\(text)\": delay needs milliseconds, e.g. delay:scannerAction:1500")
            }
            kind = .delay(milliseconds: ms)
        default:
            throw SimOptionsError(problem: "fault \"\(text)\": unknown kind \(parts[0]) (drop, delay, disconnect, notify-first, change-database)")
        }
    }
    public init(_ kind: Kind, _ characteristic: String) { self.kind = kind; self.characteristic = characteristic }
    public var description: String {
        let suffix = occurrence == 1 ? "" : "@\(occurrence)"
        switch kind {
        case .drop: return "drop:\(characteristic)\(suffix)"
        case .delay(let ms): return "delay:\(characteristic):\(ms)\(suffix)"
        case .disconnect: return "disconnect:\(characteristic)\(suffix)"
        case .notifyFirst: return "notify-first:\(characteristic)\(suffix)"
        case .changeDatabase: return "change-database:\(characteristic)\(suffix)"
        }
    }
}

/// A bad simulator option or scenario file.
public struct SimOptionsError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: String
    public var description: String { "mirror-sim: \(problem)" }
}

/// How long the mirror takes for things; `fast` (the default) keeps tests quick, `realistic` paces like hardware.
public struct SimTimings: Sendable, Equatable {
    /// Each step of ALIGN_SCALE ... POST_CHECK before the next state.
    public var scanStepMilliseconds: Int
    /// From a cloudToken write while offline to the ERROR / PROCESSOR_BUSY notifications, and to the Write Response.
    public var latchNotifyMilliseconds: Int
    public var latchResponseMilliseconds: Int
    /// SCALE_ALIGNMENT is notified within this window after initDeviceForScan (a real mirror's took 63 and 92 ms).
    public var alignmentNotifyWindow: ClosedRange<Int>
    /// The Write Response to initDeviceForScan follows the SCALE_ALIGNMENT notification by this much.
    public var alignmentResponseAfterNotifyMilliseconds: Int
    /// The Write Response to wifiScan (0x31).
    public var wifiScanMilliseconds: Int
    /// From wifiSetSSID to connected (or failed).
    public var wifiJoinMilliseconds: Int
    /// From the reboot command's Write Response to the disconnect.
    public var rebootMilliseconds: Int

    public static let fast = SimTimings(scanStepMilliseconds: 15, latchNotifyMilliseconds: 5, latchResponseMilliseconds: 10,
                                        alignmentNotifyWindow: 60...90, alignmentResponseAfterNotifyMilliseconds: 10,
                                        wifiScanMilliseconds: 10, wifiJoinMilliseconds: 30, rebootMilliseconds: 20)
    public static let realistic = SimTimings(scanStepMilliseconds: 3000, latchNotifyMilliseconds: 77, latchResponseMilliseconds: 720,
                                             alignmentNotifyWindow: 60...90, alignmentResponseAfterNotifyMilliseconds: 640,
                                             wifiScanMilliseconds: 1200, wifiJoinMilliseconds: 3000, rebootMilliseconds: 300)
}

/// The body a completed scan posts: the result ZIP (mesh.ply and measurements.json), 42 bytes that are no ZIP,
/// or a ZIP without measurements.json.
public enum SimResult: String, Sendable, Equatable, CaseIterable {
    case zip
    case junk
    case partial
}

/// Everything that decides how the simulated mirror behaves.
public struct SimOptions: Sendable, Equatable {
    public var profile: MirrorProfile = .bundled
    public var deviceName = "mirror-sim"
    /// The scale is where the mirror expects it: initDeviceForScan starts a scan (else SCALE_ALIGNMENT).
    public var scaleAligned = true
    /// Wi-Fi is connected at start (else a cloudToken write latches ERROR / PROCESSOR_BUSY).
    public var wifiConnected = true
    /// The networks a wifiScan (0x31) finds.
    public var networks = ["mirror-lab", "HomeNet-5G", "Guest"]
    /// The SSID Wi-Fi is connected to at start (when connected).
    public var connectedSSID = "mirror-lab"
    /// The mirror's own cloudToken limit (the profile's cloudTokenMaxLength unless set).
    public var cloudTokenLimit: Int?
    /// What a completed scan posts (`--result`): the result ZIP, or a hostile or broken body to test the receiver.
    public var result = SimResult.zip
    /// cancelScan (0x36) resets scanState and scanError to INVALID (false: a wedged mirror that ignores it).
    public var cancelResets = true
    /// The state the mirror starts in (a latched ERROR from an earlier session, for example).
    public var initialScanState: UInt8 = 0
    public var initialScanError: UInt8 = 0
    /// The server's Rx MTU for Exchange MTU.
    public var serverMTU: UInt16 = 517
    public var timings = SimTimings.fast
    public var faults: [SimFault] = []
    /// The conformance faults (`--fault RULE-ID`): each breaks one rule of `mirror check`'s catalogue.
    public var conformanceFaults: Set<SimConformanceFault> = []
    /// Log every PDU and state change to stderr.
    public var verbose = false
    /// The GATT service serves Client Supported Features and the Database Hash (Vol 3 Part G §7.2-§7.3), with
    /// robust caching per connection (§2.5.2.1); the mirror service's handles move up by 4.
    public var caching = false
    /// The octet order of the served Database Hash (`--hash-order pts|bluez`): PTS's by default (Zephyr's and other
    /// qualified stacks'), bluetoothd's for tests of a BlueZ peer.
    public var hashOrder: GATTHashOrder = .pts
    /// The Client Supported Features each connection starts with (a bonded client's kept value, Vol 3 Part G
    /// §7.2: 1 is robust caching); default 0.
    public var clientFeaturesAtConnect: UInt8 = 0
    /// The database changes this long after the first connection opens, as the fault change-database does.
    public var changeDatabaseAfterMilliseconds: Int?
    /// Enhanced ATT bearers (Vol 3 Part F §3.2.11): the GATT service serves Server Supported Features (0x2B3A) with
    /// bit 0 set, and Client Supported Features (0x2B29) if `caching` does not; the mirror service's handles move
    /// up by 4 (by 6 with caching). mirror-sim then listens at PATH.eatt and on PSM 0x0027.
    public var eatt = false
    /// Every Enhanced ATT bearer request is refused with this L2CAP result (over unix:; over an adapter, mirror-sim
    /// does not listen on PSM 0x0027 and the kernel answers SPSM not supported).
    public var eattRefusal: L2CAPConnectionResult?
    /// What named values ask of the link beyond the profile's `security` (`--secure CHAR[:LEVEL[:KEYSIZE]]`;
    /// Vol 3 Part F §3.2.5): reads, writes and subscriptions refused with 0x05, 0x0F or 0x0C until the link has it.
    public var secure: [String: GATTSecurityRequirement] = [:]
    /// The link security a unix: connection plays (`--unix-security`): it has no link, so no BT_SECURITY to read
    /// (an LE connection's is its socket's). Default unencrypted.
    public var unixSecurity = BTSecurity.unencrypted

    public init() {}

    public var effectiveTokenLimit: Int { cloudTokenLimit ?? profile.cloudTokenMaxLength }

    /// Whether the GATT service serves the caching characteristics: `caching`, or a conformance fault that needs them.
    public var effectiveCaching: Bool { caching || conformanceFaults.contains { $0.impliesCaching } }

    /// The served Database Hash's octet order: bluetoothd's under the fault database-hash, else `hashOrder`.
    public var effectiveHashOrder: GATTHashOrder { conformanceFaults.contains(.databaseHash) ? .bluez : hashOrder }

    /// The security each named value asks for: the profile's, with `secure` over it.
    public var effectiveSecurity: [String: GATTSecurityRequirement] { profile.security.merging(secure) { $1 } }

    /// The names `--secure` takes: the profile's characteristics and GAP's Device Name.
    public var securableNames: [String] { ([AttributeDatabase.deviceNameName] + profile.characteristics.keys.sorted()) }

    /// Parses `--secure CHAR[:encrypted|authenticated][:KEYSIZE]` (default encrypted; a key size in octets, 7...16).
    static func parseSecure(_ value: String, names: [String]) throws(SimOptionsError) -> (String, GATTSecurityRequirement) {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let levels = GATTSecurityRequirement.levelNames.map(\.0).joined(separator: " or ")
        let sizes = GATTSecurityRequirement.keySizes
        func fail(_ problem: String) -> SimOptionsError {
            SimOptionsError(problem: "--secure \(value): \(problem) (expected CHAR[:\(levels.replacingOccurrences(of: " or ", with: "|"))][:KEYSIZE])")
        }
        guard let name = parts.first, !name.isEmpty, parts.count <= 3 else { throw fail("not CHAR[:LEVEL[:KEYSIZE]]") }
        guard names.contains(name) else { throw fail("no characteristic \"\(name)\" (\(names.joined(separator: ", ")))") }
        var requirement = GATTSecurityRequirement.encrypted
        for part in parts.dropFirst() {
            if let level = GATTSecurityRequirement.levelNames.first(where: { $0.0 == part })?.1 {
                requirement.level = level
            } else if let n = Int(part), sizes.contains(n) {
                requirement.minimumKeySize = n
            } else {
                throw fail("\(part) is neither \(levels) nor a key size (\(sizes.lowerBound)...\(sizes.upperBound))")
            }
        }
        return (name, requirement)
    }

    /// Parses `--unix-security none|encrypted|authenticated[:KEYSIZE]` (a 16-octet key unless given).
    static func parseUnixSecurity(_ value: String) throws(SimOptionsError) -> BTSecurity {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let sizes = GATTSecurityRequirement.keySizes
        let problem = "--unix-security: expected none, encrypted or authenticated, with :KEYSIZE (\(sizes.lowerBound)...\(sizes.upperBound)) after either of the last two, got \(value)"
        var keySize = 16
        if parts.count == 2 {
            guard let n = Int(parts[1]), sizes.contains(n) else { throw SimOptionsError(problem: problem) }
            keySize = n
        }
        switch (parts[0], parts.count) {
        case ("none", 1): return .unencrypted
        case ("encrypted", 1...2): return .encrypted(keySize: keySize)
        case ("authenticated", 1...2): return .authenticated(keySize: keySize)
        default: throw SimOptionsError(problem: problem)
        }
    }

    /// Applies a scenario file: a JSON object whose keys are the long flags without "--"
    /// ("scale": "misaligned", "wifi": "offline", "faults": ["drop:cloudToken"], ...).
    public mutating func apply(scenario data: Data, source: String) throws(SimOptionsError) {
        let object: JSONValue
        do { object = try parseJSON(bytes: Array(data)) } catch {
            throw SimOptionsError(problem: "scenario \(source): not valid JSON (\(error))")
        }
        guard let fields = object.fields else { throw SimOptionsError(problem: "scenario \(source): not a JSON object") }
        for (key, value) in fields.sorted(by: { $0.0 < $1.0 }) {
            for item in value.items ?? [value] {
                try set(key, item.text)
            }
        }
    }

    /// The long flag names (without "--") `set` takes, each with a value: `mirror-sim` refuses any other flag
    /// as unknown before it looks for a value.
    public static let keys: Set<String> = [
        "profile", "name", "scale", "wifi", "network", "networks", "ssid", "token-limit", "cancel-resets", "scan-state",
        "scan-error", "latched-error", "mtu", "pace", "step-ms", "fault", "faults", "verbose", "caching", "client-features",
        "eatt", "eatt-refuse", "change-database-after", "result", "hash-order", "secure", "unix-security",
    ]

    /// Sets one option by its long flag name (without "--").
    public mutating func set(_ key: String, _ value: String) throws(SimOptionsError) {
        func bool() throws(SimOptionsError) -> Bool {
            switch value.lowercased() {
            case "true", "yes", "1", "on": return true
            case "false", "no", "0", "off": return false
            default: throw SimOptionsError(problem: "--\(key): expected yes or no, got \(value)")
            }
        }
        func byte() throws(SimOptionsError) -> UInt8 {
            guard let b = UInt8(value) ?? (value.hasPrefix("0x") ? UInt8(value.dropFirst(2), radix: 16) : nil) else {
                throw SimOptionsError(problem: "--\(key): expected a byte, got \(value)")
            }
            return b
        }
        switch key {
        case "profile":
            do { profile = try MirrorProfile.load(path: value) } catch { throw SimOptionsError(problem: error.description) }
        case "name": deviceName = value
        case "scale":
            switch value {
            case "aligned": scaleAligned = true
            case "misaligned": scaleAligned = false
            default: throw SimOptionsError(problem: "--scale: expected aligned or misaligned, got \(value)")
            }
        case "wifi":
            switch value {
            case "connected", "online": wifiConnected = true
            case "notConnected", "not-connected", "offline": wifiConnected = false
            default: throw SimOptionsError(problem: "--wifi: expected connected or offline, got \(value)")
            }
        case "network": networks.append(value)
        case "networks": networks = value.split(separator: ",").map(String.init)
        case "ssid": connectedSSID = value
        case "token-limit":
            guard let n = Int(value), n > 0, n <= 512 else { throw SimOptionsError(problem: "--token-limit: expected 1...512, got \(value)") }
            cloudTokenLimit = n
        case "result":
            guard let r = SimResult(rawValue: value) else {
                throw SimOptionsError(problem: "--result: expected \(SimResult.allCases.map(\.rawValue).joined(separator: ", ")), got \(value)")
            }
            result = r
        case "cancel-resets": cancelResets = try bool()
        case "scan-state": initialScanState = try byte()
        case "scan-error": initialScanError = try byte()
        case "latched-error":
            if try bool() {
                initialScanState = profile.scanStateByte("error") ?? 9
                initialScanError = profile.scanErrorByte("processorBusy") ?? 5
            }
        case "mtu":
            guard let n = UInt16(value), n >= 23 else { throw SimOptionsError(problem: "--mtu: expected 23...65535, got \(value)") }
            serverMTU = n
        case "pace":
            switch value {
            case "fast": timings = .fast
            case "realistic": timings = .realistic
            default: throw SimOptionsError(problem: "--pace: expected fast or realistic, got \(value)")
            }
        case "step-ms":
            guard let n = Int(value), n >= 0 else { throw SimOptionsError(problem: "--step-ms: expected milliseconds, got \(value)") }
            timings.scanStepMilliseconds = n
        case "fault", "faults":
            if let fault = SimConformanceFault(rawValue: value) { conformanceFaults.insert(fault) } else { faults.append(try SimFault(parsing: value)) }
        case "verbose": verbose = try bool()
        case "caching": caching = try bool()
        case "hash-order":
            guard let order = GATTHashOrder(rawValue: value.lowercased()) else {
                throw SimOptionsError(problem: "--hash-order: expected pts or bluez, got \(value)")
            }
            hashOrder = order
        case "client-features": clientFeaturesAtConnect = try byte()
        case "eatt": eatt = try bool()
        case "eatt-refuse":
            let digits = value.hasPrefix("0x") ? String(value.dropFirst(2)) : value
            guard let code = value.hasPrefix("0x") ? UInt16(digits, radix: 16) : UInt16(digits), code != 0 else {
                throw SimOptionsError(problem: "--eatt-refuse: expected an L2CAP result code other than 0 (0x0002 SPSM not supported, 0x0004 no resources available, ...), got \(value)")
            }
            eattRefusal = L2CAPConnectionResult(rawValue: code)
        case "secure":
            let (name, requirement) = try Self.parseSecure(value, names: securableNames)
            secure[name] = requirement
        case "unix-security": unixSecurity = try Self.parseUnixSecurity(value)
        case "change-database-after":
            guard let n = Int(value), n >= 0 else { throw SimOptionsError(problem: "--change-database-after: expected milliseconds, got \(value)") }
            changeDatabaseAfterMilliseconds = n
        default: throw SimOptionsError(problem: "unknown option --\(key)")
        }
    }
}
