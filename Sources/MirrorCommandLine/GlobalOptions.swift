// The options every command may take (each command says which ones it honours).
import GATTPeer

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
    case interval = "--interval"
    case latency = "--latency"
    case supervisionTimeout = "--supervision-timeout"
    case phy = "--phy"
    case dataLength = "--data-length"
    case noCache = "--no-cache"
    case bearers = "--bearers"
    case pair = "--pair"
    case repair = "--repair"

    /// The options that ask the controller for a link (HCI LE Connection Update, LE Set PHY, LE Set Data Length).
    public static let link: Set<GlobalOptionName> = [.interval, .latency, .supervisionTimeout, .phy, .dataLength]

    /// What a command that connects to a GATT server honours (--profile: names for the mirror's characteristics).
    public static let connection: Set<GlobalOptionName> = Set<GlobalOptionName>([.adapter, .type, .timeout, .mtu, .security, .trace, .btsnoop, .json, .profile, .noCache, .bearers, .pair, .repair]).union(link)
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
    /// The link asked for (--interval, --latency, --supervision-timeout, --phy, --data-length); empty: as it is.
    public var link: LinkRequestOptions = LinkRequestOptions()
    /// Neither read nor write the GATT cache (--no-cache): discover the database afresh, as before the cache.
    public var noCache = false
    /// How many ATT bearers to open (--bearers): CID 4 and up to bearers-1 Enhanced ATT bearers (Core Spec Vol 3
    /// Part F §3.2.11); 1, the default, is CID 4 alone and nothing is read or written for EATT.
    public var bearers = 1
    /// Pair when the link's security is raised (--pair): this process answers the kernel's pairing requests
    /// (Just Works) for the connection's life, and the adapter keeps the keys.
    public var pair = false
    /// Pair again when the peer has forgotten the bond (--repair): this host's bond is removed (store and kernel,
    /// as `mirror bonds remove`), a pairing runs on a fresh connection, and the command goes on.
    public var repair = false

    /// What `--bearers` takes: CID 4 and up to four Enhanced ATT bearers.
    public static let bearerRange: ClosedRange<Int> = 1...5

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
        .choice("--type", "public|random", AddressType.self, help: "the address type of a TARGET given as an address (default public)"),
        .value("--timeout", "S", help: "seconds to wait for a connection or an ATT response (default 30)"),
        .value("--mtu", "N", help: "the ATT MTU to offer in Exchange MTU, 23-517 (default 517)"),
        .choice("--security", "low|medium|high", SecurityLevel.self, help: "the link security level to ask for (BT_SECURITY)"),
        .flag("--trace", help: "print every ATT PDU, decoded, with direction and timestamp, on stderr"),
        .value("--btsnoop", "FILE", help: "record every ATT PDU to FILE in btsnoop format (Wireshark, btmon -r)"),
        .flag("--json", help: "print JSON instead of text (errors too)"),
        .value("--profile", "FILE", help: "the mirror profile file (scan, wifi; names the mirror's characteristics elsewhere; default: the bundled one)"),
        .value("--interval", "MIN[-MAX]", help: "ask for a connection interval in ms, 7.5-4000 in steps of 1.25 (LE Connection Update)"),
        .value("--latency", "N", help: "ask for a peripheral latency of N connection events, 0-499"),
        .value("--supervision-timeout", "MS", help: "ask for a supervision timeout in ms, 100-32000 in steps of 10"),
        .choice("--phy", "1m|2m|coded", LinkPHYChoice.self, help: "ask for this PHY both ways (LE Set PHY)"),
        .value("--data-length", "OCTETS", help: "ask for this link-layer data length, 27-251 octets (LE Set Data Length)"),
        .flag("--no-cache", help: "neither read nor write the GATT cache ($XDG_CACHE_HOME/mirror): discover the database afresh"),
        .value("--bearers", "N", help: "open N ATT bearers, 1-5: CID 4 and N-1 Enhanced ATT bearers (EATT, ECRED on PSM 0x27) where the peer serves them (default 1)"),
        .flag("--pair", help: "pair (Just Works) and bond when the link's security is raised (--security, or a peer's Insufficient Authentication), this process as the agent; needs CAP_NET_ADMIN"),
        .flag("--repair", help: "when the peer has forgotten the bond (Encryption Change 0x06 PIN or Key Missing), remove this host's bond (as `mirror bonds remove`) and pair again (Just Works) on a fresh connection, then go on; needs CAP_NET_ADMIN"),
    ]

    /// These options with those a later line gave (`given`, as `ParsedArguments.givenGlobals` says) laid over
    /// them: `mirror shell`'s options, then a connect line's.
    public func overlaid(by line: GlobalOptions, given: Set<GlobalOptionName>) -> GlobalOptions {
        var o = self
        for name in given {
            switch name {
            case .adapter: o.adapter = line.adapter
            case .type: o.addressType = line.addressType
            case .timeout: o.timeout = line.timeout
            case .mtu: o.mtu = line.mtu
            case .security: o.security = line.security
            case .trace: o.trace = line.trace
            case .btsnoop: o.btsnoop = line.btsnoop
            case .json: o.json = line.json
            case .profile: o.profile = line.profile
            case .interval: o.link.interval = line.link.interval
            case .latency: o.link.latency = line.link.latency
            case .supervisionTimeout: o.link.supervisionTimeoutMilliseconds = line.link.supervisionTimeoutMilliseconds
            case .phy: o.link.phy = line.link.phy
            case .dataLength: o.link.dataLength = line.link.dataLength
            case .noCache: o.noCache = line.noCache
            case .bearers: o.bearers = line.bearers
            case .pair: o.pair = line.pair
            case .repair: o.repair = line.repair
            }
        }
        return o
    }

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
        noCache = flags.contains(GlobalOptionName.noCache.rawValue)
        pair = flags.contains(GlobalOptionName.pair.rawValue)
        repair = flags.contains(GlobalOptionName.repair.rawValue)
        bearers = try value(.bearers) { (s: String) throws(UsageError) in try parseCount(s, in: GlobalOptions.bearerRange, what: "bearer count") } ?? 1
        profile = values[GlobalOptionName.profile.rawValue]?.last
        link.interval = try value(.interval, parseConnectionInterval)
        link.latency = try value(.latency) { (s: String) throws(UsageError) in try parseCount(s, in: LinkRequestOptions.latencyRange, what: "peripheral latency") }
        link.supervisionTimeoutMilliseconds = try value(.supervisionTimeout, parseSupervisionTimeout)
        link.phy = try value(.phy) { (s: String) throws(UsageError) in try parseChoice(s, LinkPHYChoice.self, what: "PHY") }
        link.dataLength = try value(.dataLength) { (s: String) throws(UsageError) in try parseCount(s, in: LinkRequestOptions.dataLengthRange, what: "data length") }
        if let problem = link.inconsistency {
            throw UsageError(problem, token: values[GlobalOptionName.supervisionTimeout.rawValue]?.last ?? "", command: command)
        }
        if let path = btsnoop, path.isEmpty { throw UsageError("--btsnoop: empty file name", token: path, command: command) }
        if let path = profile, path.isEmpty { throw UsageError("--profile: empty file name", token: path, command: command) }
    }
}

