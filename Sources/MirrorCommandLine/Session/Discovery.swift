// The LE scan behind `mirror discover`: the kernel's discovery through the management socket (Start Discovery,
// Device Found: the advertising and scan response data of Core Spec 5.4 Vol 3 Part C §11), summarised per device.
import ATTStack
import GATTPeer
import JSON
import LinuxBluetooth
import LinkCore

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
        services = report.serviceUUIDs.map(\.description)
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
    static func scan(adapter: String?, duration: Double, stopper: LEScanner.Stopper = LEScanner.Stopper()) throws -> [DiscoveredDevice] {
        let name = try HCIAdapter.chosen(adapter)
        // The capabilities live on the keeper until the management socket is bound (the kernel trusts it from then
        // on); an error before that drops them too.
        defer { Privilege.dropAll("after the management socket was opened") }
        // Discovery needs CAP_NET_ADMIN at the bind: say so before trying, with the line that grants it.
        let capabilities = Capabilities.checkRawHCI()
        guard capabilities.isSatisfied else { throw CLIError.unsupported(capabilities.summary) }
        return try LEScanner.scan(adapter: name, seconds: duration, stopper: stopper,
                                  opened: { Privilege.dropAll("after the management socket was opened") })
            .map(DiscoveredDevice.init)
    }
}
