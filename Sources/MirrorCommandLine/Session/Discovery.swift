// The LE scan behind `mirror discover`: the kernel's discovery through the management socket (Start Discovery,
// Device Found: the advertising and scan response data of Core Spec 5.4 Vol 3 Part C §11), one report per device
// (LinuxBluetooth's LEScanner), and each advertiser as the command prints it.
import ATTStack
import GATTPeer
import JSON
import LinuxBluetooth
import LinkCore

extension LEAdvertisingReport {
    /// `mirror discover --json`'s device: {"address", "addressType", "rssi", "name", "services", "connectable"}.
    var json: JSONValue {
        .object([
            ("address", .string(address.description)), ("addressType", .string(addressType.description)),
            ("rssi", knownRSSI.map { .int($0) } ?? .null), ("name", localName.map { .string($0) } ?? .null),
            ("services", .array(serviceUUIDs.map { .string($0.description) })), ("connectable", .bool(isConnectable)),
        ])
    }

    var text: String {
        var s = "\(address) (\(addressType))  RSSI \(knownRSSI.map { "\($0) dBm" } ?? "n/a")"
        // The advertised name is any nearby device's bytes (AD type 0x08/0x09): escaped, exact in the JSON.
        if let name = localName { s += "  \"\(TerminalText.escaped(name))\"" }
        if !serviceUUIDs.isEmpty {
            s += "  services: " + serviceUUIDs.map { u in u.name.map { "\(u) \($0)" } ?? "\(u)" }.joined(separator: ", ")
        }
        if !isConnectable { s += "  (not connectable)" }
        return s
    }
}

enum Discovery {
    /// Scans on `adapter` (default: the first adapter that is up) for `duration` seconds.
    static func scan(adapter: String?, duration: Double, stopper: LEScanner.Stopper = LEScanner.Stopper()) throws -> [LEAdvertisingReport] {
        let name = try HCIAdapter.chosen(adapter)
        // The capabilities live on the keeper until the management socket is bound (the kernel trusts it from then
        // on); an error before that drops them too.
        defer { Privilege.dropAll("after the management socket was opened") }
        // Discovery needs CAP_NET_ADMIN at the bind: say so before trying, with the line that grants it.
        let capabilities = Capabilities.checkRawHCI()
        guard capabilities.isSatisfied else { throw CLIError.unsupported(capabilities.summary) }
        return try LEScanner.scan(adapter: name, seconds: duration, stopper: stopper,
                                  opened: { Privilege.dropAll("after the management socket was opened") })
    }
}
