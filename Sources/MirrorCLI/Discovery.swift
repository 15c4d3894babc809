// The LE scan behind `mirror discover`: raw HCI through the bearer branch's scan primitives.
import MirrorCommandLine

/// One advertiser seen during a scan.
struct DiscoveredDevice: Sendable {
    var address: String
    var addressType: AddressType
    var rssi: Int
    var name: String?
    var services: [String]

    var json: JSONValue {
        .object([
            ("address", .string(address)), ("addressType", .string(addressType.rawValue)), ("rssi", .int(rssi)),
            ("name", name.map { .string($0) } ?? .null), ("services", .array(services.map { .string($0) })),
        ])
    }

    var text: String {
        var s = "\(address) (\(addressType.rawValue))  RSSI \(rssi) dBm"
        if let name { s += "  \"\(name)\"" }
        if !services.isEmpty { s += "  services: " + services.joined(separator: ", ") }
        return s
    }
}

enum Discovery {
    static func scan(adapter: String?, duration: Double) async throws -> [DiscoveredDevice] {
        throw CLIError.unsupported("LE scan needs the raw HCI primitives of the bearer branch, not merged into this build")
    }
}
