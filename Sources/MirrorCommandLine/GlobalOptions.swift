// The options every command may take (each command says which ones it honours).

/// The names of the global options.
public enum GlobalOptionName: String, Sendable, CaseIterable, Hashable {
    case adapter = "--adapter"
    case type = "--type"
    case timeout = "--timeout"
    case mtu = "--mtu"
    case security = "--security"
    case trace = "--trace"
    case btsnoop = "--btsnoop"
    case json = "--json"
    case profile = "--profile"

    /// What a command that connects to a GATT server honours (--profile: names for the mirror's characteristics).
    public static let connection: Set<GlobalOptionName> = [.adapter, .type, .timeout, .mtu, .security, .trace, .btsnoop, .json, .profile]
}

/// The link security level asked for with BT_SECURITY (low: none, medium: encrypted, high: authenticated MITM).
public enum SecurityLevel: String, Sendable, CaseIterable {
    case low, medium, high
}

/// The address type of an LE address (Core Spec Vol 6 Part B §1.3).
public enum AddressType: String, Sendable, CaseIterable {
    case `public`, random
}

/// The global options after parsing and validation.
public struct GlobalOptions: Sendable, Equatable {
    /// The HCI adapter, "hci0"; nil for the kernel's choice.
    public var adapter: String?
    /// The address type for TARGETs given as addresses; nil when not given (public).
    public var addressType: AddressType?
    /// The ATT request timeout and connect timeout, in seconds (default 30, the spec's transaction timeout).
    public var timeout: Double
    /// The client Rx MTU to offer in Exchange MTU; nil for the library's default.
    public var mtu: Int?
    public var security: SecurityLevel?
    /// Decode every PDU on stderr with direction and timestamp.
    public var trace: Bool
    /// Write every PDU to this btsnoop file.
    public var btsnoop: String?
    /// Print JSON instead of text.
    public var json: Bool
    /// A mirror profile file (scan and wifi).
    public var profile: String?

    public init(adapter: String? = nil, addressType: AddressType? = nil, timeout: Double = 30, mtu: Int? = nil,
                security: SecurityLevel? = nil, trace: Bool = false, btsnoop: String? = nil, json: Bool = false,
                profile: String? = nil) {
        self.adapter = adapter
        self.addressType = addressType
        self.timeout = timeout
        self.mtu = mtu
        self.security = security
        self.trace = trace
        self.btsnoop = btsnoop
        self.json = json
        self.profile = profile
    }

    /// The option table for parsing and for `mirror --help`.
    public static let specs: [OptionSpec] = [
        .value("--adapter", "hciN", help: "the HCI adapter to use (default: the kernel's choice)"),
        .value("--type", "public|random", help: "the address type of a TARGET given as an address (default public)"),
        .value("--timeout", "S", help: "seconds to wait for a connection or an ATT response (default 30)"),
        .value("--mtu", "N", help: "the ATT MTU to offer in Exchange MTU, 23-517 (default 517)"),
        .value("--security", "low|medium|high", help: "the link security level to ask for (BT_SECURITY)"),
        .flag("--trace", help: "print every ATT PDU, decoded, with direction and timestamp, on stderr"),
        .value("--btsnoop", "FILE", help: "record every ATT PDU to FILE in btsnoop format (Wireshark, btmon -r)"),
        .flag("--json", help: "print JSON instead of text (errors too)"),
        .value("--profile", "FILE", help: "the mirror profile file (scan, wifi; names the mirror's characteristics elsewhere; default: the bundled one)"),
    ]

    init(values: [String: [String]], flags: Set<String>, command: String) throws(UsageError) {
        self.init()
        func value<T>(_ option: GlobalOptionName, _ parse: (String) throws(UsageError) -> T) throws(UsageError) -> T? {
            guard let raw = values[option.rawValue]?.last else { return nil }
            do { return try parse(raw) } catch { throw UsageError("\(option.rawValue): \(error.message)", token: raw, command: command) }
        }
        adapter = try value(.adapter, parseAdapter)
        addressType = try value(.type) { (s: String) throws(UsageError) in try parseChoice(s, AddressType.self, what: "address type") }
        timeout = try value(.timeout) { (s: String) throws(UsageError) in try parseSeconds(s) } ?? 30
        mtu = try value(.mtu, parseMTU)
        security = try value(.security) { (s: String) throws(UsageError) in try parseChoice(s, SecurityLevel.self, what: "security level") }
        trace = flags.contains(GlobalOptionName.trace.rawValue)
        btsnoop = values[GlobalOptionName.btsnoop.rawValue]?.last
        json = flags.contains(GlobalOptionName.json.rawValue)
        profile = values[GlobalOptionName.profile.rawValue]?.last
        if let path = btsnoop, path.isEmpty { throw UsageError("--btsnoop: empty file name", token: path, command: command) }
        if let path = profile, path.isEmpty { throw UsageError("--profile: empty file name", token: path, command: command) }
    }
}
