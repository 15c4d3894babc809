// Parsers for the values on a command line. Each refuses with the exact token that was wrong.

/// A TARGET: a Bluetooth device address with its type, or `unix:PATH` (a simulator's AF_UNIX SOCK_SEQPACKET socket).
public enum TargetArgument: Sendable, Equatable, CustomStringConvertible {
    /// An LE device address in printed form ("00:AA:01:01:00:01", uppercase), with its type.
    case address(String, AddressType)
    /// A unix socket path.
    case unix(String)

    public var description: String {
        switch self {
        case .address(let a, let t): return "\(a) (LE \(t.rawValue))"
        case .unix(let p): return "unix:\(p)"
        }
    }
}

/// Parses a TARGET: "unix:/tmp/sim.sock" or "AA:BB:CC:DD:EE:FF" (the type comes from `--type`, default public).
public func parseTarget(_ token: String, type: AddressType?) throws(UsageError) -> TargetArgument {
    if token.hasPrefix("unix:") {
        let path = String(token.dropFirst(5))
        guard !path.isEmpty else { throw UsageError("invalid target \"\(token)\": unix: needs a socket path, as in unix:/tmp/mirror-sim.sock", token: token) }
        // sun_path holds 108 bytes including the terminating NUL.
        guard path.utf8.count <= 107 else {
            throw UsageError("invalid target \"\(token)\": the socket path is \(path.utf8.count) bytes, longer than the 107 a unix socket address holds", token: token)
        }
        if type != nil {
            throw UsageError("--type applies to a device address, not to the unix socket target \"\(token)\"", token: token)
        }
        return .unix(path)
    }
    return .address(try parseAddress(token), type ?? .public)
}

/// Parses a device address "AA:BB:CC:DD:EE:FF" (also with "-" separators) into its uppercase printed form.
public func parseAddress(_ token: String) throws(UsageError) -> String {
    let separator: Character = token.contains("-") ? "-" : ":"
    let parts = token.split(separator: separator, omittingEmptySubsequences: false)
    guard parts.count == 6 else {
        throw UsageError("invalid address \"\(token)\": expected six hex bytes as in 00:AA:01:01:00:01, or unix:PATH", token: token)
    }
    for (i, part) in parts.enumerated() {
        guard part.count == 2, part.allSatisfy(\.isHexDigit) else {
            throw UsageError("invalid address \"\(token)\": byte \(i + 1) \"\(part)\" is not two hex digits", token: token)
        }
    }
    return parts.map { $0.uppercased() }.joined(separator: ":")
}

/// Parses an attribute handle: decimal ("18") or hex with 0x ("0x0012"), 0x0001-0xFFFF.
public func parseHandle(_ token: String) throws(UsageError) -> UInt16 {
    guard let value = parseInteger(token) else {
        throw UsageError("invalid handle \"\(token)\": expected a decimal number or 0x hex, as in 18 or 0x0012", token: token)
    }
    guard value != 0 else {
        throw UsageError("invalid handle \"\(token)\": handle 0x0000 is reserved (handles are 0x0001-0xFFFF)", token: token)
    }
    guard value <= 0xFFFF else {
        throw UsageError("invalid handle \"\(token)\": larger than 0xFFFF", token: token)
    }
    return UInt16(value)
}

/// Parses a decimal or 0x-hex non-negative integer; nil when it is neither.
public func parseInteger(_ token: String) -> UInt64? {
    if token.hasPrefix("0x") || token.hasPrefix("0X") {
        let digits = token.dropFirst(2)
        guard !digits.isEmpty, digits.count <= 16, digits.allSatisfy(\.isHexDigit) else { return nil }
        return UInt64(digits, radix: 16)
    }
    guard !token.isEmpty, token.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    return UInt64(token)
}

/// Parses a count or size: a decimal or 0x-hex integer within `range`.
public func parseCount(_ token: String, in range: ClosedRange<Int>, what: String) throws(UsageError) -> Int {
    guard let value = parseInteger(token) else {
        throw UsageError("invalid \(what) \"\(token)\": expected a whole number", token: token)
    }
    guard value <= UInt64(Int.max), range.contains(Int(value)) else {
        throw UsageError("invalid \(what) \"\(token)\": must be \(range.lowerBound)-\(range.upperBound)", token: token)
    }
    return Int(value)
}

/// Parses an ATT MTU for `--mtu`: 23-517 (Core Spec Vol 3 Part F §3.2.8; 517 holds a 512-byte value).
public func parseMTU(_ token: String) throws(UsageError) -> Int {
    try parseCount(token, in: 23...517, what: "MTU")
}

/// Parses a duration in seconds: "5", "0.5", "2.5s", "250ms".
public func parseSeconds(_ token: String) throws(UsageError) -> Double {
    var text = Substring(token)
    var scale = 1.0
    if text.hasSuffix("ms") {
        text = text.dropLast(2)
        scale = 0.001
    } else if text.hasSuffix("s") {
        text = text.dropLast()
    }
    guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
          let value = Double(text), value.isFinite, value > 0 else {
        throw UsageError("invalid duration \"\(token)\": expected seconds greater than 0, as in 5, 0.5 or 250ms", token: token)
    }
    return value * scale
}