/// Parses `--interval MIN[-MAX]` in ms: 7.5-4000 in steps of 1.25 ms, MIN <= MAX ("7.5", "15-30").
public func parseConnectionInterval(_ token: String) throws(UsageError) -> ClosedRange<Double> {
    let parts = token.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
    func one(_ text: String) throws(UsageError) -> Double {
        let allowed = "\(formatMilliseconds(LinkRequestOptions.intervalRange.lowerBound))-\(formatMilliseconds(LinkRequestOptions.intervalRange.upperBound)) ms in steps of 1.25 ms"
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let ms = Double(text), ms.isFinite else {
            throw UsageError("invalid connection interval \"\(token)\": expected MIN or MIN-MAX in ms, \(allowed), as in 7.5 or 15-30", token: token)
        }
        guard LinkRequestOptions.intervalRange.contains(ms) else {
            throw UsageError("invalid connection interval \"\(token)\": \(text) ms is outside \(allowed)", token: token)
        }
        let units = ms / 1.25
        guard abs(units - units.rounded()) < 1e-9 else {
            throw UsageError("invalid connection interval \"\(token)\": \(text) ms is not a multiple of 1.25 ms (\(allowed))", token: token)
        }
        return units.rounded() * 1.25
    }
    let low = try one(parts[0])
    let high = parts.count > 1 ? try one(parts[1]) : low
    guard low <= high else {
        throw UsageError("invalid connection interval \"\(token)\": MIN \(parts[0]) ms is larger than MAX \(parts[1]) ms", token: token)
    }
    return low...high
}

/// Parses `--supervision-timeout MS`: 100-32000 ms in steps of 10 ms.
public func parseSupervisionTimeout(_ token: String) throws(UsageError) -> Int {
    let ms = try parseCount(token, in: LinkRequestOptions.supervisionTimeoutRange, what: "supervision timeout")
    guard ms % 10 == 0 else {
        throw UsageError("invalid supervision timeout \"\(token)\": \(ms) ms is not a multiple of 10 ms (100-32000 ms in steps of 10 ms)", token: token)
    }
    return ms
}
