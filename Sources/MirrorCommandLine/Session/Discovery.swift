// The LE scan behind `mirror discover`: raw HCI through the bearer's scanner (LE Set Scan Parameters / Enable and
// LE Advertising Reports, Core Spec 5.4 Vol 4 Part E §7.8.10-11, §7.7.65.2), summarised per device.
import ATTStack
import JSON
import LinuxBluetooth

/// One advertiser seen during a scan.
struct DiscoveredDevice: Sendable {
    var address: String
    var addressType: String
    var rssi: Int?
    var name: String?
    var services: [String]
    var connectable: Bool

    init(_ report: LEAdvertisingReport) {
        address = report.address.description
        addressType = report.addressType.description
        rssi = report.rssi == 127 ? nil : Int(report.rssi)
        name = report.localName
        services = advertisedServices(report.data).map(\.description)
        connectable = report.isConnectable
    }

    var json: JSONValue {
        .object([
            ("address", .string(address)), ("addressType", .string(addressType)),
            ("rssi", rssi.map { .int($0) } ?? .null), ("name", name.map { .string($0) } ?? .null),
            ("services", .array(services.map { .string($0) })), ("connectable", .bool(connectable)),
        ])
    }

    var text: String {
        var s = "\(address) (\(addressType))  RSSI \(rssi.map { "\($0) dBm" } ?? "n/a")"
        // The advertised name is any nearby device's bytes (AD type 0x08/0x09): escaped, exact in the JSON.
        if let name { s += "  \"\(TerminalText.escaped(name))\"" }
        if !services.isEmpty {
            s += "  services: " + services.map { u in wellKnownName(u).map { "\(u) \($0)" } ?? u }.joined(separator: ", ")
        }
        if !connectable { s += "  (not connectable)" }
        return s
    }
}

enum Discovery {
    /// Scans on `adapter` (default: the first adapter that is up) for `duration` seconds.
    static func scan(adapter: String?, duration: Double) throws -> [DiscoveredDevice] {
        let name: String
        if let adapter {
            name = adapter
        } else {
            let adapters = try HCIAdapter.list()
            guard let a = adapters.first(where: \.isUp) ?? adapters.first else {
                throw TransportError.noSuchAdapter("hci0", available: [])
            }
            name = a.name
        }
        // The capabilities live on the keeper until the scan's last LE Set Scan Enable is sent (Privilege).
        defer { Privilege.dropAll("after the LE scan") }
        // Raw HCI needs CAP_NET_RAW and CAP_NET_ADMIN: say so before trying, with the line that grants them.
        let capabilities = Capabilities.checkRawHCI()
        guard capabilities.isSatisfied else { throw CLIError.unsupported(capabilities.summary) }
        return try LEScanner.scan(adapter: name, seconds: duration).map(DiscoveredDevice.init)
    }
}