/// Parses an adapter name: "hci0" (or just "0").
public func parseAdapter(_ token: String) throws(UsageError) -> String {
    let digits = token.hasPrefix("hci") ? token.dropFirst(3) : Substring(token)
    guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
        throw UsageError("invalid adapter \"\(token)\": expected hciN, as in hci0", token: token)
    }
    return "hci\(Int(digits)!)"
}

/// Parses one of an enum's raw values.
public func parseChoice<T: RawRepresentable & CaseIterable>(_ token: String, _ type: T.Type, what: String) throws(UsageError) -> T
where T.RawValue == String {
    guard let value = T(rawValue: token) else {
        let choices = T.allCases.map(\.rawValue).joined(separator: ", ")
        throw UsageError("invalid \(what) \"\(token)\": expected one of \(choices)", token: token)
    }
    return value
}

/// Parses a hex value: "0102ff", "0x0102ff", "01:02:ff", "01 02 ff"; "" is the empty value.
/// At most 512 bytes (the largest attribute value, Core Spec Vol 3 Part F §3.2.9).
public func parseHexValue(_ token: String) throws(UsageError) -> [UInt8] {
    var digits: [UInt8] = []
    var text = Substring(token)
    if text.hasPrefix("0x") || text.hasPrefix("0X") { text = text.dropFirst(2) }
    let separated = text.contains(":") || text.contains(" ") || text.contains("-")
    var position = token.count - text.count
    var bytes: [UInt8] = []
    for ch in text {
        position += 1
        if separated && (ch == ":" || ch == " " || ch == "-") {
            if digits.count == 1 {
                throw UsageError("invalid hex value \"\(token)\": the byte before position \(position) has one hex digit (each byte is two)", token: token)
            }
            continue
        }
        guard let nibble = ch.hexDigitValue, ch.isASCII else {
            throw UsageError("invalid hex value \"\(token)\": \"\(ch)\" at position \(position) is not a hex digit", token: token)
        }
        digits.append(UInt8(nibble))
        if digits.count == 2 {
            bytes.append(digits[0] << 4 | digits[1])
            digits.removeAll(keepingCapacity: true)
        }
    }
    guard digits.isEmpty else {
        throw UsageError("invalid hex value \"\(token)\": odd number of hex digits (each byte is two digits)", token: token)
    }
    guard bytes.count <= 512 else {
        throw UsageError("invalid hex value \"\(token.prefix(16))...\": \(bytes.count) bytes, more than the 512 an attribute value can hold", token: token)
    }
    return bytes
}

/// A UUID typed on the command line, in canonical lowercase form: 4 hex digits for a 16-bit UUID on the
/// Bluetooth Base UUID, 8 for 32-bit, else the 36-character form.
public struct UUIDArgument: Sendable, Equatable, CustomStringConvertible {
    /// The canonical lowercase form.
    public var text: String
    public var description: String { text }
}

/// Parses a UUID: "2a00", "0x2A00", "uuid:1234", "12345678", or "0000180a-0000-1000-8000-00805f9b34fb".
public func parseUUID(_ token: String) throws(UsageError) -> UUIDArgument {
    var text = Substring(token)
    if text.hasPrefix("uuid:") { text = text.dropFirst(5) }
    if text.hasPrefix("0x") || text.hasPrefix("0X") { text = text.dropFirst(2) }
    let lower = text.lowercased()
    if (lower.count == 4 || lower.count == 8) && lower.allSatisfy(\.isHexDigit) {
        return UUIDArgument(text: lower)
    }
    let groups = lower.split(separator: "-", omittingEmptySubsequences: false)
    if lower.count == 36, groups.map(\.count) == [8, 4, 4, 4, 12], groups.allSatisfy({ $0.allSatisfy(\.isHexDigit) }) {
        if lower.hasPrefix("0000"), lower.hasSuffix("-0000-1000-8000-00805f9b34fb") {
            return UUIDArgument(text: String(lower.dropFirst(4).prefix(4)))
        }
        return UUIDArgument(text: lower)
    }
    throw UsageError("invalid UUID \"\(token)\": expected 4 or 8 hex digits (2a00) or the 36-character form (0000180a-0000-1000-8000-00805f9b34fb)", token: token)
}

/// What `mirror read` reads: one handle, or every attribute of a characteristic type.
public enum AttributeSelector: Sendable, Equatable {
    case handle(UInt16)
    case uuid(UUIDArgument)
}

/// Parses HANDLE|UUID: digits or 0x-hex is a handle; 4 or 8 hex digits with a letter, "uuid:..." or the
/// 36-character form is a UUID (so "uuid:1234" reads UUID 0x1234, "1234" reads handle 1234).
public func parseHandleOrUUID(_ token: String) throws(UsageError) -> AttributeSelector {
    if token.hasPrefix("uuid:") { return .uuid(try parseUUID(token)) }
    if token.hasPrefix("0x") || token.hasPrefix("0X") || token.allSatisfy({ $0.isASCII && $0.isNumber }) {
        return .handle(try parseHandle(token))
    }
    do {
        return .uuid(try parseUUID(token))
    } catch {
        throw UsageError("invalid HANDLE or UUID \"\(token)\": expected a handle (18, 0x0012) or a UUID (2a00, uuid:1234, or the 36-character form)", token: token)
    }
}
