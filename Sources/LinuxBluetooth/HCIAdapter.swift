// HCI controllers as the kernel lists them, and the `mirror adapters` report.

import CBlueZSocket
import LinkCore
import Glibc
import JSON

/// One Bluetooth controller as the kernel reports it (HCIGETDEVINFO); `supportsLE` is the LMP feature bit
/// "LE Supported (Controller)" (Core Spec 5.4 Vol 2 Part C §3.3, page 0 bit 38).
public struct HCIAdapter: Sendable, Equatable {
    /// The kernel's device index: 0 for hci0.
    public var index: Int
    /// "hci0".
    public var name: String
    public var address: BluetoothAddress
    /// Powered (HCI_UP).
    public var isUp: Bool
    public var supportsLE: Bool
    public var supportsBREDR: Bool
    /// False while the controller has never been powered: the kernel has not read its features yet, so
    /// `supportsLE` and `supportsBREDR` say nothing.
    public var featuresKnown: Bool
    /// The ACL data length and buffer count (for LE-only controllers, the kernel reports the LE buffers).
    public var aclMTU: Int
    public var aclPackets: Int
    /// How it is attached: "virtual", "usb", "uart", ...
    public var bus: String

    public init(index: Int, name: String, address: BluetoothAddress, isUp: Bool, supportsLE: Bool, supportsBREDR: Bool,
                aclMTU: Int, aclPackets: Int, bus: String, featuresKnown: Bool = true) {
        self.featuresKnown = featuresKnown
        self.index = index
        self.name = name
        self.address = address
        self.isUp = isUp
        self.supportsLE = supportsLE
        self.supportsBREDR = supportsBREDR
        self.aclMTU = aclMTU
        self.aclPackets = aclPackets
        self.bus = bus
    }

    /// Runs `body` with an HCI control socket (AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI; no capability needed).
    static func withControlSocket<T>(_ context: String, _ adapter: String,
                                     _ body: (Int32) throws(TransportError) -> T) throws(TransportError) -> T {
        let ctl = cbz_hci_control_socket()
        if ctl < 0 { throw .socket(lastSocketError("socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)", context, .hci(adapter: adapter))) }
        defer { _ = cbz_close(ctl) }
        return try body(ctl)
    }

    /// Every controller the kernel knows, in index order.
    public static func list() throws(TransportError) -> [HCIAdapter] {
        try withControlSocket("listing Bluetooth adapters", "any") { ctl throws(TransportError) in try list(ctl) }
    }

    static func list(_ ctl: Int32) throws(TransportError) -> [HCIAdapter] {
        var ids = [UInt16](repeating: 0, count: 16)
        let n = cbz_hci_device_list(ctl, &ids, Int32(ids.count))
        if n < 0 { throw .socket(lastSocketError("ioctl(HCIGETDEVLIST)", "listing Bluetooth adapters", .hci(adapter: "any"))) }
        var out: [HCIAdapter] = []
        for id in ids.prefix(min(Int(n), ids.count)).sorted() {
            do { out.append(try info(ctl, index: Int(id))) } catch {
                // A controller removed between the list and the info call is simply gone.
                if case .socket(let e) = error, e.errno == .noSuchDevice { continue }
                throw error
            }
        }
        return out
    }

    /// How many connections the controller has now (HCIGETCONNLIST; at most 32 are counted).
    public static func connectionCount(index: Int) throws(TransportError) -> Int {
        try withControlSocket("listing the connections of hci\(index)", "hci\(index)") { ctl throws(TransportError) in
            let n = cbz_hci_connection_count(ctl, Int32(index))
            if n < 0 { throw .socket(lastSocketError("ioctl(HCIGETCONNLIST)", "listing the connections of hci\(index)", .hci(adapter: "hci\(index)"))) }
            return Int(n)
        }
    }

    /// One controller by index.
    public static func info(index: Int) throws(TransportError) -> HCIAdapter {
        try withControlSocket("reading adapter hci\(index)", "hci\(index)") { ctl throws(TransportError) in try info(ctl, index: index) }
    }

    static func info(_ ctl: Int32, index: Int) throws(TransportError) -> HCIAdapter {
        var raw = cbz_hci_info()
        if cbz_hci_device_info(ctl, Int32(index), &raw) < 0 {
            throw .socket(lastSocketError("ioctl(HCIGETDEVINFO)", "reading adapter hci\(index)", .hci(adapter: "hci\(index)")))
        }
        return HCIAdapter(raw)
    }

    init(_ raw: cbz_hci_info) {
        index = Int(raw.dev_id)
        name = withUnsafeBytes(of: raw.name) { b in
            String(decoding: b.prefix { $0 != 0 }, as: UTF8.self)
        }
        address = withUnsafeBytes(of: raw.addr) { BluetoothAddress(uncheckedBytes: Array($0)) }
        isUp = raw.up
        supportsLE = raw.le
        supportsBREDR = raw.bredr
        featuresKnown = withUnsafeBytes(of: raw.features) { $0.contains { $0 != 0 } }
        aclMTU = Int(raw.acl_mtu)
        aclPackets = Int(raw.acl_pkts)
        bus = Self.busNames[Int(raw.bus)] ?? "bus \(raw.bus)"
    }

    static let busNames: [Int: String] = [0: "virtual", 1: "usb", 2: "pccard", 3: "uart", 4: "rs232", 5: "pci",
                                          6: "sdio", 7: "spi", 8: "i2c", 9: "smd", 10: "virtio", 11: "ipc"]

    /// Parses "hci0" or "0" into an index; nil for anything else.
    public static func index(fromName text: String) -> Int? {
        let digits = text.hasPrefix("hci") ? String(text.dropFirst(3)) : text
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int(digits), n >= 0, n < 0x10000 else { return nil }
        return n
    }

    /// Finds a controller by "hci0", "0" or its address; `.noSuchAdapter` lists the ones that exist.
    public static func resolve(_ selector: String) throws(TransportError) -> HCIAdapter {
        if let idx = index(fromName: selector) {
            do { return try info(index: idx) } catch {
                if case .socket(let e) = error, e.errno == .noSuchDevice {
                    throw .noSuchAdapter(selector, available: ((try? list()) ?? []).map(\.name))
                }
                throw error
            }
        }
        let address: BluetoothAddress
        do { address = try BluetoothAddress(parsing: selector) } catch {
            throw .invalidTarget(BearerTargetError(input: selector, position: error.position,
                                                   problem: "an adapter is hciN or its address: \(error.problem)"))
        }
        let all = try list()
        if let a = all.first(where: { $0.address == address }) { return a }
        throw .noSuchAdapter(selector, available: all.map { "\($0.name) (\($0.address))" })
    }

    /// Powers the controller on (HCIDEVUP; needs CAP_NET_ADMIN). Already up is not an error.
    public func up() throws(TransportError) {
        try Self.withControlSocket("powering on \(name)", name) { ctl throws(TransportError) in
            // HCIDEVUP checks CAP_NET_ADMIN of the calling thread: on the capability keeper while it lives.
            let code = Privilege.perform { [index] in cbz_hci_device_up(ctl, Int32(index)) < 0 ? cbz_errno() : 0 }
            if code != 0 {
                if code == EALREADY { return }
                throw .socket(socketError("ioctl(HCIDEVUP)", code, "powering on \(name)", .hci(adapter: name)))
            }
        }
    }

    /// Powers the controller off (HCIDEVDOWN; needs CAP_NET_ADMIN).
    public func down() throws(TransportError) {
        try Self.withControlSocket("powering off \(name)", name) { ctl throws(TransportError) in
            let code = Privilege.perform { [index] in cbz_hci_device_down(ctl, Int32(index)) < 0 ? cbz_errno() : 0 }
            if code != 0 {
                throw .socket(socketError("ioctl(HCIDEVDOWN)", code, "powering off \(name)", .hci(adapter: name)))
            }
        }
    }

    /// "LE", "LE+BR/EDR", "BR/EDR only", or "LE unknown" before the first power-on.
    public var radioDescription: String {
        if !featuresKnown { return "LE unknown" }
        return supportsLE && supportsBREDR ? "LE+BR/EDR" : supportsLE ? "LE" : supportsBREDR ? "BR/EDR only" : "neither"
    }

    /// One line: "hci0  00:AA:01:00:00:00  up    LE        acl 192x1  virtual".
    public var summaryLine: String {
        let radio = radioDescription
        return [name.padded(toLength: 6), address.description,
                (isUp ? "up" : "down").padded(toLength: 5),
                radio.padded(toLength: 11),
                "acl \(aclMTU)x\(aclPackets)".padded(toLength: 12), bus].joined(separator: " ")
    }
}

/// The `mirror adapters` report: every controller, or why none can be listed, with text and JSON renderings.
public struct AdaptersReport: Sendable, Equatable {
    public var adapters: [HCIAdapter]
    /// Why listing failed (no Bluetooth in the kernel, ...), nil when it worked.
    public var error: String?

    public init(adapters: [HCIAdapter], error: String? = nil) {
        self.adapters = adapters
        self.error = error
    }

    /// Lists the adapters now.
    public static func collect() -> AdaptersReport {
        do { return AdaptersReport(adapters: try HCIAdapter.list(), error: nil) } catch {
            return AdaptersReport(adapters: [], error: error.description)
        }
    }

    public var text: String {
        if let error { return "adapters: none can be listed: \(error)\n" }
        if adapters.isEmpty { return "adapters: none (the kernel has Bluetooth, but no controller is attached)\n" }
        var s = ""
        for a in adapters {
            s += a.summaryLine + "\n"
            if !a.isUp { s += "       down: power it on with `sudo btmgmt -i \(a.name) power on`\n" }
            if !a.supportsLE && a.isUp && a.featuresKnown { s += "       this controller has no LE: it cannot reach an LE peripheral\n" }
        }
        return s
    }

    /// The report as one line of JSON, keys sorted; `error` only when listing failed.
    public var json: String { jsonValue.compact }

    public var jsonValue: JSONValue {
        .sortedObject([("adapters", .array(adapters.map(\.jsonValue)))] + (error.map { [("error", .string($0))] } ?? []))
    }
}

extension HCIAdapter {
    /// The adapter as a JSON object, keys sorted.
    public var jsonValue: JSONValue {
        .sortedObject([
            ("index", .int(index)), ("name", .string(name)), ("address", .string(address.description)), ("isUp", .bool(isUp)),
            ("supportsLE", .bool(supportsLE)), ("supportsBREDR", .bool(supportsBREDR)), ("featuresKnown", .bool(featuresKnown)),
            ("aclMTU", .int(aclMTU)), ("aclPackets", .int(aclPackets)), ("bus", .string(bus)),
        ])
    }
}
